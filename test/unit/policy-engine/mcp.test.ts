import { expect } from 'chai';
import fc from 'fast-check';
import { classifyMcp, parseMcpBody, parseToolsListAnswer, FAIL_CLOSED_CATEGORY, MAX_MCP_BATCH, type McpToolTable } from '../../../policy-engine/classify/mcp.js';
import { describeMcpRequest } from '../../../policy-engine/describe.js';
import { evaluate, evaluateNaive, compilePolicy, GrantIndex, validateRules, type Rule } from '../../../policy-engine/index.js';
import type { Category } from '../../../policy-engine/categories.js';

/** MCP JSON-RPC classification (issue 28): table-driven, and against hostile input. */
function table(opts: { tools?: Record<string, Category>; annotated?: Record<string, Category>; def?: Category | null } = {}): McpToolTable {
  return {
    name: 'gh',
    tools: new Map(Object.entries(opts.tools ?? {})),
    defaultCategory: opts.def ?? null,
    annotated: (t) => opts.annotated?.[t],
  };
}
const JSON_H = { 'content-type': 'application/json', 'content-length': '1' };
const call = (name: unknown, id: unknown = 1, args: unknown = {}) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const post = (body: unknown, headers: Record<string, string> = JSON_H) => ({ method: 'POST', headers, body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) });

describe('policy-engine/classify/mcp (issue 28)', () => {
  it('protocol messages are read', () => {
    for (const method of ['initialize', 'ping', 'tools/list', 'resources/list', 'prompts/list']) {
      expect(classifyMcp(post({ jsonrpc: '2.0', id: 1, method }), table()).category, method).to.equal('read');
    }
    expect(classifyMcp(post({ jsonrpc: '2.0', method: 'notifications/initialized' }), table()).category).to.equal('read');
    expect(classifyMcp({ method: 'GET', headers: {}, body: undefined }, table()).category).to.equal('read');
  });

  it('a tool: the developer map, then annotations, then default_category, then fail closed', () => {
    const tb = table({ tools: { a: 'send' }, annotated: { a: 'read', b: 'delete' }, def: 'write' });
    expect(classifyMcp(post(call('a')), tb)).to.include({ category: 'send', rule: 'mcp.tool.map', tool: 'a' });
    expect(classifyMcp(post(call('b')), tb)).to.include({ category: 'delete', rule: 'mcp.tool.annotation' });
    expect(classifyMcp(post(call('c')), tb)).to.include({ category: 'write', rule: 'mcp.tool.default' });
    expect(classifyMcp(post(call('c')), table())).to.include({ category: FAIL_CLOSED_CATEGORY, rule: 'mcp.tool.unknown', tool: 'c' });
  });

  it('a batch takes its riskiest message; its tool is the sorted set of tools called', () => {
    const tb = table({ annotated: { list: 'read', del: 'delete' } });
    const c = classifyMcp(post([call('list', 1), call('del', 2), { jsonrpc: '2.0', id: 3, method: 'tools/list' }]), tb);
    expect(c).to.include({ category: 'delete', tool: 'del,list', batch: true });
    expect(c.ids).to.deep.equal([1, 2, 3]);
    expect(c.listIds).to.deep.equal([3]);
  });

  it('hostile bodies are unparsable and fail closed', () => {
    const tb = table({ annotated: { list: 'read' }, def: 'read' });
    const cases: Array<[string, ReturnType<typeof post>]> = [
      ['control characters in a tool name', post(call('list\u0007'))],
      ['a bidi override in a tool name', post(call('list\u202e'))],
      ['a comma in a tool name', post(call('list,del'))],
      ['duplicate name keys', post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list","name":"drop"}}')],
      ['duplicate keys spelled with escapes', post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list","n\\u0061me":"drop"}}')],
      ['compressed', post(JSON.stringify(call('list')), { ...JSON_H, 'content-encoding': 'gzip' })],
      ['not UTF-8', post(Buffer.from([0x7b, 0xff, 0x7d]))],
      ['not read (too large)', { method: 'POST', headers: JSON_H, body: undefined as unknown as string }],
      ['an empty batch', post([])],
      ['a huge batch', post(Array.from({ length: MAX_MCP_BATCH + 1 }, (_, i) => call('list', i)))],
      ['not JSON-RPC 2.0', post({ id: 1, method: 'tools/call', params: { name: 'list' } })],
      ['an unknown method', post({ jsonrpc: '2.0', id: 1, method: 'tools/execute', params: { name: 'list' } })],
      ['a name that is not a string', post(call(['list']))],
      ['arguments that are not an object', post(call('list', 1, 'rm -rf'))],
      ['a null id', post(call('list', null))],
      ['PUT', { method: 'PUT', headers: JSON_H, body: JSON.stringify(call('list')) }],
    ];
    for (const [why, req] of cases) expect(classifyMcp(req, tb).category, why).to.equal(FAIL_CLOSED_CATEGORY);
  });

  it('never throws and never rates a request below what its tool calls say (property)', () => {
    const tb = table({ annotated: { r: 'read', d: 'delete' } });
    fc.assert(fc.property(fc.string(), (s) => {
      classifyMcp(post(s), tb);
      parseMcpBody(s, JSON_H);
    }));
    fc.assert(fc.property(fc.array(fc.constantFrom('r', 'd'), { minLength: 1, maxLength: 5 }), (names) => {
      const c = classifyMcp(post(names.map((n, i) => call(n, i))), tb);
      expect(c.category).to.equal(names.includes('d') ? 'delete' : 'read');
    }));
  });

  it('tools/list answers: JSON and SSE, only for the request\'s ids, annotations mapped, a repeated key teaches nothing', () => {
    const answer = { jsonrpc: '2.0', id: 5, result: { tools: [
      { name: 'ro', annotations: { readOnlyHint: true } }, { name: 'rm', annotations: { destructiveHint: true } },
      { name: 'both', annotations: { readOnlyHint: true, destructiveHint: true } }, { name: 'plain' }, { name: 'bad\u0000name', annotations: { readOnlyHint: true } },
    ] } };
    const want = [{ name: 'ro', category: 'read' }, { name: 'rm', category: 'delete' }, { name: 'both', category: 'delete' }, { name: 'plain', category: 'write' }];
    expect(parseToolsListAnswer('application/json', Buffer.from(JSON.stringify(answer)), [5])).to.deep.equal(want);
    expect(parseToolsListAnswer('text/event-stream', Buffer.from(`event: message\ndata: ${JSON.stringify(answer)}\n\n`), [5])).to.deep.equal(want);
    expect(parseToolsListAnswer('application/json', Buffer.from(JSON.stringify(answer)), [6])).to.deep.equal([]);
    const dup = '{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"x","annotations":{"readOnlyHint":false,"readOnlyHint":true}}]}}';
    expect(parseToolsListAnswer('application/json', Buffer.from(dup), [5])).to.deep.equal([]);
  });

  it('the card: tool and arguments, cleaned and bounded, placeholders hidden; unreadable bodies say so', () => {
    const ph = 'svcph_0123456789abcdef0123456789abcdef';
    const d = describeMcpRequest(post(call('delete_repository', 1, { repo: 'a\u202eb', token: ph, big: 'x'.repeat(2000), nested: { a: [1] } })), { server: 'gh', hide: [ph] });
    expect(d.kind).to.equal('mcp_tool_call');
    expect(d.fields).to.deep.include({ label: 'Tool', value: 'delete_repository' });
    expect(d.fields).to.deep.include({ label: 'delete_repository.repo', value: 'a\ufffdb' });
    expect(d.fields).to.deep.include({ label: 'delete_repository.token', value: '[credential]' });
    expect(d.fields).to.deep.include({ label: 'delete_repository.nested', value: '{"a":[1]}' });
    expect(d.fields.find((f) => f.label === 'delete_repository.big')!.value.length).to.be.lessThan(600);
    expect(d.unreadable).to.match(/cuts 1 value/);
    const bad = describeMcpRequest(post(call('x\u0000y')), { server: 'gh' });
    expect(bad.unreadable).to.match(/could not be read as MCP/);
    expect(JSON.stringify(bad)).to.not.include('\\u0000');
  });
});

it('the card: a tool call left out for the field limit is counted, never dropped unsaid (a fourth review)', () => {
  const args = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`path${i}`, `/r/${i}`]));
  const d = describeMcpRequest(post([call('read_file', 1, args), { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'delete_repository' } }]), { server: 'gh' });
  expect(d.fields.some((f) => f.value === 'delete_repository')).to.equal(false);
  expect(d.unreadable).to.match(/leaves out 1 tool call/);
});

describe('rules and grants naming a tool (issue 28)', () => {
  it('validates tool: a string (422), an MCP tool name (400)', () => {
    expect(validateRules([{ connector: 'mcp:gh', tool: 'drop', effect: 'deny' }])).to.deep.include({ ok: true });
    expect(validateRules([{ tool: 5, effect: 'deny' }])).to.include({ ok: false, status: 422 });
    expect(validateRules([{ tool: 'a,b', effect: 'deny' }])).to.include({ ok: false, status: 400 });
    expect(validateRules([{ tool: 'a\u0000', effect: 'deny' }])).to.include({ ok: false, status: 400 });
  });

  it('a rule with tool matches only that tool; evaluate and evaluateNaive agree', () => {
    const rules: Rule[] = [{ connector: 'mcp:gh', category: 'delete', tool: 'drop', effect: 'deny' }, { connector: 'mcp:gh', category: 'write', effect: 'allow' }];
    const compiled = compilePolicy(rules);
    for (const [tool, category, want] of [['drop', 'delete', 'deny'], ['rm', 'delete', 'ask'], [undefined, 'delete', 'ask'], ['drop', 'write', 'allow']] as const) {
      const req = { connector: 'mcp:gh', category, ...(tool ? { tool } : {}) };
      expect(evaluate(compiled, req, [], { nowMs: 0 }).decision, `${tool} ${category}`).to.equal(want);
      expect(evaluateNaive(rules, req, [], { nowMs: 0 }).decision).to.equal(want);
    }
  });

  it('a grant covers only its own tool (array and index forms agree)', () => {
    const g = { id: 'g1', connector: 'mcp:gh', category: 'delete' as const, scope: 'permanent' as const, task_id: null, session_id: null, expires_at: null, tool: 'delete_repository' };
    for (const [tool, covered] of [['delete_repository', true], ['drop_table', false], [undefined, false], ['delete_repository,list', false]] as const) {
      const req = { connector: 'mcp:gh', category: 'delete' as const, ...(tool ? { tool } : {}) };
      expect(evaluate([], req, [g], { nowMs: 0 }).reason, tool).to.equal(covered ? 'grant' : 'high_risk');
      expect(evaluate(compilePolicy([]), req, new GrantIndex([g]), { nowMs: 0 }).reason, tool).to.equal(covered ? 'grant' : 'high_risk');
    }
  });
});

describe('the audit chain with tool (issue 28)', () => {
  it('an entry without tool hashes as before; adding, changing or removing a stored tool breaks its hash', async () => {
    const { canonicalJson } = await import('../../../audit/chain.js');
    const row = { id: 'aud_1', created_at: 1, environment_id: null, method: 'POST', host: 'h', path: '/', connector: 'mcp:gh', category: 'delete', credential: 'secret', decision: 'allow', reason: 'rule', matched_rules: '[]', approval_id: null, grant_id: null, status: 200, upstream_status: 200, bytes_in: 0, bytes_out: 0, duration_ms: 0 } as never;
    const plain = canonicalJson(row);
    expect(canonicalJson({ ...(row as object), tool: null } as never)).to.equal(plain);
    const withTool = canonicalJson({ ...(row as object), tool: 'drop' } as never);
    expect(withTool).to.not.equal(plain);
    expect(withTool).to.match(/,"tool":"drop"}$/);
    expect(canonicalJson({ ...(row as object), tool: 'drop2' } as never)).to.not.equal(withTool);
  });
});
