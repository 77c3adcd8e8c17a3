import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { startTestService, type TestService } from '../helpers/service.js';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server.js';
import { ROOT } from '../helpers/child-service.js';
import { skipWithoutRuntime, waitState } from '../helpers/runtime.js';

const TOKEN = 'ghp_RealMcpBearerForTheSdkInTheSandbox3';

/**
 * The official MCP SDK client INSIDE a real environment (issue 28, item 5): bundled into one
 * file (test/fixtures/mcp-client-in-env.ts), written to the environment's disk and run with
 * the sandbox's node, through the VM's HTTPS_PROXY as an agent would. It lists the tools,
 * calls the read tool (allowed), the destructive one (held until a person approves, then run
 * with the real bearer), and an unannotated one the policy does not allow (a JSON-RPC error
 * the client shows). The real bearer reaches only the server; the agent sees its placeholder.
 */
describe('MCP: the official SDK client inside an environment (issue 28)', function () {
  this.timeout(180_000);
  let t: TestService;
  let mcp: TestMcpServer;
  let dir: string;

  before(async function () {
    skipWithoutRuntime(this);
    mcp = await startMcpServer([
      { name: 'list_issues', annotations: { readOnlyHint: true } },
      { name: 'delete_repository', annotations: { destructiveHint: true } },
      { name: 'mystery' },
    ]);
    dir = mkdtempSync(join(tmpdir(), 'gw-mcp-sdk-'));
    writeFileSync(join(dir, 'ca.pem'), mcp.ca.certPem);
    const built = spawnSync(join(ROOT, 'node_modules', 'esbuild', 'bin', 'esbuild'), [
      join(ROOT, 'test', 'fixtures', 'mcp-client-in-env.ts'), '--bundle', '--platform=node', '--format=cjs', '--target=node20', '--log-level=error',
      `--outfile=${join(dir, 'mcp-client.cjs')}`,
    ], { encoding: 'utf8' });
    expect(built.status, built.stderr).to.equal(0);
    t = await startTestService({
      GATEWAY_RUNTIME: 'process',
      GATEWAY_UPSTREAM_OVERRIDES: `mcp.github.example=127.0.0.1:${mcp.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'),
    });
  });
  after(async () => {
    await t?.close();
    await mcp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists, calls the read tool, the destructive tool after approval with the real bearer, and shows a refused call as an error', async () => {
    expect((await t.api.put('/v1/mcp-servers/github', { url: 'https://mcp.github.example/mcp', secret: 'GH' })).status).to.equal(201);
    expect((await t.api.put('/v1/policy', { rules: [{ connector: 'mcp:github', category: 'read', effect: 'allow' }] })).status).to.equal(200);
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'mcp-sdk-e2e', resources: { cpus: 1, memory_mib: 1024 },
      secrets: { GH: { value: TOKEN, allowed_hosts: ['mcp.github.example'] } },
    });
    expect(created.status, created.text).to.equal(201);
    const env = await waitState(t.api, created.body.id, 'running', 60_000);
    const file = await t.api.put(`/v1/environments/${env.id}/files`, {
      path: 'mcp-client.cjs', content: readFileSync(join(dir, 'mcp-client.cjs')).toString('base64'), encoding: 'base64',
    });
    expect(file.status, file.text).to.equal(200);

    const run = t.api.post(`/v1/environments/${env.id}/exec`, {
      command: ['node', '/home/agent/mcp-client.cjs', 'https://mcp.github.example/mcp', 'list_issues', 'delete_repository', 'mystery'],
      timeout_secs: 120,
    });
    let approval: { id: string; tool?: string; category: string } | undefined;
    for (let i = 0; i < 1200 && !approval; i++) {
      approval = (await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`)).body.data[0];
      if (!approval) await new Promise((r) => setTimeout(r, 50));
    }
    expect(approval, 'the destructive call was never held').to.include({ tool: 'delete_repository', category: 'delete' });
    expect(mcp.calls.map((c) => c.tool)).to.deep.equal(['list_issues']);
    expect((await t.api.post(`/v1/approvals/${approval!.id}/decision`, { decision: 'approve', scope: { kind: 'once' } })).status).to.equal(200);

    const out = await run;
    expect(out.status, out.text).to.equal(200);
    const steps = Object.fromEntries(String(out.body.stdout).trim().split('\n').map((l) => JSON.parse(l)).map((s: { step: string; v: unknown }) => [s.step, s.v]));
    expect(steps.fatal, out.body.stdout + out.body.stderr).to.equal(undefined);
    expect(steps.tools).to.deep.equal(['list_issues', 'delete_repository', 'mystery']);
    expect(JSON.stringify(steps.list_issues)).to.match(/list_issues ran with Bearer svcph_[0-9a-f]{32}/);
    expect(JSON.stringify(steps.delete_repository)).to.match(/delete_repository ran with Bearer svcph_/);
    // Unannotated and not in the map: write; the policy allows reads only, so it is refused, as an error the client shows.
    expect(JSON.stringify(steps.mystery)).to.match(/MCP error -32001: policy_denied: policy denies write on mcp:github/);
    expect(out.body.stdout).to.not.include(TOKEN);
    expect(mcp.calls.map((c) => c.tool)).to.deep.equal(['list_issues', 'delete_repository']);
    for (const c of mcp.calls) expect(c.authorization).to.equal(`Bearer ${TOKEN}`);
  });
});
