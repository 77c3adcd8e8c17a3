/**
 * No answer without its audit entry, even across a crash (issue 10, item 3): 32 agents send
 * requests through the gateway of the service running as a process; the process group is
 * killed with SIGKILL in the middle; after a restart on the same store, every request whose
 * answer a client received in full has its entry, and the chain verifies.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { freshDatabaseUrl } from '../helpers/db.js';
import { client, type ApiClient } from '../helpers/service.js';
import { killGroup, startChildService, type ChildService } from '../helpers/child-service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { proxyAgent } from '../helpers/proxy-client.js';

describe('audit across a crash: kill -9 under 32 concurrent agents (issue 10)', function () {
  this.timeout(90_000);
  let dir: string;
  let up: FakeUpstream;
  let db: { url: string; drop(): Promise<void> };
  let env: Record<string, string>;
  let running: ChildService | null = null;
  const start = (env: Record<string, string>) => startChildService(env, { detached: true });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-audit-crash-'));
    up = await startFakeUpstream();
    up.respond = (req, res) => {
      const body = JSON.stringify({ path: req.url, pad: 'x'.repeat(200) });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    db = freshDatabaseUrl();
    env = {
      API_PORT: '0',
      PROXY_PORT: '0',
      DATA_DIR: join(dir, 'data'),
      DATABASE_URL: db.url,
      GATEWAY_BOOTSTRAP_API_KEY: `sk_${randomBytes(20).toString('hex')}`,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
      GATEWAY_RUNTIME: 'none',
      GATEWAY_UPSTREAM_OVERRIDES: `api.example.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
      LOG_LEVEL: 'info',
    };
  });

  after(async () => {
    if (running) killGroup(running.child);
    await up.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every answer received in full has its entry after the restart, and the chain verifies', async () => {
    running = await start(env);
    let api: ApiClient = client(running.ready.api_url, env.GATEWAY_BOOTSTRAP_API_KEY!);
    const created = await api.post('/v1/environments', { end_user_id: 'crash-agent', egress_allow: ['api.example.com'] });
    expect(created.status, created.text).to.equal(201);
    const envId: string = created.body.id;
    const gw = (await api.get(`/v1/environments/${envId}/gateway`)).body;

    const completed = new Set<string>();
    let failed = 0;
    let stop = false;
    const agents = Array.from({ length: 32 }, async (_, k) => {
      const agent = proxyAgent(gw);
      for (let i = 0; !stop; i++) {
        const path = `/agent-${k}/req-${i}`;
        try {
          const r = await request(`https://api.example.com${path}`, { dispatcher: agent });
          const body = (await r.body.json()) as { path: string };
          // Received in full: the status, and a body whose length matched Content-Length.
          if (r.statusCode === 200 && body.path === path) completed.add(path);
        } catch {
          failed++;
          break; // the service is gone
        }
      }
      await agent.destroy().catch(() => {});
    });
    // Let them run until a good number of answers went out, then crash mid-flight.
    while (completed.size < 400) await new Promise((r) => setTimeout(r, 10));
    const child = running.child;
    killGroup(child);
    await running.exited;
    running = null;
    stop = true;
    await Promise.all(agents);
    expect(failed, 'in-flight requests were cut by the crash').to.be.greaterThan(0);

    running = await start(env);
    api = client(running.ready.api_url, env.GATEWAY_BOOTSTRAP_API_KEY!);
    const logged = new Set<string>();
    let after: string | null = null;
    for (;;) {
      const page: { status: number; body: { data: unknown[]; next: string | null } } = await api.get(`/v1/audit-log?environment_id=${envId}&limit=200${after ? `&after=${after}` : ''}`);
      expect(page.status).to.equal(200);
      for (const e of page.body.data as Array<{ path: string }>) logged.add(e.path);
      after = page.body.next;
      if (!after) break;
    }
    const missing = [...completed].filter((p) => !logged.has(p));
    expect(missing, `${missing.length} of ${completed.size} answered requests have no entry`).to.deep.equal([]);
    const verify = await api.get('/v1/audit-log/verify');
    expect(verify.status).to.equal(200);
    expect(verify.body.ok, JSON.stringify(verify.body)).to.equal(true);
  });
});
