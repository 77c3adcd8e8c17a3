import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { startChildService, type ChildService } from '../helpers/child-service.js';
import { client } from '../helpers/service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * SIGTERM to `gateway start` (issue 25, item 7), as an orchestrator sends it: a request held
 * for approval is answered 503 `gateway_unavailable` with Retry-After, the process exits 0,
 * and the next start on the same store finds the request audited and its approval pending.
 */
describe('gateway start: SIGTERM stops gracefully', function () {
  this.timeout(90_000);
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-sigterm-'));
  const db = freshDatabaseUrl();
  const key = `sk_${randomBytes(20).toString('hex')}`;
  let up: FakeUpstream;
  let svc: ChildService | null = null;
  let env: Record<string, string>;

  before(async () => {
    up = await startFakeUpstream();
    writeFileSync(join(dataDir, 'upstream-ca.pem'), up.ca.certPem);
    env = {
      DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'none',
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'info',
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dataDir, 'upstream-ca.pem'),
    };
  });
  after(async () => {
    await svc?.stop();
    await up?.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a held request: 503 with Retry-After, exit code 0, audited and still decidable after a restart', async () => {
    svc = await startChildService(env, { timeoutMs: 40_000 });
    const c = client(svc.ready.api_url, key);
    const created = await c.post('/v1/environments', {
      end_user_id: 'sigterm-user', egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_sigtermsigtermsig', allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status, created.text).to.equal(201);
    const id = created.body.id;
    expect((await c.put(`/v1/environments/${id}/policy`, { rules: [{ category: 'pay', effect: 'ask' }] })).status).to.equal(200);
    const gw = (await c.get(`/v1/environments/${id}/gateway`)).body;
    const placeholder = (await c.get(`/v1/environments/${id}/secrets`)).body.data[0].placeholder;
    const agent = proxyAgent(gw);
    const held = request('https://api.stripe.com/v1/charges', {
      dispatcher: agent, method: 'POST', body: 'amount=100',
      headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded' },
    }).then(async (r) => ({ status: r.statusCode, retryAfter: r.headers['retry-after'], body: await r.body.json() as { error: string } }));
    let approvalId = '';
    for (let i = 0; i < 500 && !approvalId; i++) {
      approvalId = (await c.get(`/v1/approvals?environment_id=${id}&status=pending`)).body.data[0]?.id ?? '';
      if (!approvalId) await new Promise((r) => setTimeout(r, 20));
    }
    expect(approvalId).to.match(/^apr_/);

    const code = await svc.stop();
    const h = await held;
    expect(h).to.deep.include({ status: 503, retryAfter: '5' });
    expect(h.body.error).to.equal('gateway_unavailable');
    expect(code).to.equal(0);
    expect(svc.lines.some((l) => l.includes('"msg":"stopped"'))).to.equal(true);
    expect(up.seen).to.have.length(0);
    await agent.close();

    svc = await startChildService(env, { timeoutMs: 40_000 });
    const c2 = client(svc.ready.api_url, key);
    const audit = (await c2.get(`/v1/audit-log?environment_id=${id}`)).body.data;
    expect(audit.find((e: { path: string }) => e.path === '/v1/charges')).to.deep.include({ status: 503, reason: 'gateway_stopping', approval_id: approvalId });
    expect((await c2.get(`/v1/approvals/${approvalId}`)).body.status).to.equal('pending');
  });
});
