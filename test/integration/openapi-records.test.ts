import { expect } from 'chai';
import Joi from 'joi';
import { startTestService, type ApiResponse, type TestService } from '../helpers/service.js';
import type { RouteInfo } from '../../api/app.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';

/**
 * The records of the OpenAPI document (api/schemas/records.ts) against real answers of the
 * running service (issue 25, item 3): every 2xx JSON answer this suite gets is validated
 * with the joi schema its route's describeRoute annotation declares for that status (the
 * same schema the document's `components.schemas` are generated from). A field the service
 * sends and the record lacks, a missing field, or a wrong type fails here.
 */
describe('OpenAPI records against real answers (issue 25, item 3)', () => {
  let t: TestService;
  const checked = new Set<string>();

  before(async () => {
    t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1', GOOGLE_CLIENT_ID: 'platform-id.apps.googleusercontent.com', GOOGLE_CLIENT_SECRET: 'GOCSPX-platform' });
  });
  after(async () => {
    await t.close();
  });

  function routeOf(method: string, path: string): RouteInfo {
    const bare = path.split('?')[0]!;
    const found = t.svc.routes.find((r) => r.method === method && new RegExp(`^${r.path.replace(/:[A-Za-z_]+/g, '[^/]+')}$`).test(bare));
    if (!found) throw new Error(`no route for ${method} ${bare}`);
    return found;
  }

  /** The answer must be 2xx and match the schema its route declares for the status. */
  async function call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse> {
    const r = await t.api.request(method, path, body, headers);
    expect(r.status, `${method} ${path}: ${r.text.slice(0, 300)}`).to.be.within(200, 299);
    const route = routeOf(method, path);
    const declared = route.spec?.responses[r.status];
    expect(declared, `${method} ${route.path} declares no ${r.status}`).to.not.equal(undefined);
    if (declared === null) {
      expect(r.text, `${method} ${path}`).to.equal('');
    } else {
      const schema = Joi.isSchema(declared) ? declared : (declared as { content?: Record<string, unknown> }).content?.['application/json'];
      expect(Joi.isSchema(schema), `${method} ${route.path} ${r.status}: a joi schema for application/json`).to.equal(true);
      const { error } = (schema as Joi.Schema).validate(r.body, { convert: false, allowUnknown: false, abortEarly: false });
      expect(error?.details.map((d) => d.message) ?? [], `${method} ${path} → ${r.status}: ${r.text.slice(0, 500)}`).to.deep.equal([]);
    }
    checked.add(`${method} ${route.path}`);
    return r;
  }

  it('environments, their configuration, events, wakeups, schedules and agent settings', async () => {
    const env = (await call('POST', '/v1/environments', {
      end_user_id: 'records-1',
      env: { A: '1' },
      files: { 'notes.txt': 'hi' },
      secrets: { API_TOKEN: { value: 'tok_123', allowed_hosts: ['api.example.com'] } },
      egress_allow: ['api.example.com'],
    }, { 'idempotency-key': 'records-key' })).body;
    await call('POST', '/v1/environments', { end_user_id: 'records-1' }, { 'idempotency-key': 'records-key' }); // 200, the original
    await call('GET', '/v1/environments?limit=1');
    await call('GET', `/v1/environments/${env.id}`);
    await call('POST', '/v1/environments/batch', { environments: [{ end_user_id: 'records-2' }, { end_user_id: 'records-1' }, { end_user_id: 'x', resources: { cpus: 9 } }] });
    await call('POST', `/v1/environments/${env.id}/suspend`);
    await call('POST', `/v1/environments/${env.id}/resume`);
    await call('POST', `/v1/environments/${env.id}/wake`);
    await call('POST', `/v1/environments/${env.id}/keep-awake`, { seconds: 60 });
    await call('PATCH', `/v1/environments/${env.id}/resources`, { cpus: 2 });
    await call('PATCH', `/v1/environments/${env.id}/idle`, { suspend_after_secs: 600 });
    await call('GET', `/v1/environments/${env.id}/config`);
    await call('PUT', `/v1/environments/${env.id}/config`, { env: { B: '2' }, files: { 'b.bin': { content: 'AAEC', encoding: 'base64' } } });
    await call('GET', `/v1/environments/${env.id}/events?limit=5`);
    const at = new Date(t.svc.clock.nowMs() + 3600_000).toISOString();
    const w = (await call('POST', `/v1/environments/${env.id}/wakeups`, { at, reason: 'check mail' })).body;
    await call('GET', `/v1/environments/${env.id}/wakeups`);
    await call('DELETE', `/v1/environments/${env.id}/wakeups/${w.id}`);
    await call('GET', `/v1/environments/${env.id}/schedules`);
    await call('GET', `/v1/environments/${env.id}/agent-settings`);
    await call('PATCH', `/v1/environments/${env.id}/agent-settings`, { max_schedules: 5 });
    await call('GET', `/v1/environments/${env.id}/gateway`);
    await call('GET', `/v1/environments/${env.id}/stand-in-tokens`);
    await call('POST', `/v1/environments/${env.id}/agent-upgrade`, { version: '2.0.0' });
    await call('DELETE', `/v1/environments/${env.id}`);
  });

  it('templates, usage, agent versions, rollouts, team members, hosts, the test clock', async () => {
    const tpl = (await call('POST', '/v1/templates', { name: 'base', version: '1' })).body;
    await call('GET', '/v1/templates');
    await call('GET', `/v1/templates/${tpl.id}`);
    await call('POST', `/v1/templates/${tpl.id}/ready`);
    const tpl2 = (await call('POST', '/v1/templates', { name: 'base', version: '2' })).body;
    await call('POST', `/v1/templates/${tpl2.id}/failed`);
    await call('GET', '/v1/usage');
    await call('PUT', '/v1/usage/limit', { running_seconds: 3600 });
    await call('DELETE', '/v1/usage/limit');
    await call('PUT', '/v1/agent-version', { default_version: '1.2.3' });
    await call('GET', '/v1/agent-version');
    const ro = (await call('POST', '/v1/agent-rollouts', { version: '1.2.4' })).body;
    await call('GET', '/v1/agent-rollouts');
    await call('GET', `/v1/agent-rollouts/${ro.id}`);
    const m = (await call('POST', '/v1/team-members', { email: 'ops@example.com', name: 'Ops' })).body;
    await call('GET', '/v1/team-members');
    await call('DELETE', `/v1/team-members/${m.id}`);
    await call('GET', '/v1/hosts');
    await call('POST', '/v1/test-clock/advance', { seconds: 1 });
  });

  it('secrets, egress, webhooks, policies, policy check', async () => {
    const env = (await t.api.post('/v1/environments', { end_user_id: 'records-secrets' })).body;
    await call('PUT', `/v1/environments/${env.id}/secrets/STRIPE_KEY`, { value: 'sk_live_x', allowed_hosts: ['api.stripe.com'], inject: ['header:x-api-key'] });
    await call('PUT', `/v1/environments/${env.id}/secrets/STRIPE_KEY`, { value: 'sk_live_y', allowed_hosts: ['api.stripe.com'] });
    await call('GET', `/v1/environments/${env.id}/secrets`);
    await call('DELETE', `/v1/environments/${env.id}/secrets/STRIPE_KEY`);
    await call('PUT', '/v1/secrets/SHARED', { value: 'v', allowed_hosts: ['*.example.com'], allow_minting: true });
    await call('GET', '/v1/secrets');
    await call('DELETE', '/v1/secrets/SHARED');
    await call('PUT', `/v1/environments/${env.id}/egress`, { allow: ['api.example.com'] });
    await call('GET', `/v1/environments/${env.id}/egress`);
    await call('PUT', '/v1/egress', { allow: ['*.example.org'] });
    await call('GET', '/v1/egress');
    await call('PUT', '/v1/webhook-endpoint', { url: 'http://127.0.0.1:9/hook' });
    await call('PUT', '/v1/webhook-endpoint', { url: 'http://127.0.0.1:9/hook2' });
    await call('GET', '/v1/webhook-endpoint');
    await call('POST', '/v1/webhook-endpoint/rotate');
    await call('GET', '/v1/webhook-endpoint');
    await call('GET', '/v1/webhook-deliveries');
    await call('DELETE', '/v1/webhook-endpoint');
    await call('PUT', '/v1/policy', { rules: [{ connector: 'gmail', category: 'read', effect: 'allow' }, { category: 'send', effect: 'ask', max_scope: 'task' }] });
    await call('GET', '/v1/policy');
    await call('PUT', `/v1/environments/${env.id}/policy`, { rules: [{ effect: 'deny', category: 'pay' }] });
    await call('GET', `/v1/environments/${env.id}/policy`);
    await call('POST', `/v1/environments/${env.id}/policy/check`, { connector: 'gmail', category: 'pay' });
    await call('DELETE', `/v1/environments/${env.id}/policy`);
    await call('POST', `/v1/environments/${env.id}/policy/check`, { connector: 'gmail', category: 'send', task_id: 't1' });
    await call('DELETE', '/v1/policy');
  });

  it('approvals, decisions, grants and the audit log', async () => {
    const env = (await t.api.post('/v1/environments', { end_user_id: 'records-approvals' })).body;
    const ask = (over: Record<string, unknown> = {}) => t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID, environmentId: env.id, connector: 'gmail', category: 'send', method: 'POST',
      host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', task_id: 'task-1', session_id: null, max_scope: 'permanent', ...over,
    });
    const a = await ask();
    await call('GET', '/v1/approvals?status=pending');
    await call('GET', `/v1/approvals/${a.id}`);
    await call('POST', `/v1/approvals/${a.id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } });
    await call('GET', `/v1/approvals/${a.id}`);
    const b = await ask();
    await call('POST', `/v1/approvals/${b.id}/decision`, { decision: 'deny' });
    const grants = (await call('GET', `/v1/grants?environment_id=${env.id}`)).body;
    expect(grants.data).to.have.length(1);
    await call('DELETE', `/v1/grants/${grants.data[0].id}`);
    await t.svc.audit.record({
      developer_id: DEFAULT_DEVELOPER_ID, environment_id: env.id, method: 'POST', host: 'gmail.googleapis.com', path: '/send',
      connector: 'gmail', category: 'send', credential: 'connection', decision: 'ask', reason: 'ask_rule', matched_rules: [1],
      approval_id: a.id, grant_id: null, status: 200, upstream_status: 200, bytes_in: 10, bytes_out: 20, duration_ms: 5, redacted: true,
    });
    await t.svc.audit.record({
      developer_id: DEFAULT_DEVELOPER_ID, environment_id: null, method: 'GET', host: 'example.com', path: '/',
      credential: 'none', decision: 'deny', reason: 'egress_denied', status: 403,
    });
    // Issue 26: an entry with facts, and a simulation that changes it (an example in the answer).
    await t.svc.audit.record({
      developer_id: DEFAULT_DEVELOPER_ID, environment_id: env.id, method: 'POST', host: 'gmail.googleapis.com', path: '/send',
      connector: 'gmail', category: 'send', credential: 'connection', decision: 'ask', reason: 'high_risk', status: 200,
      facts: { amount: null, recipients: Array.from({ length: 60 }, (_, i) => `r${i}@acme.com`), channel: 'C1' },
    });
    const log = (await call('GET', '/v1/audit-log')).body;
    expect(log.data.length).to.be.at.least(2);
    await call('GET', '/v1/audit-log/verify');
    const sim = (await call('POST', '/v1/policy/simulate', { rules: [{ connector: 'gmail', effect: 'deny' }], environment_id: env.id, since: '2000-01-01T00:00:00Z', limit: 10 })).body;
    expect(sim.examples.length).to.be.at.least(1);
  });

  it('connections and OAuth clients, browser profiles and limits, the document itself, health and readiness', async () => {
    await call('GET', '/v1/oauth-clients');
    await call('PUT', '/v1/oauth-clients/google', { client_id: 'dev-app.apps.googleusercontent.com', client_secret: 'GOCSPX-dev' });
    await call('POST', '/v1/connections/authorize', { end_user_id: 'records-oauth', connectors: ['gmail'], return_url: 'https://app.example.com/done' });
    await call('GET', '/v1/connections?include_revoked=true');
    const p = (await call('POST', '/v1/browser/profiles', { end_user_id: 'records-browser', name: 'Work' })).body;
    await call('GET', '/v1/browser/profiles?end_user_id=records-browser');
    await call('GET', `/v1/browser/profiles/${p.id}`);
    await call('DELETE', `/v1/browser/profiles/${p.id}`);
    await call('GET', '/v1/browser/leases');
    await call('GET', '/v1/browser/limits');
    await call('GET', '/v1/openapi.json');
    await call('GET', '/healthz');
    await call('GET', '/readyz');
  });

  it('MCP server registrations and a rule naming a tool (issue 28)', async () => {
    const env = (await t.api.post('/v1/environments', { end_user_id: 'records-mcp' })).body;
    await call('PUT', '/v1/mcp-servers/records', { url: 'https://mcp.example.com/mcp', secret: 'API_TOKEN', tools: { list_things: 'read' }, default_category: 'write' });
    await call('PUT', '/v1/mcp-servers/records', { url: 'https://mcp.example.com/mcp' });
    await call('GET', '/v1/mcp-servers/records');
    await call('GET', '/v1/mcp-servers');
    await call('PUT', `/v1/environments/${env.id}/mcp-servers/records`, { url: 'https://mcp2.example.com/mcp', default_category: null });
    await call('GET', `/v1/environments/${env.id}/mcp-servers/records`);
    await call('GET', `/v1/environments/${env.id}/mcp-servers`);
    await call('DELETE', `/v1/environments/${env.id}/mcp-servers/records`);
    await call('DELETE', '/v1/mcp-servers/records');
    await call('PUT', `/v1/environments/${env.id}/policy`, { rules: [{ connector: 'mcp:records', tool: 'drop_table', effect: 'deny' }] });
  });

  it('the Slack approval channel and a team member\'s Slack user id (issue 27)', async () => {
    await call('PUT', '/v1/approval-channels/slack', { bot_token: 'xoxb-records', signing_secret: 'records-signing-secret', channel_id: 'C0RECORDS', api_base_url: 'https://slack.example.com/api' });
    await call('GET', '/v1/approval-channels/slack');
    await call('DELETE', '/v1/approval-channels/slack');
    const m = (await call('POST', '/v1/team-members', { email: 'records-slack@example.com', name: 'Records', slack_user_id: 'U0RECORDS' })).body;
    await call('PATCH', `/v1/team-members/${m.id}`, { slack_user_id: null });
    await call('GET', '/v1/team-members');
  });

  it('covered most of the API\'s JSON routes', () => {
    // The routes this suite cannot reach without a runtime, a browser or a provider.
    const elsewhere = new Set([
      'POST /v1/environments/:id/exec', 'PUT /v1/environments/:id/files', 'GET /v1/environments/:id/files',
      'DELETE /v1/environments/:id/schedules/:key', 'GET /v1/connections/:id', 'DELETE /v1/connections/:id',
      'POST /v1/browser/leases', 'GET /v1/browser/leases/:id', 'POST /v1/browser/leases/:id/renew', 'POST /v1/browser/leases/:id/release',
      'POST /v1/browser/leases/:id/takeover', 'POST /v1/browser/leases/:id/handback', 'GET /v1/browser/view/:token', 'GET /v1/oauth/:provider/callback',
    ]);
    elsewhere.add('GET /metrics'); // text/plain
    elsewhere.add('POST /v1/slack/interactivity'); // signed by Slack: test/integration/slack-approvals.test.ts
    const missed = t.svc.routes.map((r) => `${r.method} ${r.path}`).filter((k) => !checked.has(k) && !elsewhere.has(k));
    expect(missed).to.deep.equal([]);
  });
});
