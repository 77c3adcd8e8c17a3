import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

const TOKEN = 'ghp_RealMcpBearerInsideTheSandbox0002';

/**
 * MCP from inside a real environment (issue 28): the agent's own tools (curl through the
 * VM's HTTPS_PROXY, the gateway CA in CURL_CA_BUNDLE) speak Streamable HTTP JSON-RPC to a
 * registered server (the official SDK's McpServer) with its secret's placeholder as bearer.
 * The SDK client itself is driven through the gateway in test/integration/mcp.test.ts; the
 * project's node_modules are not inside the sandbox, so here the client is curl.
 */
describe('MCP from inside an environment (issue 28)', function () {
  this.timeout(120000);
  let t: TestService;
  let mcp: TestMcpServer;
  let dir: string;

  before(async function () {
    skipWithoutRuntime(this);
    mcp = await startMcpServer([{ name: 'list_issues', annotations: { readOnlyHint: true } }, { name: 'delete_repository', annotations: { destructiveHint: true } }]);
    dir = mkdtempSync(join(tmpdir(), 'gw-mcp-e2e-'));
    writeFileSync(join(dir, 'ca.pem'), mcp.ca.certPem);
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

  it('initialize, tools/list and a read tool go through; a destructive tool is held, approved, and runs with the real bearer; the answer is redacted', async () => {
    expect((await t.api.put('/v1/mcp-servers/github', { url: 'https://mcp.github.example/mcp', secret: 'GH' })).status).to.equal(201);
    expect((await t.api.put('/v1/policy', { rules: [{ connector: 'mcp:github', category: 'read', effect: 'allow' }] })).status).to.equal(200);
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'mcp-e2e', resources: { cpus: 1, memory_mib: 512 },
      secrets: { GH: { value: TOKEN, allowed_hosts: ['mcp.github.example'] } },
    });
    expect(created.status).to.equal(201);
    const env = await waitState(t.api, created.body.id, 'running', 60_000);
    const rpc = 'rpc() { if [ -n "$SID" ]; then S="mcp-session-id: $SID"; else S="x-none: 1"; fi; curl -sS -D /tmp/h -H "authorization: Bearer $GH" -H "content-type: application/json" -H "accept: application/json, text/event-stream" -H "$S" --data-binary "$1" https://mcp.github.example/mcp; echo; }';
    const init = await sh(t.api, env.id, `${rpc}
rpc '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}' >/dev/null
SID=$(grep -i '^mcp-session-id:' /tmp/h | cut -d' ' -f2 | tr -d '\\r')
rpc '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
echo "SID=$SID"
rpc '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
rpc '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_issues","arguments":{}}}'`);
    const sid = /SID=(\S+)/.exec(init.stdout)?.[1];
    expect(sid, init.stdout + init.stderr).to.be.a('string');
    expect(init.stdout).to.include('delete_repository');
    expect(init.stdout).to.match(/list_issues ran with Bearer svcph_[0-9a-f]{32}/);
    expect(init.stdout).to.not.include(TOKEN);
    expect(mcp.calls[0]!.authorization).to.equal(`Bearer ${TOKEN}`);

    const held = sh(t.api, env.id, `${rpc}\nSID=${sid}\nrpc '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete_repository","arguments":{"repo":"acme/app"}}}'`);
    let approval: { id: string; tool?: string; category: string } | undefined;
    for (let i = 0; i < 400 && !approval; i++) {
      approval = (await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`)).body.data[0];
      if (!approval) await new Promise((r) => setTimeout(r, 50));
    }
    expect(approval).to.include({ tool: 'delete_repository', category: 'delete' });
    expect(mcp.calls).to.have.length(1);
    expect((await t.api.post(`/v1/approvals/${approval!.id}/decision`, { decision: 'approve', scope: { kind: 'once' } })).status).to.equal(200);
    const out = await held;
    expect(out.stdout).to.match(/delete_repository ran with Bearer svcph_/);
    expect(mcp.calls[1]).to.include({ tool: 'delete_repository', authorization: `Bearer ${TOKEN}` });
  });
});
