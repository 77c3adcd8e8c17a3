import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startChildService, ROOT, TSX, type ChildService } from '../helpers/child-service.js';
import { client } from '../helpers/service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { skipWithoutRuntime } from '../helpers/runtime.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * The typed client's quickstart (clients/typescript/examples/quickstart.ts, issue 25 item
 * 4) run with tsx against the whole service started as a child, with the process runtime
 * and a fake upstream standing in for api.example.com: it creates an environment with a
 * secret, sets a policy, runs an exec, finds the write the policy held as a pending approval
 * and approves it. Asserted: what it printed, and the state after it (the approval decided
 * through the API key, the upstream reached once with the real secret swapped in).
 */
describe('typed client quickstart against a started service (issue 25, item 4)', function () {
  this.timeout(180_000);
  const SECRET = `demo-${randomBytes(8).toString('hex')}`;
  let dir: string;
  let up: FakeUpstream;
  let db: { url: string; drop(): Promise<void> };
  let svc: ChildService;
  const key = `sk_${randomBytes(20).toString('hex')}`;

  before(async function () {
    skipWithoutRuntime(this);
    skipOrFailInCI(this, existsSync(join(ROOT, 'clients', 'typescript', 'node_modules', 'openapi-fetch')) ? null : 'clients/typescript has no node_modules: npm ci --prefix clients/typescript');
    dir = mkdtempSync(join(tmpdir(), 'gw-quickstart-'));
    up = await startFakeUpstream();
    up.respond = (req, res) => {
      const body = JSON.stringify({ id: 'msg_1', received: JSON.parse(req.body.toString('utf8') || 'null') });
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    db = freshDatabaseUrl();
    svc = await startChildService({
      API_PORT: '0',
      PROXY_PORT: '0',
      DATA_DIR: join(dir, 'data'),
      DATABASE_URL: db.url,
      GATEWAY_BOOTSTRAP_API_KEY: key,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
      GATEWAY_RUNTIME: 'process',
      GATEWAY_DISK_PREALLOCATE: '0',
      GATEWAY_UPSTREAM_OVERRIDES: `api.example.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
      LOG_LEVEL: 'info',
    }, { timeoutMs: 60_000 });
  });
  after(async () => {
    await svc?.stop();
    await up?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs examples/quickstart.ts with tsx: environment, secret, policy, exec, a pending approval approved, the held write delivered', async () => {
    const cwd = join(ROOT, 'clients', 'typescript');
    const env: Record<string, string | undefined> = {
      ...process.env, GATEWAY_URL: svc.ready.api_url, GATEWAY_API_KEY: key, QUICKSTART_END_USER: 'quickstart-e2e', QUICKSTART_SECRET: SECRET,
    };
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(TSX, ['examples/quickstart.ts'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(run.code, `${run.stdout}\n${run.stderr}`).to.equal(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).to.match(/^environment env_[0-9a-f]{24} \(running\)$/);
    const envId = /env_[0-9a-f]{24}/.exec(lines[0]!)![0];
    expect(lines[1]).to.equal('policy: 2 rules (environment)');
    // The agent's process sees the placeholder, never the value.
    expect(lines[2]).to.match(/^exec: exit 0: hello from agent, token svcph_[0-9a-f]+$/);
    expect(run.stdout).to.not.include(SECRET);
    expect(lines[3]).to.match(/^pending approval apr_[0-9a-f]{24}: POST api\.example\.com \/v1\/messages \(secret:DEMO_TOKEN write, task quickstart\)$/);
    const approvalId = /apr_[0-9a-f]{24}/.exec(lines[3]!)![0];
    expect(lines[4]).to.equal('decided: approved (scope once, via api_key)');
    expect(JSON.parse(lines[5]!.replace(/^the API answered: /, ''))).to.deep.equal({ id: 'msg_1', received: { text: 'hi' } });

    // And the state afterwards, read over the API.
    const api = client(svc.ready.api_url, key);
    const approval = await api.get(`/v1/approvals/${approvalId}`);
    expect(approval.body).to.include({ status: 'approved', scope: 'once', decided_via: 'api_key', environment_id: envId });
    expect((await api.get(`/v1/approvals?status=pending&environment_id=${envId}`)).body.data).to.deep.equal([]);
    expect(up.seen.map((s) => `${s.method} ${s.url}`)).to.deep.equal(['POST /v1/messages']);
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${SECRET}`);
    const audit = await api.get(`/v1/audit-log?environment_id=${envId}`);
    expect(audit.body.data.some((e: any) => e.path === '/v1/messages' && e.decision === 'ask' && e.approval_id === approvalId && e.status === 201)).to.equal(true);
  });
});
