/**
 * Policies API (decisions.md "Policies"; service.md "Policy rule", "Policy check", "Policy
 * decision rules", Endpoints → Policies and approvals) against the real API and database.
 */
import { expect } from 'chai';
import { startTestService, type ApiClient, type TestService } from '../helpers/service.js';
import { createEnv, expectError, expectNotFound } from './environments.fixtures.js';

describe('policies API', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });
  afterEach(async () => {
    await api.delete('/v1/policy');
  });

  const check = (envId: string, body: Record<string, unknown>, client: ApiClient = api) => client.post(`/v1/environments/${envId}/policy/check`, body);

  describe('developer default policy', () => {
    it('GET is the built-in default before any set: {rules: [], source: default}', async () => {
      const r = await api.get('/v1/policy');
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ rules: [], source: 'default' });
    });

    it('PUT stores and returns {rules, source: developer}; GET reads it; a second PUT replaces it as a whole', async () => {
      const rules = [
        { connector: 'gmail', category: 'read', effect: 'allow' },
        { connector: 'slack', effect: 'ask', max_scope: 'session' },
        { effect: 'deny', category: 'pay' },
      ];
      const put = await api.put('/v1/policy', { rules });
      expect(put.status, put.text).to.equal(200);
      expect(put.body).to.deep.equal({ rules, source: 'developer' });
      expect((await api.get('/v1/policy')).body).to.deep.equal({ rules, source: 'developer' });

      const replaced = [{ connector: 'calendar', effect: 'allow' }];
      expect((await api.put('/v1/policy', { rules: replaced })).body).to.deep.equal({ rules: replaced, source: 'developer' });
      expect((await api.get('/v1/policy')).body).to.deep.equal({ rules: replaced, source: 'developer' });
    });

    it('an empty rules array is a developer policy of its own (source developer)', async () => {
      expect((await api.put('/v1/policy', { rules: [] })).body).to.deep.equal({ rules: [], source: 'developer' });
      expect((await api.get('/v1/policy')).body.source).to.equal('developer');
    });

    it('DELETE goes back to the built-in default; repeating it is fine', async () => {
      await api.put('/v1/policy', { rules: [{ effect: 'allow', category: 'read' }] });
      const d = await api.delete('/v1/policy');
      expect(d.status).to.equal(200);
      expect(d.body).to.deep.equal({ rules: [], source: 'default' });
      expect((await api.get('/v1/policy')).body).to.deep.equal({ rules: [], source: 'default' });
      expect((await api.delete('/v1/policy')).body).to.deep.equal({ rules: [], source: 'default' });
    });

    it('is per developer: another developer never sees it', async () => {
      await api.put('/v1/policy', { rules: [{ effect: 'allow', category: 'read' }] });
      const other = await t.otherDeveloper();
      expect((await other.get('/v1/policy')).body).to.deep.equal({ rules: [], source: 'default' });
    });

    it('echoes only the fields sent, in a fixed order', async () => {
      const r = await api.put('/v1/policy', { rules: [{ max_scope: 'task', effect: 'ask', category: 'send', connector: 'gmail' }] });
      expect(r.status).to.equal(200);
      expect(JSON.stringify(r.body.rules[0])).to.equal('{"connector":"gmail","category":"send","effect":"ask","max_scope":"task"}');
    });
  });

  describe('rule validation (400 for values, 422 for shape)', () => {
    const cases400: Array<[string, unknown]> = [
      ['an allow rule for a high-risk category', [{ category: 'send', effect: 'allow' }]],
      ['an allow rule for pay', [{ connector: 'secret:STRIPE', category: 'pay', effect: 'allow' }]],
      ['max_scope on a deny rule', [{ effect: 'deny', max_scope: 'once' }]],
      ['max_scope on an allow rule', [{ effect: 'allow', category: 'read', max_scope: 'task' }]],
      ['an empty connector', [{ connector: '', effect: 'deny' }]],
      ['a connector of 101 characters', [{ connector: 'x'.repeat(101), effect: 'deny' }]],
      ['101 rules', Array.from({ length: 101 }, () => ({ effect: 'deny' }))],
    ];
    for (const [what, rules] of cases400) {
      it(`400 invalid_request: ${what}`, async () => {
        for (const path of ['/v1/policy']) expectError(await api.put(path, { rules }), 400, 'invalid_request');
        const env = await createEnv(api);
        expectError(await api.put(`/v1/environments/${env.id}/policy`, { rules }), 400, 'invalid_request');
        expect((await api.get('/v1/policy')).body.source).to.equal('default');
        expect((await api.get(`/v1/environments/${env.id}/policy`)).body.source).to.equal('default');
      });
    }

    it('accepts exactly 100 rules and a connector of 100 characters', async () => {
      expect((await api.put('/v1/policy', { rules: Array.from({ length: 100 }, () => ({ effect: 'deny' })) })).status).to.equal(200);
      expect((await api.put('/v1/policy', { rules: [{ connector: 'x'.repeat(100), effect: 'deny' }] })).status).to.equal(200);
    });

    const cases422: Array<[string, unknown]> = [
      ['an unknown top-level field', { rules: [], extra: 1 }],
      ['rules missing', {}],
      ['rules not an array', { rules: { effect: 'allow' } }],
      ['a body that is an array', [{ effect: 'allow' }]],
      ['a body that is a string', 'rules'],
      ['a body that is null', null],
      ['an unknown rule field', { rules: [{ effect: 'deny', nope: true }] }],
      ['a misspelled effect', { rules: [{ effect: 'alow' }] }],
      ['an effect missing', { rules: [{ connector: 'gmail' }] }],
      ['an unknown category', { rules: [{ effect: 'deny', category: 'readd' }] }],
      ['an unknown max_scope', { rules: [{ effect: 'ask', max_scope: 'forever' }] }],
      ['a connector that is not a string', { rules: [{ effect: 'deny', connector: 5 }] }],
      ['a rule that is not an object', { rules: ['allow'] }],
      ['shape and value errors together (422 wins)', { rules: [{ category: 'send', effect: 'allow' }, { effect: 'nope' }] }],
    ];
    for (const [what, body] of cases422) {
      it(`422 invalid_body: ${what}`, async () => {
        expectError(await api.put('/v1/policy', body), 422, 'invalid_body');
      });
    }

    it('415 without the JSON content type, 400 for malformed JSON', async () => {
      const auth = { authorization: `Bearer ${api.key}` };
      expectError(await t.raw('PUT', '/v1/policy', { body: '{"rules":[]}', headers: { ...auth, 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
      expectError(await t.raw('PUT', '/v1/policy', { headers: auth }), 415, 'unsupported_media_type');
      expectError(await t.raw('PUT', '/v1/policy', { body: '{"rules":', headers: { ...auth, 'content-type': 'application/json' } }), 400, 'invalid_request');
    });

    it('401 without an API key', async () => {
      const r = await t.raw('GET', '/v1/policy');
      expectError(r, 401, 'unauthorized');
    });
  });

  describe('environment policy', () => {
    it('GET is the effective policy: built-in, then developer default, then the environment\'s own', async () => {
      const env = await createEnv(api);
      expect((await api.get(`/v1/environments/${env.id}/policy`)).body).to.deep.equal({ rules: [], source: 'default' });
      const dev = [{ effect: 'allow', category: 'read' }];
      await api.put('/v1/policy', { rules: dev });
      expect((await api.get(`/v1/environments/${env.id}/policy`)).body).to.deep.equal({ rules: dev, source: 'developer' });
      const own = [{ effect: 'deny' }];
      const put = await api.put(`/v1/environments/${env.id}/policy`, { rules: own });
      expect(put.status).to.equal(200);
      expect(put.body).to.deep.equal({ rules: own, source: 'environment' });
      expect((await api.get(`/v1/environments/${env.id}/policy`)).body).to.deep.equal({ rules: own, source: 'environment' });
      // Other environments keep the developer default.
      const env2 = await createEnv(api);
      expect((await api.get(`/v1/environments/${env2.id}/policy`)).body).to.deep.equal({ rules: dev, source: 'developer' });
    });

    it('replaces the default completely (no merge), even with an empty list', async () => {
      const env = await createEnv(api);
      await api.put('/v1/policy', { rules: [{ effect: 'allow', category: 'read' }] });
      await api.put(`/v1/environments/${env.id}/policy`, { rules: [] });
      const r = await check(env.id, { connector: 'gmail', category: 'read' });
      expect(r.body).to.include({ decision: 'deny', reason: 'no_rule', source: 'environment' });
    });

    it('DELETE returns the effective policy after it (developer default, else built-in)', async () => {
      const env = await createEnv(api);
      await api.put(`/v1/environments/${env.id}/policy`, { rules: [{ effect: 'deny' }] });
      const dev = [{ effect: 'allow', connector: 'gmail', category: 'read' }];
      await api.put('/v1/policy', { rules: dev });
      const d = await api.delete(`/v1/environments/${env.id}/policy`);
      expect(d.status).to.equal(200);
      expect(d.body).to.deep.equal({ rules: dev, source: 'developer' });
      await api.delete('/v1/policy');
      expect((await api.delete(`/v1/environments/${env.id}/policy`)).body).to.deep.equal({ rules: [], source: 'default' });
    });

    it('404 for an unknown environment and for another developer\'s, on every operation', async () => {
      const env = await createEnv(api);
      const other = await t.otherDeveloper();
      for (const [client, id] of [[api, 'env_000000000000000000000000'], [other, env.id]] as const) {
        expectNotFound(await client.get(`/v1/environments/${id}/policy`));
        expectNotFound(await client.put(`/v1/environments/${id}/policy`, { rules: [] }));
        expectNotFound(await client.delete(`/v1/environments/${id}/policy`));
        expectNotFound(await check(id, { connector: 'gmail', category: 'read' }, client));
      }
      // Nothing changed for the owner.
      expect((await api.get(`/v1/environments/${env.id}/policy`)).body.source).to.equal('default');
    });

    it('destroyed environment: PUT and DELETE are 409 environment_destroyed; GET and check still answer', async () => {
      const env = await createEnv(api);
      await api.put(`/v1/environments/${env.id}/policy`, { rules: [{ effect: 'allow', category: 'read' }] });
      expect((await api.delete(`/v1/environments/${env.id}`)).status).to.equal(200);
      expectError(await api.put(`/v1/environments/${env.id}/policy`, { rules: [] }), 409, 'environment_destroyed');
      expectError(await api.delete(`/v1/environments/${env.id}/policy`), 409, 'environment_destroyed');
      expect((await api.get(`/v1/environments/${env.id}/policy`)).body.source).to.equal('environment');
      expect((await check(env.id, { connector: 'gmail', category: 'read' })).body.decision).to.equal('allow');
    });
  });

  describe('policy check', () => {
    let envId: string;
    before(async () => {
      envId = (await createEnv(api, {
        secrets: {
          INFRA: { value: 'db-password', allowed_hosts: ['db.example.com'], infrastructure: true },
          PLAIN: { value: 'plain', allowed_hosts: ['api.example.com'] },
        },
      })).id;
    });

    it('allow by rule: reason rule, matched_rules, grant null, source, no max_scope', async () => {
      await api.put('/v1/policy', { rules: [{ connector: 'slack', effect: 'deny' }, { connector: 'gmail', category: 'read', effect: 'allow' }, { category: 'read', effect: 'allow' }] });
      const r = await check(envId, { connector: 'gmail', category: 'read' });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ decision: 'allow', reason: 'rule', matched_rules: [1, 2], grant: null, source: 'developer' });
    });

    it('deny rule beats ask and allow: deny_rule', async () => {
      await api.put('/v1/policy', { rules: [{ connector: 'gmail', effect: 'allow', category: 'read' }, { effect: 'ask', connector: 'gmail' }, { connector: 'gmail', category: 'read', effect: 'deny' }] });
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body).to.deep.equal({ decision: 'deny', reason: 'deny_rule', matched_rules: [0, 1, 2], grant: null, source: 'developer' });
    });

    it('ask rule: ask_rule with the narrowest max_scope among matching ask rules (omitted = permanent)', async () => {
      await api.put('/v1/policy', { rules: [{ connector: 'gmail', effect: 'ask' }, { category: 'write', effect: 'ask', max_scope: 'session' }, { connector: 'gmail', category: 'write', effect: 'ask', max_scope: 'time_limited' }, { effect: 'allow', category: 'write' }] });
      expect((await check(envId, { connector: 'gmail', category: 'write' })).body).to.deep.equal({ decision: 'ask', reason: 'ask_rule', matched_rules: [0, 1, 2, 3], max_scope: 'session', grant: null, source: 'developer' });
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body).to.deep.equal({ decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'permanent', grant: null, source: 'developer' });
    });

    it('high-risk category no rule covers: ask high_risk, max_scope permanent (an allow without category does not allow it)', async () => {
      await api.put('/v1/policy', { rules: [{ connector: 'gmail', effect: 'allow' }] });
      expect((await check(envId, { connector: 'gmail', category: 'send' })).body).to.deep.equal({ decision: 'ask', reason: 'high_risk', matched_rules: [0], max_scope: 'permanent', grant: null, source: 'developer' });
      expect((await check(envId, { connector: 'slack', category: 'delete' })).body).to.deep.equal({ decision: 'ask', reason: 'high_risk', matched_rules: [], max_scope: 'permanent', grant: null, source: 'developer' });
    });

    it('read or write no rule covers: deny no_rule (built-in default)', async () => {
      expect((await check(envId, { connector: 'calendar', category: 'write' })).body).to.deep.equal({ decision: 'deny', reason: 'no_rule', matched_rules: [], grant: null, source: 'default' });
    });

    it('an infrastructure secret skips the policy: allow infrastructure_credential (even with a deny rule)', async () => {
      await api.put('/v1/policy', { rules: [{ connector: 'secret:INFRA', effect: 'deny' }] });
      expect((await check(envId, { connector: 'secret:INFRA', category: 'delete' })).body).to.deep.equal({ decision: 'allow', reason: 'infrastructure_credential', matched_rules: [0], grant: null, source: 'developer' });
      // A secret not flagged, or one that does not exist, goes through the policy.
      expect((await check(envId, { connector: 'secret:PLAIN', category: 'read' })).body).to.include({ decision: 'deny', reason: 'no_rule' });
      expect((await check(envId, { connector: 'secret:NOPE', category: 'read' })).body).to.include({ decision: 'deny', reason: 'no_rule' });
      // Another environment has no such secret.
      const other = await createEnv(api);
      expect((await check(other.id, { connector: 'secret:INFRA', category: 'read' })).body).to.include({ decision: 'deny', reason: 'deny_rule' });
    });

    it('a developer-level infrastructure secret counts unless the environment has its own secret of that name', async () => {
      const put = await api.put('/v1/secrets/DEVINFRA', { value: 'v', allowed_hosts: ['db.example.com'], infrastructure: true });
      expect(put.status, put.text).to.be.oneOf([200, 201]);
      try {
        expect((await check(envId, { connector: 'secret:DEVINFRA', category: 'write' })).body).to.include({ decision: 'allow', reason: 'infrastructure_credential' });
        const own = (await createEnv(api, { secrets: { DEVINFRA: { value: 'mine', allowed_hosts: ['db.example.com'] } } })).id;
        expect((await check(own, { connector: 'secret:DEVINFRA', category: 'write' })).body).to.include({ decision: 'deny', reason: 'no_rule' });
      } finally {
        await api.delete('/v1/secrets/DEVINFRA');
      }
    });

    it('a policy change is seen by the very next check (cache invalidated in-process)', async () => {
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body.decision).to.equal('deny');
      await api.put('/v1/policy', { rules: [{ connector: 'gmail', category: 'read', effect: 'allow' }] });
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body.decision).to.equal('allow');
      await api.put(`/v1/environments/${envId}/policy`, { rules: [{ connector: 'gmail', effect: 'deny' }] });
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body).to.include({ decision: 'deny', source: 'environment' });
      await api.delete(`/v1/environments/${envId}/policy`);
      expect((await check(envId, { connector: 'gmail', category: 'read' })).body).to.include({ decision: 'allow', source: 'developer' });
    });

    it('creates no approval', async () => {
      await api.put('/v1/policy', { rules: [{ effect: 'ask' }] });
      const before = (await api.get('/v1/approvals')).body.data.length;
      expect((await check(envId, { connector: 'gmail', category: 'send', task_id: 't1', session_id: 's1' })).body.decision).to.equal('ask');
      expect((await api.get('/v1/approvals')).body.data.length).to.equal(before);
    });

    it('accepts task_id and session_id (null and empty mean none)', async () => {
      for (const extra of [{ task_id: 't' }, { session_id: 's' }, { task_id: null, session_id: '' }]) {
        expect((await check(envId, { connector: 'gmail', category: 'read', ...extra })).status).to.equal(200);
      }
    });

    it('body errors: 422 for shape, 400 for values, 415 without a body', async () => {
      for (const body of [{}, { connector: 'gmail' }, { category: 'read' }, { connector: 'gmail', category: 'nope' }, { connector: 1, category: 'read' }, { connector: 'gmail', category: 'read', extra: 1 }, { connector: 'gmail', category: 'read', task_id: 5 }]) {
        expectError(await check(envId, body), 422, 'invalid_body');
      }
      expectError(await check(envId, { connector: '', category: 'read' }), 400, 'invalid_request');
      expectError(await check(envId, { connector: 'x'.repeat(101), category: 'read' }), 400, 'invalid_request');
      expectError(await t.raw('POST', `/v1/environments/${envId}/policy/check`, { headers: { authorization: `Bearer ${api.key}` } }), 415, 'unsupported_media_type');
    });
  });
});
