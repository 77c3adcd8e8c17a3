/**
 * Approval requests, the decision endpoint and grants (service.md "Approval request",
 * "Decision", "Grant", Decision endpoint, Authentication 3-5, Errors; decisions.md
 * "Approvals and grants") against the real API and database.
 *
 * The gateway is what creates approval requests in real use; here the tests create them by
 * calling the service (svc.approvals.requestApproval) and drive everything else over HTTP.
 */
import { expect } from 'chai';
import { startTestService, type ApiClient, type ApiResponse, type TestService } from '../helpers/service.js';
import { createEnv, expectError, expectNotFound, TIMESTAMP, walk } from './environments.fixtures.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { signatureHeader } from '../../webhooks/signing.js';
import { createApprovalsService, type Approval, type RequestApprovalInput } from '../../approvals/approvals.service.js';
import { silentLogger } from '../../lib/log.js';
import type { Scope } from '../../policy-engine/index.js';

const APR_ID = /^apr_[0-9a-f]{24}$/;
const GRT_ID = /^grt_[0-9a-f]{24}$/;
const HOOK = 'https://hooks.example.com/gateway';
const APPROVAL_KEYS = [
  'category', 'connector', 'created_at', 'decided_at', 'decided_via', 'environment_id', 'expires_at', 'grant_id', 'id',
  'max_scope', 'scope', 'session_id', 'status', 'summary', 'task_id',
];
// `limits` and `used`: spending mandates (issue 26, item 2), null and {0, 0} on a grant without limits.
const GRANT_KEYS = ['approval_id', 'category', 'connector', 'created_at', 'environment_id', 'expires_at', 'id', 'limits', 'scope', 'session_id', 'task_id', 'used'];

describe('approvals, decisions and grants', function () {
  let t: TestService;
  let api: ApiClient;
  let envId: string;
  /** The default developer's webhook secret (set in before()). */
  let secret: string;

  before(async () => {
    t = await startTestService();
    api = t.api;
    envId = (await createEnv(api)).id;
    const hook = await api.put('/v1/webhook-endpoint', { url: HOOK });
    expect(hook.status, hook.text).to.equal(200);
    secret = hook.body.secret;
    expect(secret).to.match(/^whsec_/);
  });
  after(async () => {
    await t?.close();
  });

  const nowSecs = () => Math.floor(t.svc.clock.nowMs() / 1000);

  function request(over: Partial<RequestApprovalInput> = {}): Promise<Approval> {
    return t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID,
      environmentId: envId,
      connector: 'gmail',
      category: 'send',
      method: 'POST',
      host: 'gmail.googleapis.com',
      path: '/gmail/v1/users/me/messages/send',
      task_id: 'task-1',
      session_id: 'sess-1',
      max_scope: 'permanent',
      ...over,
    });
  }

  const decisionPath = (id: string) => `/v1/approvals/${id}/decision`;
  const decide = (id: string, body: unknown, client: ApiClient = api) => client.post(decisionPath(id), body);

  /** A signed callback: exact bytes, no Authorization header. */
  // A signature decides once (issue 9, keyed on developer, t and body): like a correct
  // backend, each call signs a (t, body) not signed before: the latest second at or before now that this body has not had. (A
  // counter subtracted from now collided when the clock crossed a second between two calls.)
  const signedBefore = new Set<string>();
  function freshT(body: string): number {
    let ts = nowSecs();
    while (signedBefore.has(`${ts}\n${body}`)) ts--;
    signedBefore.add(`${ts}\n${body}`);
    return ts;
  }
  function signed(id: string, body: string, opts: { secrets?: string[]; t?: number; headers?: Record<string, string> } = {}): Promise<ApiResponse> {
    const ts = opts.t ?? freshT(body);
    return t.raw('POST', decisionPath(id), {
      body,
      headers: { 'content-type': 'application/json', 'service-signature': signatureHeader(opts.secrets ?? [secret], ts, body), ...opts.headers },
    });
  }

  async function expectPending(id: string): Promise<void> {
    const r = await api.get(`/v1/approvals/${id}`);
    expect(r.body.status).to.equal('pending');
    expect(r.body.scope).to.equal(null);
    expect(r.body.decided_via).to.equal(null);
  }

  describe('approval requests', () => {
    it('requestApproval creates a pending record with the spec\'s fields, created_at and grant_id', async () => {
      const created = t.svc.clock.nowMs();
      const a = await request();
      expect(Object.keys(a).sort()).to.deep.equal(APPROVAL_KEYS);
      expect(a.id).to.match(APR_ID);
      expect(a).to.include({
        environment_id: envId, connector: 'gmail', category: 'send', summary: 'POST gmail.googleapis.com /gmail/v1/users/me/messages/send',
        task_id: 'task-1', session_id: 'sess-1', max_scope: 'permanent', status: 'pending', scope: null, decided_via: null, decided_at: null, grant_id: null,
      });
      expect(a.created_at).to.match(TIMESTAMP);
      expect(a.expires_at).to.match(TIMESTAMP);
      const createdAt = Date.parse(a.created_at);
      expect(createdAt).to.be.within(created, created + 5000);
      expect(Date.parse(a.expires_at) - createdAt).to.equal(10 * 60 * 1000);
      const got = await api.get(`/v1/approvals/${a.id}`);
      expect(got.status).to.equal(200);
      expect(got.body).to.deep.equal(a);
    });

    it('task_id and session_id are null when absent; the summary is <METHOD> <host> <path> without the query', async () => {
      const a = await request({ task_id: undefined, session_id: null, method: 'delete', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events/e1?sendUpdates=all&token=x' });
      expect(a.task_id).to.equal(null);
      expect(a.session_id).to.equal(null);
      expect(a.summary).to.equal('DELETE www.googleapis.com /calendar/v3/calendars/primary/events/e1');
    });

    it('GET: 404 for an unknown id and for another developer\'s', async () => {
      const a = await request();
      expectNotFound(await api.get('/v1/approvals/apr_000000000000000000000000'));
      const other = await t.otherDeveloper();
      expectNotFound(await other.get(`/v1/approvals/${a.id}`));
    });

    it('list: newest first, paginated, filtered by status and environment_id; another developer sees none', async () => {
      const env = (await createEnv(api)).id;
      const made: Approval[] = [];
      for (let i = 0; i < 5; i++) {
        made.push(await request({ environmentId: env }));
        await t.advance(1);
      }
      await decide(made[1]!.id, { decision: 'deny' });
      const all = await api.get(`/v1/approvals?environment_id=${env}`);
      expect(all.status).to.equal(200);
      expect(Object.keys(all.body).sort()).to.deep.equal(['data', 'next']);
      expect(all.body.data.map((a: Approval) => a.id)).to.deep.equal(made.map((a) => a.id).reverse());
      expect(all.body.next).to.equal(null);

      const { items, pages } = await walk(api, `/v1/approvals?environment_id=${env}`, 2);
      expect(pages).to.equal(3);
      expect(items.map((a) => a.id)).to.deep.equal(made.map((a) => a.id).reverse());

      const pending = await api.get(`/v1/approvals?environment_id=${env}&status=pending`);
      expect(pending.body.data.map((a: Approval) => a.id)).to.deep.equal([4, 3, 2, 0].map((i) => made[i]!.id));
      const denied = await api.get(`/v1/approvals?environment_id=${env}&status=denied`);
      expect(denied.body.data.map((a: Approval) => a.id)).to.deep.equal([made[1]!.id]);
      expect((await api.get(`/v1/approvals?environment_id=${env}&status=approved`)).body.data).to.deep.equal([]);

      const other = await t.otherDeveloper();
      expect((await other.get('/v1/approvals')).body.data).to.deep.equal([]);
      expect((await other.get(`/v1/approvals?environment_id=${env}`)).body.data).to.deep.equal([]);
    });

    it('list: 400 for an unknown status or a bad limit; limit is clamped', async () => {
      expectError(await api.get('/v1/approvals?status=nope'), 400, 'invalid_request');
      expectError(await api.get('/v1/approvals?limit=abc'), 400, 'invalid_request');
      expect((await api.get('/v1/approvals?limit=0')).body.data.length).to.be.at.most(1);
    });

    it('an approval.requested outbox row with every field of the spec when a webhook URL is set', async () => {
      const a = await request({ connector: 'slack', category: 'send', max_scope: 'session', method: 'POST', host: 'slack.com', path: '/api/chat.postMessage' });
      const rows = await t.svc.db('webhook_events').where({ type: 'approval.requested' });
      const row = rows.find((r: any) => JSON.parse(r.body).data.approval_id === a.id);
      expect(row, 'outbox row').to.not.equal(undefined);
      expect(row.developer_id).to.equal(DEFAULT_DEVELOPER_ID);
      expect(row.environment_id).to.equal(envId);
      const envelope = JSON.parse(row.body);
      expect(envelope.id).to.match(/^evt_[0-9a-f]{24}$/);
      expect(envelope.type).to.equal('approval.requested');
      expect(envelope.environment_id).to.equal(envId);
      expect(envelope.created).to.match(TIMESTAMP);
      const d = envelope.data;
      expect(Object.keys(d).sort()).to.deep.equal(['approval_id', 'category', 'connector', 'decision_url', 'env_id', 'expires_at', 'max_scope', 'summary']);
      expect(d).to.deep.include({
        approval_id: a.id, env_id: envId, connector: 'slack', category: 'send', summary: 'POST slack.com /api/chat.postMessage', max_scope: 'session',
        decision_url: `${t.svc.baseUrl}/v1/approvals/${a.id}/decision`,
      });
      expect(d.decision_url).to.match(/^http:\/\/[^/]+\/v1\/approvals\/apr_[0-9a-f]{24}\/decision$/);
      expect(Number.isInteger(d.expires_at)).to.equal(true);
      expect(d.expires_at).to.equal(Math.floor(Date.parse(a.expires_at) / 1000));
    });

    it('no outbox row when no webhook URL is set', async () => {
      const other = await t.otherDeveloper();
      const dev = (await t.accounts.authenticate(other.key))!;
      const env = (await createEnv(other)).id;
      const a = await t.svc.approvals.requestApproval({ developerId: dev.id, environmentId: env, connector: 'gmail', category: 'send', method: 'POST', host: 'h', path: '/p', max_scope: 'once' });
      const rows = await t.svc.db('webhook_events').where({ developer_id: dev.id });
      expect(rows).to.deep.equal([]);
      expect((await other.get(`/v1/approvals/${a.id}`)).body.status).to.equal('pending');
    });
  });

  describe('decision with an API key', () => {
    it('approve once: approved, scope once, decided_via api_key, decided_at, no grant', async () => {
      const a = await request();
      const r = await decide(a.id, { decision: 'approve', scope: { kind: 'once' } });
      expect(r.status, r.text).to.equal(200);
      expect(Object.keys(r.body).sort()).to.deep.equal(APPROVAL_KEYS);
      expect(r.body).to.include({ id: a.id, status: 'approved', scope: 'once', decided_via: 'api_key', grant_id: null });
      expect(r.body.decided_at).to.match(TIMESTAMP);
      expect((await api.get(`/v1/approvals/${a.id}`)).body).to.deep.equal(r.body);
    });

    it('deny: denied, scope null, no grant', async () => {
      const a = await request();
      const r = await decide(a.id, { decision: 'deny' });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({ status: 'denied', scope: null, decided_via: 'api_key', grant_id: null });
      expect(r.body.decided_at).to.match(TIMESTAMP);
    });

    it('every scope kind maps to the approval\'s scope and a grant (time_limited for until)', async () => {
      const until = nowSecs() + 3600;
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ kind: 'task', task_id: 'task-1' }, 'task'],
        [{ kind: 'session', session_id: 'sess-1' }, 'session'],
        [{ kind: 'until', until }, 'time_limited'],
        [{ kind: 'permanent' }, 'permanent'],
      ];
      for (const [scope, name] of cases) {
        const env = (await createEnv(api)).id;
        const a = await request({ environmentId: env });
        const r = await decide(a.id, { decision: 'approve', scope });
        expect(r.status, r.text).to.equal(200);
        expect(r.body.scope).to.equal(name);
        expect(r.body.grant_id).to.match(GRT_ID);
        const grants = (await api.get(`/v1/grants?environment_id=${env}`)).body.data;
        expect(grants).to.have.length(1);
        const g = grants[0];
        expect(Object.keys(g).sort()).to.deep.equal(GRANT_KEYS);
        expect(g).to.include({ id: r.body.grant_id, environment_id: env, connector: 'gmail', category: 'send', scope: name, approval_id: a.id });
        expect(g.task_id).to.equal(name === 'task' ? 'task-1' : null);
        expect(g.session_id).to.equal(name === 'session' ? 'sess-1' : null);
        expect(g.expires_at).to.equal(name === 'time_limited' ? new Date(until * 1000).toISOString() : null);
        expect(g.created_at).to.match(TIMESTAMP);
      }
    });

    it('console decisions (service call): decided_via console, same checks', async () => {
      const a = await request();
      const other = await t.otherDeveloper();
      const otherDev = (await t.accounts.authenticate(other.key))!;
      const body = { ok: true as const, value: { decision: 'approve', scope: { kind: 'session', session_id: 'sess-1' } } };
      let err: any;
      try {
        await t.svc.approvals.decide(a.id, { via: 'console', developerId: otherDev.id }, body);
      } catch (e) {
        err = e;
      }
      expect(err?.code).to.equal('not_found');
      const out = await t.svc.approvals.decide(a.id, { via: 'console', developerId: DEFAULT_DEVELOPER_ID }, body);
      expect(out).to.include({ status: 'approved', scope: 'session', decided_via: 'console' });
      expect(out.grant_id).to.match(GRT_ID);
      expect((await api.get(`/v1/approvals/${a.id}`)).body).to.deep.equal(out);
    });

    it('401 unauthorized for a bad Bearer key (before 404)', async () => {
      const a = await request();
      for (const auth of ['Bearer sk_0000000000000000000000000000000000000000', 'Basic abc', '']) {
        expectError(await t.raw('POST', decisionPath(a.id), { body: '{"decision":"deny"}', headers: { 'content-type': 'application/json', authorization: auth } }), 401, 'unauthorized');
        expectError(await t.raw('POST', decisionPath('apr_000000000000000000000000'), { body: '{"decision":"deny"}', headers: { 'content-type': 'application/json', authorization: auth } }), 401, 'unauthorized');
      }
      await expectPending(a.id);
    });

    it('404 for an unknown approval and for another developer\'s (even with a bad body)', async () => {
      const a = await request();
      expectNotFound(await decide('apr_000000000000000000000000', { decision: 'deny' }));
      expectNotFound(await decide('nonsense', 'not a decision'));
      const other = await t.otherDeveloper();
      expectNotFound(await decide(a.id, { decision: 'deny' }, other));
      expectNotFound(await decide(a.id, { nope: 1 }, other));
      await expectPending(a.id);
    });

    it('409 already_decided for approved, denied and expired, before any body check', async () => {
      const approved = await request();
      await decide(approved.id, { decision: 'approve', scope: { kind: 'once' } });
      const denied = await request();
      await decide(denied.id, { decision: 'deny' });
      for (const id of [approved.id, denied.id]) {
        expectError(await decide(id, { decision: 'deny' }), 409, 'already_decided');
        expectError(await decide(id, { decision: 'approve', scope: { kind: 'permanent' } }), 409, 'already_decided');
        expectError(await decide(id, { bad: true }), 409, 'already_decided');
        expectError(await t.raw('POST', decisionPath(id), { body: '{"decision":', headers: { 'content-type': 'application/json', authorization: `Bearer ${api.key}` } }), 409, 'already_decided');
      }
      expect((await api.get(`/v1/approvals/${approved.id}`)).body.status).to.equal('approved');
      expect((await api.get(`/v1/approvals/${denied.id}`)).body.status).to.equal('denied');
    });

    describe('400 body checks (the approval stays pending and can be corrected)', () => {
      const invalidDecision: Array<[string, unknown]> = [
        ['a string', 'approve'],
        ['an array', [{ decision: 'approve' }]],
        ['null', null],
        ['a number', 5],
        ['an empty object', {}],
        ['decision missing', { scope: { kind: 'once' } }],
        ['an unknown decision', { decision: 'allow' }],
        ['decision in capitals', { decision: 'APPROVE', scope: { kind: 'once' } }],
        ['an unknown top-level field', { decision: 'deny', reason: 'no' }],
        ['deny with a scope', { decision: 'deny', scope: { kind: 'once' } }],
        ['scope a string', { decision: 'approve', scope: 'once' }],
        ['scope an array', { decision: 'approve', scope: [] }],
        ['scope kind missing', { decision: 'approve', scope: {} }],
        ['an unknown scope kind', { decision: 'approve', scope: { kind: 'forever' } }],
        ['time_limited as a kind (the decision kind is until)', { decision: 'approve', scope: { kind: 'time_limited', until: 9999999999 } }],
        ['an extra field in a once scope', { decision: 'approve', scope: { kind: 'once', task_id: 'task-1' } }],
        ['an extra field in a permanent scope', { decision: 'approve', scope: { kind: 'permanent', until: 9999999999 } }],
        ['an extra field in a task scope', { decision: 'approve', scope: { kind: 'task', task_id: 'task-1', session_id: 'sess-1' } }],
        ['until missing', { decision: 'approve', scope: { kind: 'until' } }],
        ['until a string', { decision: 'approve', scope: { kind: 'until', until: '9999999999' } }],
        ['until a fraction', { decision: 'approve', scope: { kind: 'until', until: 9999999999.5 } }],
        ['task_id a number', { decision: 'approve', scope: { kind: 'task', task_id: 1 } }],
      ];
      for (const [what, body] of invalidDecision) {
        it(`invalid_decision: ${what}`, async () => {
          const a = await request();
          expectError(await decide(a.id, body), 400, 'invalid_decision');
          await expectPending(a.id);
        });
      }

      it('invalid_decision for malformed JSON and for an empty JSON body (never 422 or invalid_request)', async () => {
        const a = await request();
        const headers = { 'content-type': 'application/json', authorization: `Bearer ${api.key}` };
        expectError(await t.raw('POST', decisionPath(a.id), { body: '{"decision":', headers }), 400, 'invalid_decision');
        expectError(await t.raw('POST', decisionPath(a.id), { body: '', headers }), 400, 'invalid_decision');
        await expectPending(a.id);
        // …but a malformed body on an unknown approval is still 404 first.
        expectNotFound(await t.raw('POST', decisionPath('apr_000000000000000000000000'), { body: '{"decision":', headers }));
      });

      it('415 for a body without the JSON content type or no body at all (after 404 and 409)', async () => {
        const a = await request();
        const auth = { authorization: `Bearer ${api.key}` };
        expectError(await t.raw('POST', decisionPath(a.id), { body: '{"decision":"deny"}', headers: { ...auth, 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
        expectError(await t.raw('POST', decisionPath(a.id), { headers: auth }), 415, 'unsupported_media_type');
        expectNotFound(await t.raw('POST', decisionPath('apr_000000000000000000000000'), { headers: auth }));
        await expectPending(a.id);
      });

      const missingScope: Array<[string, unknown]> = [
        ['approve without a scope', { decision: 'approve' }],
        ['approve with scope null', { decision: 'approve', scope: null }],
        ['a task scope without task_id', { decision: 'approve', scope: { kind: 'task' } }],
        ['a task scope with an empty task_id', { decision: 'approve', scope: { kind: 'task', task_id: '' } }],
        ['a session scope without session_id', { decision: 'approve', scope: { kind: 'session' } }],
        ['a session scope with an empty session_id', { decision: 'approve', scope: { kind: 'session', session_id: '' } }],
      ];
      for (const [what, body] of missingScope) {
        it(`missing_scope: ${what}`, async () => {
          const a = await request();
          expectError(await decide(a.id, body), 400, 'missing_scope');
          await expectPending(a.id);
        });
      }

      it('invalid_scope: task_id or session_id not the request\'s own', async () => {
        const a = await request();
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-2' } }), 400, 'invalid_scope');
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'session', session_id: 'sess-2' } }), 400, 'invalid_scope');
        await expectPending(a.id);
        // Corrected and resent: accepted.
        expect((await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } })).status).to.equal(200);
      });

      it('invalid_scope: a task or session scope for a request that carried no such id', async () => {
        const a = await request({ task_id: null, session_id: null });
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } }), 400, 'invalid_scope');
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'session', session_id: 'sess-1' } }), 400, 'invalid_scope');
        await expectPending(a.id);
      });

      it('invalid_scope: until not in the future (service clock)', async () => {
        await t.advance(3600); // service clock ahead of the wall clock: "now" is the service's
        const a = await request();
        for (const until of [nowSecs(), nowSecs() - 10, Math.floor(Date.now() / 1000) + 60, 0, -5]) {
          expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'until', until } }), 400, 'invalid_scope');
        }
        await expectPending(a.id);
        expect((await decide(a.id, { decision: 'approve', scope: { kind: 'until', until: nowSecs() + 60 } })).status).to.equal(200);
      });
    });

    describe('403 scope_too_wide (once < task < session < time_limited < permanent)', () => {
      const scopes: Array<[Scope, Record<string, unknown>]> = [
        ['once', { kind: 'once' }],
        ['task', { kind: 'task', task_id: 'task-1' }],
        ['session', { kind: 'session', session_id: 'sess-1' }],
        ['time_limited', { kind: 'until', until: 0 }],
        ['permanent', { kind: 'permanent' }],
      ];
      for (let max = 0; max < scopes.length - 1; max++) {
        it(`max_scope ${scopes[max]![0]}: every wider scope is 403, the max itself is accepted`, async () => {
          const a = await request({ max_scope: scopes[max]![0] });
          for (let s = max + 1; s < scopes.length; s++) {
            const scope = scopes[s]![1].kind === 'until' ? { kind: 'until', until: nowSecs() + 600 } : scopes[s]![1];
            expectError(await decide(a.id, { decision: 'approve', scope }), 403, 'scope_too_wide');
          }
          await expectPending(a.id);
          const own = scopes[max]![1].kind === 'until' ? { kind: 'until', until: nowSecs() + 600 } : scopes[max]![1];
          const ok = await decide(a.id, { decision: 'approve', scope: own });
          expect(ok.status, ok.text).to.equal(200);
          expect(ok.body.scope).to.equal(scopes[max]![0]);
        });
      }

      it('400 wins over 403 (invalid_scope on a too-wide scope)', async () => {
        const a = await request({ max_scope: 'once', task_id: null });
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'x' } }), 400, 'invalid_scope');
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'until', until: 1 } }), 400, 'invalid_scope');
        expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'permanent' } }), 403, 'scope_too_wide');
      });
    });

    it('a race of 5 concurrent decisions: exactly one wins, the others get 409', async () => {
      for (let round = 0; round < 3; round++) {
        const a = await request();
        const bodies = [
          { decision: 'approve', scope: { kind: 'permanent' } },
          { decision: 'deny' },
          { decision: 'approve', scope: { kind: 'once' } },
          { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } },
          { decision: 'deny' },
        ];
        const results = await Promise.all(bodies.map((b) => decide(a.id, b)));
        const ok = results.filter((r) => r.status === 200);
        expect(ok, results.map((r) => r.status).join(',')).to.have.length(1);
        for (const r of results.filter((x) => x.status !== 200)) expectError(r, 409, 'already_decided');
        const final = (await api.get(`/v1/approvals/${a.id}`)).body;
        expect(final).to.deep.equal(ok[0]!.body);
        const grants = (await t.svc.db('grants').where({ approval_id: a.id })).length;
        expect(grants).to.equal(final.grant_id ? 1 : 0);
      }
    });
  });

  describe('signed callbacks', () => {
    it('a valid signature over the exact bytes decides, decided_via signature', async () => {
      const a = await request();
      const body = '{"decision": "approve",\n "scope": {"kind": "session", "session_id": "sess-1"}}';
      const r = await signed(a.id, body);
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ status: 'approved', scope: 'session', decided_via: 'signature' });
      expect(r.body.grant_id).to.match(GRT_ID);
    });

    it('401 invalid_signature: no Authorization and no signature', async () => {
      const a = await request();
      expectError(await t.raw('POST', decisionPath(a.id), { body: '{"decision":"deny"}', headers: { 'content-type': 'application/json' } }), 401, 'invalid_signature');
      await expectPending(a.id);
    });

    it('401 invalid_signature: wrong secret, stale or future t, malformed header, re-serialized body', async () => {
      const a = await request();
      const body = '{"decision":"deny"}';
      expectError(await signed(a.id, body, { secrets: ['whsec_not-the-secret'] }), 401, 'invalid_signature');
      // Outside the 300 s tolerance with room to spare: the service's clock runs on while the
      // request travels (a future t of +301 s was accepted once on a loaded machine: 1 s later
      // it was within the tolerance).
      expectError(await signed(a.id, body, { t: nowSecs() - 330 }), 401, 'invalid_signature');
      expectError(await signed(a.id, body, { t: nowSecs() + 330 }), 401, 'invalid_signature');
      for (const header of ['garbage', 't=abc,v1=00', `t=${nowSecs()}`, `v1=${'0'.repeat(64)}`]) {
        expectError(await t.raw('POST', decisionPath(a.id), { body, headers: { 'content-type': 'application/json', 'service-signature': header } }), 401, 'invalid_signature');
      }
      // Signed over other bytes than those sent (re-serialized JSON breaks the signature).
      const sig = signatureHeader([secret], nowSecs(), '{"decision": "deny"}');
      expectError(await t.raw('POST', decisionPath(a.id), { body, headers: { 'content-type': 'application/json', 'service-signature': sig } }), 401, 'invalid_signature');
      await expectPending(a.id);
    });

    it('t within 300 s either way is accepted', async () => {
      for (const skew of [-299, 299]) {
        const a = await request();
        expect((await signed(a.id, '{"decision":"deny"}', { t: nowSecs() + skew })).status).to.equal(200);
      }
    });

    it('with the test clock moved ahead, t of either the service clock or the wall clock is accepted', async () => {
      await t.advance(2 * 3600);
      const a = await request();
      expect((await signed(a.id, '{"decision":"deny"}', { t: Math.floor(Date.now() / 1000) })).status).to.equal(200);
      const b = await request();
      expect((await signed(b.id, '{"decision":"deny"}', { t: nowSecs() })).status).to.equal(200);
    });

    it('order: 404 before 401, 401 before 409 (the signature is checked before state is revealed), 409 before 400', async () => {
      expectNotFound(await signed('apr_000000000000000000000000', '{"decision":"deny"}'));
      expectNotFound(await t.raw('POST', decisionPath('apr_000000000000000000000000'), { body: 'x', headers: { 'content-type': 'application/json' } }));
      const a = await request();
      await decide(a.id, { decision: 'deny' });
      expectError(await signed(a.id, '{"decision":"deny"}', { secrets: ['whsec_wrong'] }), 401, 'invalid_signature');
      expectError(await t.raw('POST', decisionPath(a.id), { body: '{"decision":"deny"}', headers: { 'content-type': 'application/json' } }), 401, 'invalid_signature');
      expectError(await signed(a.id, '{"decision":"deny"}'), 409, 'already_decided');
      expectError(await signed(a.id, '{"decision":'), 409, 'already_decided');
      const b = await request();
      expectError(await signed(b.id, '{"decision":'), 400, 'invalid_decision');
      expectError(await signed(b.id, '{"decision":"approve"}'), 400, 'missing_scope');
      expectError(await signed(b.id, '{"decision":"approve","scope":{"kind":"task","task_id":"other"}}'), 400, 'invalid_scope');
      const c = await request({ max_scope: 'once' });
      expectError(await signed(c.id, '{"decision":"approve","scope":{"kind":"permanent"}}'), 403, 'scope_too_wide');
      await expectPending(b.id);
      await expectPending(c.id);
    });

    it('a foreign developer\'s approval with our signature: 401 (their secret verifies, not ours)', async () => {
      const other = await t.otherDeveloper();
      const dev = (await t.accounts.authenticate(other.key))!;
      const env = (await createEnv(other)).id;
      const a = await t.svc.approvals.requestApproval({ developerId: dev.id, environmentId: env, connector: 'gmail', category: 'send', method: 'POST', host: 'h', path: '/p', max_scope: 'once' });
      // They have no webhook endpoint at all: nothing can verify.
      expectError(await signed(a.id, '{"decision":"deny"}'), 401, 'invalid_signature');
      const theirs = (await other.put('/v1/webhook-endpoint', { url: HOOK })).body.secret;
      expectError(await signed(a.id, '{"decision":"deny"}'), 401, 'invalid_signature');
      const r = await signed(a.id, '{"decision":"deny"}', { secrets: [theirs] });
      expect(r.status).to.equal(200);
      expect(r.body.decided_via).to.equal('signature');
    });

    it('a Service-Signature together with Authorization takes the API-key path', async () => {
      const a = await request();
      const r = await signed(a.id, '{"decision":"deny"}', { secrets: ['whsec_wrong'], headers: { authorization: `Bearer ${api.key}` } });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.decided_via).to.equal('api_key');
      const b = await request();
      expectError(await signed(b.id, '{"decision":"deny"}', { headers: { authorization: 'Bearer sk_bad' } }), 401, 'unauthorized');
    });

    it('rotation: the old secret keeps working 24 hours, then only the new one', async () => {
      const rotated = await api.post('/v1/webhook-endpoint/rotate');
      expect(rotated.status, rotated.text).to.equal(200);
      const old = secret;
      secret = rotated.body.secret;
      const a = await request();
      expect((await signed(a.id, '{"decision":"deny"}', { secrets: [old] })).status).to.equal(200);
      const b = await request();
      expect((await signed(b.id, '{"decision":"deny"}', { secrets: [secret] })).status).to.equal(200);
      const c = await request();
      expect((await signed(c.id, '{"decision":"deny"}', { secrets: [secret, old] })).status).to.equal(200);

      await t.advance(24 * 3600 + 1);
      const d = await request();
      expectError(await signed(d.id, '{"decision":"deny"}', { secrets: [old] }), 401, 'invalid_signature');
      expect((await signed(d.id, '{"decision":"deny"}', { secrets: [secret] })).status).to.equal(200);
    });
  });

  describe('expiry', () => {
    it('advancing 601 s: reads expired at once, list filters agree, a decision is 409, waitForDecision resolves expired', async () => {
      const env = (await createEnv(api)).id;
      const a = await request({ environmentId: env });
      const waiting = t.svc.approvals.waitForDecision(a.id);
      await t.advance(601);
      expect(await waiting).to.deep.equal({ status: 'expired', scope: null, grant_id: null });
      const got = (await api.get(`/v1/approvals/${a.id}`)).body;
      expect(got).to.include({ status: 'expired', scope: null, decided_via: null, decided_at: null, grant_id: null });
      expect((await api.get(`/v1/approvals?environment_id=${env}&status=expired`)).body.data.map((x: Approval) => x.id)).to.deep.equal([a.id]);
      expect((await api.get(`/v1/approvals?environment_id=${env}&status=pending`)).body.data).to.deep.equal([]);
      expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'once' } }), 409, 'already_decided');
      expectError(await signed(a.id, '{"decision":"deny"}'), 409, 'already_decided');
      // And a new wait on it resolves at once.
      expect(await t.svc.approvals.waitForDecision(a.id)).to.deep.equal({ status: 'expired', scope: null, grant_id: null });
    });

    it('a pending approval past expires_at reads expired even before the sweep runs', async () => {
      const env = (await createEnv(api)).id;
      const a = await request({ environmentId: env });
      // Move the clock without running due jobs (no test-clock endpoint): only reads decide.
      t.svc.clock.advance(600_000);
      const stored = await t.svc.db('approvals').where({ id: a.id }).first();
      expect(stored.status).to.equal('pending');
      expect((await api.get(`/v1/approvals/${a.id}`)).body.status).to.equal('expired');
      expect((await api.get(`/v1/approvals?environment_id=${env}&status=expired`)).body.data).to.have.length(1);
      expect((await api.get(`/v1/approvals?environment_id=${env}&status=pending`)).body.data).to.have.length(0);
      expectError(await decide(a.id, { decision: 'deny' }), 409, 'already_decided');
      await t.svc.approvals.expireDue();
      expect((await t.svc.db('approvals').where({ id: a.id }).first()).status).to.equal('expired');
    });

    it('599 s in, the approval is still pending and decidable', async () => {
      const a = await request();
      await t.advance(599);
      await expectPending(a.id);
      expect((await decide(a.id, { decision: 'deny' })).status).to.equal(200);
    });
  });

  describe('waitForDecision', () => {
    it('resolves in-process when decided over HTTP (approved with scope and grant, or denied)', async () => {
      const a = await request();
      const w = t.svc.approvals.waitForDecision(a.id);
      const r = await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } });
      expect(await w).to.deep.equal({ status: 'approved', scope: 'task', grant_id: r.body.grant_id });
      const b = await request();
      const w2 = t.svc.approvals.waitForDecision(b.id);
      await decide(b.id, { decision: 'deny' });
      expect(await w2).to.deep.equal({ status: 'denied', scope: null, grant_id: null });
    });

    it('resolves at once for an approval already decided', async () => {
      const a = await request();
      await decide(a.id, { decision: 'approve', scope: { kind: 'once' } });
      expect(await t.svc.approvals.waitForDecision(a.id)).to.deep.equal({ status: 'approved', scope: 'once', grant_id: null });
    });

    it('learns of a decision made by another process by polling the store', async () => {
      // A second service instance over the same database: another process's view.
      const elsewhere = createApprovalsService({ db: t.svc.db, clock: t.svc.clock, log: silentLogger, baseUrl: () => 'http://x', signingSecrets: async () => [], waitPollMs: 50 });
      try {
        const a = await request();
        const w = elsewhere.waitForDecision(a.id);
        await decide(a.id, { decision: 'deny' });
        expect(await w).to.deep.equal({ status: 'denied', scope: null, grant_id: null });
      } finally {
        elsewhere.close();
      }
    });

    it('rejects when aborted; the approval stays pending', async () => {
      const a = await request();
      const ac = new AbortController();
      const w = t.svc.approvals.waitForDecision(a.id, ac.signal);
      ac.abort(new Error('agent went away'));
      let err: unknown;
      try {
        await w;
      } catch (e) {
        err = e;
      }
      expect((err as Error).message).to.equal('agent went away');
      await expectPending(a.id);
    });

    it('rejects for an approval that does not exist', async () => {
      let err: unknown;
      try {
        await t.svc.approvals.waitForDecision('apr_000000000000000000000000');
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(Error);
    });
  });

  describe('grants through the policy check', () => {
    const check = (env: string, extra: Record<string, unknown> = {}) =>
      api.post(`/v1/environments/${env}/policy/check`, { connector: 'gmail', category: 'send', ...extra });

    async function approvedGrant(env: string, scope: Record<string, unknown>, over: Partial<RequestApprovalInput> = {}): Promise<string> {
      const a = await request({ environmentId: env, ...over });
      const r = await decide(a.id, { decision: 'approve', scope });
      expect(r.status, r.text).to.equal(200);
      return r.body.grant_id;
    }

    it('without a grant, a high-risk request asks (high_risk)', async () => {
      const env = (await createEnv(api)).id;
      expect((await check(env)).body).to.include({ decision: 'ask', reason: 'high_risk', max_scope: 'permanent', grant: null });
    });

    it('a once approval leaves no grant', async () => {
      const env = (await createEnv(api)).id;
      await approvedGrant(env, { kind: 'once' });
      expect((await check(env, { task_id: 'task-1', session_id: 'sess-1' })).body).to.include({ decision: 'ask', reason: 'high_risk' });
      expect((await api.get(`/v1/grants?environment_id=${env}`)).body.data).to.deep.equal([]);
    });

    it('a task grant covers the same task_id only (same connector, category, environment)', async () => {
      const env = (await createEnv(api)).id;
      const id = await approvedGrant(env, { kind: 'task', task_id: 'task-1' });
      const hit = await check(env, { task_id: 'task-1' });
      expect(hit.body).to.include({ decision: 'allow', reason: 'grant' });
      expect(hit.body.grant).to.include({ id, scope: 'task', task_id: 'task-1', environment_id: env });
      expect(Object.keys(hit.body.grant).sort()).to.deep.equal(GRANT_KEYS);
      expect((await check(env, { task_id: 'task-2' })).body).to.include({ decision: 'ask', reason: 'high_risk' });
      expect((await check(env)).body.decision).to.equal('ask');
      expect((await check(env, { session_id: 'sess-1' })).body.decision).to.equal('ask');
      expect((await check(env, { task_id: 'task-1', category: 'delete' })).body.decision).to.equal('ask');
      expect((await check(env, { task_id: 'task-1', connector: 'slack' })).body.decision).to.equal('ask');
      const env2 = (await createEnv(api)).id;
      expect((await check(env2, { task_id: 'task-1' })).body.decision).to.equal('ask');
    });

    it('a session grant covers the same session_id only', async () => {
      const env = (await createEnv(api)).id;
      const id = await approvedGrant(env, { kind: 'session', session_id: 'sess-1' });
      expect((await check(env, { session_id: 'sess-1' })).body.grant.id).to.equal(id);
      expect((await check(env, { session_id: 'sess-2' })).body.decision).to.equal('ask');
      expect((await check(env, { task_id: 'task-1' })).body.decision).to.equal('ask');
    });

    it('a time-limited grant covers until `until`, then not (and is no longer listed)', async () => {
      const env = (await createEnv(api)).id;
      const id = await approvedGrant(env, { kind: 'until', until: nowSecs() + 3600 });
      expect((await check(env)).body).to.include({ decision: 'allow', reason: 'grant' });
      expect((await check(env)).body.grant.id).to.equal(id);
      await t.advance(3500);
      expect((await check(env)).body.decision).to.equal('allow');
      expect((await api.get(`/v1/grants?environment_id=${env}`)).body.data.map((g: any) => g.id)).to.deep.equal([id]);
      await t.advance(101);
      expect((await check(env)).body).to.include({ decision: 'ask', reason: 'high_risk', grant: null });
      expect((await api.get(`/v1/grants?environment_id=${env}`)).body.data).to.deep.equal([]);
    });

    it('a permanent grant covers every request of that connector and category in the environment', async () => {
      const env = (await createEnv(api)).id;
      const id = await approvedGrant(env, { kind: 'permanent' });
      for (const extra of [{}, { task_id: 'x' }, { session_id: 'y' }]) expect((await check(env, extra)).body.grant.id).to.equal(id);
      await t.advance(365 * 86400);
      expect((await check(env)).body.decision).to.equal('allow');
    });

    it('an ask rule is answered by a covering grant; a deny rule beats every grant', async () => {
      const env = (await createEnv(api)).id;
      await api.put(`/v1/environments/${env}/policy`, { rules: [{ connector: 'gmail', effect: 'ask', max_scope: 'task' }] });
      const a = await request({ environmentId: env, max_scope: 'task' });
      expectError(await decide(a.id, { decision: 'approve', scope: { kind: 'permanent' } }), 403, 'scope_too_wide');
      await decide(a.id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } });
      expect((await check(env, { task_id: 'task-1' })).body).to.include({ decision: 'allow', reason: 'grant' });
      expect((await check(env, { task_id: 'task-9' })).body).to.include({ decision: 'ask', reason: 'ask_rule', max_scope: 'task' });
      await api.put(`/v1/environments/${env}/policy`, { rules: [{ connector: 'gmail', effect: 'deny' }] });
      expect((await check(env, { task_id: 'task-1' })).body).to.include({ decision: 'deny', reason: 'deny_rule', grant: null });
    });

    it('revocation takes effect for the very next check; DELETE is 204 again; 404 only for ids never issued to us', async () => {
      const env = (await createEnv(api)).id;
      const id = await approvedGrant(env, { kind: 'permanent' });
      expect((await check(env)).body.decision).to.equal('allow');
      const del = await api.delete(`/v1/grants/${id}`);
      expect(del.status).to.equal(204);
      expect(del.text).to.equal('');
      expect((await check(env)).body).to.include({ decision: 'ask', reason: 'high_risk', grant: null });
      expect((await api.get(`/v1/grants?environment_id=${env}`)).body.data).to.deep.equal([]);
      expect((await api.delete(`/v1/grants/${id}`)).status).to.equal(204);
      expectNotFound(await api.delete('/v1/grants/grt_000000000000000000000000'));
      const other = await t.otherDeveloper();
      const id2 = await approvedGrant(env, { kind: 'permanent' });
      expectNotFound(await other.delete(`/v1/grants/${id2}`));
      expect((await check(env)).body.grant.id).to.equal(id2);
    });

    it('list grants: newest first, paginated, environment filter, per developer', async () => {
      const env = (await createEnv(api)).id;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push(await approvedGrant(env, { kind: 'permanent' }));
        await t.advance(1);
      }
      const { items, pages } = await walk(api, `/v1/grants?environment_id=${env}`, 2);
      expect(pages).to.equal(2);
      expect(items.map((g) => g.id)).to.deep.equal(ids.slice().reverse());
      const all = (await api.get('/v1/grants?limit=200')).body.data.map((g: any) => g.id);
      for (const id of ids) expect(all).to.include(id);
      const other = await t.otherDeveloper();
      expect((await other.get('/v1/grants')).body).to.deep.equal({ data: [], next: null });
    });
  });
});
