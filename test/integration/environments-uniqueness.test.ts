/**
 * One non-destroyed environment per end user, Idempotency-Key, and the batch create
 * (service.md: Environment, Endpoints → Environments, Errors; decisions.md).
 */
import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { ENV_ID, createEnv, expectError, uid } from './environments.fixtures.js';

describe('environments: one per end user, idempotency, batch', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  const post = (body: unknown, headers?: Record<string, string>) => api.post('/v1/environments', body, headers);
  const rowsFor = (endUser: string) => t.svc.db('environments').where({ end_user_id: endUser });

  describe('one non-destroyed environment per end user', () => {
    it('a second create for the end user is 409 environment_exists carrying the first id', async () => {
      const endUser = uid('dup');
      const first = await createEnv(api, { end_user_id: endUser });
      expectError(await post({ end_user_id: endUser }), 409, 'environment_exists', first.id);
      expectError(await post({ end_user_id: endUser, resources: { cpus: 4 } }), 409, 'environment_exists', first.id);
      expect(await rowsFor(endUser)).to.have.length(1);
    });

    it('a suspended environment still counts', async () => {
      const endUser = uid('dup-susp');
      const first = await createEnv(api, { end_user_id: endUser });
      expect((await api.post(`/v1/environments/${first.id}/suspend`)).status).to.equal(200);
      expectError(await post({ end_user_id: endUser }), 409, 'environment_exists', first.id);
    });

    it('end user ids are compared exactly (case and trailing spaces matter)', async () => {
      const base = uid('Case');
      await createEnv(api, { end_user_id: base });
      await createEnv(api, { end_user_id: base.toLowerCase() });
      await createEnv(api, { end_user_id: `${base} ` });
      await createEnv(api, { end_user_id: ` ${base}` });
    });

    it('the same end user id of another developer is independent', async () => {
      const endUser = uid('shared');
      const mine = await createEnv(api, { end_user_id: endUser });
      const other = await t.otherDeveloper();
      const theirs = await other.post('/v1/environments', { end_user_id: endUser });
      expect(theirs.status, theirs.text).to.equal(201);
      expect(theirs.body.id).not.to.equal(mine.id);
    });

    it('after destroy a new environment can be created for the end user', async () => {
      const endUser = uid('recreate');
      const first = await createEnv(api, { end_user_id: endUser });
      expect((await api.delete(`/v1/environments/${first.id}`)).status).to.equal(200);
      const second = await createEnv(api, { end_user_id: endUser });
      expect(second.id).not.to.equal(first.id);
      expectError(await post({ end_user_id: endUser }), 409, 'environment_exists', second.id);
      expect(await rowsFor(endUser)).to.have.length(2);
    });

    it('RACE: 8 concurrent creates for one end user: exactly one 201, the rest 409 with the winner id', async () => {
      const endUser = uid('race');
      const results = await Promise.all(Array.from({ length: 8 }, () => post({ end_user_id: endUser })));
      const created = results.filter((r) => r.status === 201);
      expect(created, results.map((r) => `${r.status} ${r.text}`).join('\n')).to.have.length(1);
      const winner = created[0]!.body.id;
      for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'environment_exists', winner);
      const rows = await rowsFor(endUser);
      expect(rows).to.have.length(1);
      expect(rows[0].id).to.equal(winner);
      const events = await api.get(`/v1/environments/${winner}/events?kind=created`);
      expect(events.body.data).to.have.length(1);
    });

    it('RACE: concurrent creates for different end users all succeed', async () => {
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post({ end_user_id: uid(`par${i}`) })));
      expect(results.map((r) => r.status)).to.deep.equal(Array(8).fill(201));
      expect(new Set(results.map((r) => r.body.id)).size).to.equal(8);
    });
  });

  describe('Idempotency-Key', () => {
    const key = () => `idem-${uid('k')}`;

    it('201, then 200 with the identical original; no second environment or event', async () => {
      const k = key();
      const body = { end_user_id: uid('idem'), resources: { cpus: 3 } };
      const first = await post(body, { 'idempotency-key': k });
      expect(first.status, first.text).to.equal(201);
      const second = await post(body, { 'idempotency-key': k });
      expect(second.status, second.text).to.equal(200);
      expect(second.body).to.deep.equal(first.body);
      const third = await post(body, { 'idempotency-key': k });
      expect(third.status).to.equal(200);
      expect(third.body).to.deep.equal(first.body);
      expect(await rowsFor(body.end_user_id)).to.have.length(1);
      expect((await api.get(`/v1/environments/${first.body.id}/events?kind=created`)).body.data).to.have.length(1);
    });

    it('a retry with the same key answers with the environment even when the body differs for the same end user', async () => {
      const k = key();
      const endUser = uid('idem-diff');
      const first = await post({ end_user_id: endUser }, { 'idempotency-key': k });
      const retry = await post({ end_user_id: endUser, resources: { cpus: 8 } }, { 'idempotency-key': k });
      expect(retry.status).to.equal(200);
      expect(retry.body.id).to.equal(first.body.id);
      expect(retry.body.resources.cpus).to.equal(2);
    });

    it('the same key for another end user is 409 idempotency_key_reused carrying the environment id', async () => {
      const k = key();
      const first = await post({ end_user_id: uid('idem-a') }, { 'idempotency-key': k });
      expect(first.status).to.equal(201);
      const otherUser = uid('idem-b');
      expectError(await post({ end_user_id: otherUser }, { 'idempotency-key': k }), 409, 'idempotency_key_reused', first.body.id);
      expect(await rowsFor(otherUser)).to.have.length(0);
    });

    it('a new key for an end user that already has an environment is 409 environment_exists', async () => {
      const endUser = uid('idem-exists');
      const first = await post({ end_user_id: endUser }, { 'idempotency-key': key() });
      expectError(await post({ end_user_id: endUser }, { 'idempotency-key': key() }), 409, 'environment_exists', first.body.id);
    });

    it('keys are scoped to the developer: another developer can use the same key', async () => {
      const k = key();
      const endUser = uid('idem-scope');
      const mine = await post({ end_user_id: endUser }, { 'idempotency-key': k });
      expect(mine.status).to.equal(201);
      const other = await t.otherDeveloper();
      const theirs = await other.post('/v1/environments', { end_user_id: endUser }, { 'idempotency-key': k });
      expect(theirs.status, theirs.text).to.equal(201);
      expect(theirs.body.id).not.to.equal(mine.body.id);
      const theirsForOtherUser = await other.post('/v1/environments', { end_user_id: uid('x') }, { 'idempotency-key': k });
      expectError(theirsForOtherUser, 409, 'idempotency_key_reused', theirs.body.id);
    });

    it('after destroy the key is free again: same key creates a new environment (also for another end user)', async () => {
      const k = key();
      const endUser = uid('idem-free');
      const first = await post({ end_user_id: endUser }, { 'idempotency-key': k });
      expect((await api.delete(`/v1/environments/${first.body.id}`)).status).to.equal(200);
      const again = await post({ end_user_id: endUser }, { 'idempotency-key': k });
      expect(again.status, again.text).to.equal(201);
      expect(again.body.id).not.to.equal(first.body.id);
      expect(again.body.desired_state).to.equal('running');
      expect((await api.delete(`/v1/environments/${again.body.id}`)).status).to.equal(200);
      const otherUser = await post({ end_user_id: uid('idem-free-b') }, { 'idempotency-key': k });
      expect(otherUser.status, otherUser.text).to.equal(201);
    });

    it('a failed create does not bind the key', async () => {
      const k = key();
      const endUser = uid('idem-fail');
      expectError(await post({ end_user_id: endUser, template: 'missing:1' }, { 'idempotency-key': k }), 400, 'invalid_request');
      expectError(await post({ end_user_id: endUser, resources: { cpus: 99 } }, { 'idempotency-key': k }), 400, 'invalid_request');
      const ok = await post({ end_user_id: uid('idem-fail-b') }, { 'idempotency-key': k });
      expect(ok.status, ok.text).to.equal(201);
    });

    it('accepts 1 and 255 visible ASCII characters', async () => {
      for (const k of ['!', `${key()}${'~'.repeat(255)}`.slice(0, 255), `!"#$%&'()*+,-./:;<=>?@[\\]^_\`{|}~${uid()}`]) {
        const r = await post({ end_user_id: uid('idem-ok') }, { 'idempotency-key': k });
        expect(r.status, `${k}: ${r.text}`).to.equal(201);
      }
    });

    it('rejects 256 characters, a space, a non-ASCII or an empty key with 400 invalid_request', async () => {
      const endUser = uid('idem-bad');
      for (const k of ['k'.repeat(256), 'has space', 'caf\u00e9', '\u00a0x', '']) {
        expectError(await post({ end_user_id: endUser }, { 'idempotency-key': k }), 400, 'invalid_request');
      }
      expect(await rowsFor(endUser)).to.have.length(0);
    });

    it('RACE: 6 concurrent creates with one key for one end user: one 201, the others 200 with the same id', async () => {
      const k = key();
      const endUser = uid('idem-race');
      const results = await Promise.all(Array.from({ length: 6 }, () => post({ end_user_id: endUser }, { 'idempotency-key': k })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses, results.map((r) => `${r.status} ${r.text}`).join('\n')).to.deep.equal([200, 200, 200, 200, 200, 201]);
      const id = results.find((r) => r.status === 201)!.body.id;
      for (const r of results) expect(r.body.id).to.equal(id);
      expect(await rowsFor(endUser)).to.have.length(1);
    });

    it('RACE: one key, concurrent creates for different end users: one 201, the others 409 idempotency_key_reused', async () => {
      const k = key();
      const results = await Promise.all(Array.from({ length: 5 }, (_, i) => post({ end_user_id: uid(`idem-race-${i}`) }, { 'idempotency-key': k })));
      const created = results.filter((r) => r.status === 201);
      expect(created, results.map((r) => `${r.status} ${r.text}`).join('\n')).to.have.length(1);
      for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'idempotency_key_reused', created[0]!.body.id);
    });
  });

  describe('batch', () => {
    const batch = (body: unknown, client: ApiClient = api) => client.post('/v1/environments/batch', body);

    it('answers 200 with one result per item in request order', async () => {
      const a = uid('b-a');
      const b = uid('b-b');
      const c = uid('b-c');
      const res = await batch({ environments: [{ end_user_id: a }, { end_user_id: b, resources: { cpus: 9 } }, { end_user_id: c, idle: { suspend_after_secs: 60 } }] });
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body)).to.deep.equal(['data']);
      expect(res.body.data).to.have.length(3);
      expect(Object.keys(res.body.data[0])).to.deep.equal(['environment']);
      expect(res.body.data[0].environment.end_user_id).to.equal(a);
      expect(res.body.data[0].environment.id).to.match(ENV_ID);
      expect(res.body.data[0].environment.desired_state).to.equal('running');
      expect(res.body.data[0].environment.state).to.equal('pending');
      expect(Object.keys(res.body.data[1]).sort()).to.deep.equal(['error', 'message']);
      expect(res.body.data[1].error).to.equal('invalid_request');
      expect(res.body.data[2].environment.end_user_id).to.equal(c);
      expect(res.body.data[2].environment.idle.suspend_after_secs).to.equal(60);
      expect(await rowsFor(b)).to.have.length(0);
      const got = await api.get(`/v1/environments/${res.body.data[0].environment.id}`);
      expect(got.body).to.deep.equal(res.body.data[0].environment);
    });

    it('an item whose end user already has an environment fails with environment_exists and its id', async () => {
      const endUser = uid('b-exists');
      const existing = await createEnv(api, { end_user_id: endUser });
      const res = await batch({ environments: [{ end_user_id: endUser }, { end_user_id: uid('b-new') }] });
      expect(res.status).to.equal(200);
      expect(res.body.data[0]).to.deep.include({ error: 'environment_exists', environment_id: existing.id });
      expect(Object.keys(res.body.data[0]).sort()).to.deep.equal(['environment_id', 'error', 'message']);
      expect(res.body.data[1].environment).to.be.an('object');
    });

    it('a duplicate end user within one batch: the second item is environment_exists with the first id', async () => {
      const endUser = uid('b-dup');
      const res = await batch({ environments: [{ end_user_id: endUser }, { end_user_id: endUser }] });
      expect(res.status).to.equal(200);
      const first = res.body.data[0].environment;
      expect(first.end_user_id).to.equal(endUser);
      expect(res.body.data[1]).to.deep.include({ error: 'environment_exists', environment_id: first.id });
      expect(await rowsFor(endUser)).to.have.length(1);
    });

    it('item-level conflicts and template errors stay in the item', async () => {
      await api.post('/v1/templates', { name: 'batch-tpl', version: '1' });
      const res = await batch({ environments: [{ end_user_id: uid(), template: 'batch-tpl:1' }, { end_user_id: uid(), template: 'none:1' }, { end_user_id: uid() }] });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.data[0].error).to.equal('template_not_ready');
      expect(res.body.data[1].error).to.equal('invalid_request');
      expect(res.body.data[2].environment).to.be.an('object');
    });

    it('a shape error in any item is 422 and nothing is created', async () => {
      const other = await t.otherDeveloper();
      for (const bad of [
        { end_user_id: 5 },
        { end_user_id: uid(), colour: 'red' },
        {},
        'not-an-object',
        null,
        { end_user_id: uid(), resources: { cpus: '2' } },
      ]) {
        const res = await batch({ environments: [{ end_user_id: uid() }, { end_user_id: uid(), resources: { cpus: 9 } }, bad] }, other);
        expectError(res, 422, 'invalid_body');
      }
      const list = await other.get('/v1/environments');
      expect(list.body).to.deep.equal({ data: [], next: null });
    });

    it('0 items and 201 items are 422; 200 items are fine', async () => {
      const other = await t.otherDeveloper();
      expectError(await batch({ environments: [] }, other), 422, 'invalid_body');
      const items = (n: number) => Array.from({ length: n }, (_, i) => ({ end_user_id: `bulk-${i}` }));
      expectError(await batch({ environments: items(201) }, other), 422, 'invalid_body');
      expect((await other.get('/v1/environments')).body.data).to.have.length(0);
      const ok = await batch({ environments: items(200) }, other);
      expect(ok.status, ok.text.slice(0, 300)).to.equal(200);
      expect(ok.body.data).to.have.length(200);
      ok.body.data.forEach((r: any, i: number) => expect(r.environment.end_user_id).to.equal(`bulk-${i}`));
    });

    it('a body that is not {environments: [...]} is 422', async () => {
      for (const body of [{}, { environments: 'x' }, { environments: { end_user_id: 'a' } }, { environments: [{ end_user_id: uid() }], dry_run: true }, [], null]) {
        expectError(await batch(body), 422, 'invalid_body');
      }
    });

    it('415 without a JSON content type, 400 for malformed JSON', async () => {
      const auth = { authorization: `Bearer ${api.key}` };
      const body = JSON.stringify({ environments: [{ end_user_id: uid() }] });
      expectError(await t.raw('POST', '/v1/environments/batch', { body, headers: auth }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', '/v1/environments/batch', { headers: auth }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', '/v1/environments/batch', { body: '{"environments": [', headers: { ...auth, 'content-type': 'application/json' } }), 400, 'invalid_request');
    });
  });
});
