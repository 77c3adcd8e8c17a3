/**
 * GET one / list / destroy, and 404 for another developer's environment on every
 * endpoint (service.md: Endpoints → Environments, Errors; decisions.md Conventions).
 */
import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { createEnv, expectError, expectNotFound, uid, walk } from './environments.fixtures.js';

/** Ascending by created_at, then id. */
function byCreatedThenId(a: any, b: any): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

describe('environments: get, list, destroy', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  describe('list', () => {
    let dev: ApiClient;
    let created: any[];
    let destroyed: string[];

    before(async () => {
      dev = await t.otherDeveloper();
      created = [];
      // Several creates share a millisecond (the id breaks the tie) and the clock moves
      // between groups, so created_at and id orders differ.
      for (let g = 0; g < 3; g++) {
        const group = await Promise.all([0, 1, 2].map(() => createEnv(dev)));
        created.push(...group);
        await t.advance(1);
      }
      destroyed = [created[1].id, created[5].id];
      for (const id of destroyed) expect((await dev.delete(`/v1/environments/${id}`)).status).to.equal(200);
    });

    it('lists every environment of the developer, destroyed included, ascending by created_at then id', async () => {
      const res = await dev.get('/v1/environments');
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['data', 'next']);
      expect(res.body.next).to.equal(null);
      const ids = res.body.data.map((e: any) => e.id);
      expect(ids).to.deep.equal([...created].sort(byCreatedThenId).map((e) => e.id));
      expect(ids).to.have.members(created.map((e) => e.id));
      expect([...res.body.data].sort(byCreatedThenId)).to.deep.equal(res.body.data);
      for (const e of res.body.data) {
        expect(e.desired_state).to.equal(destroyed.includes(e.id) ? 'destroyed' : 'running');
      }
    });

    it('items are full environment records, equal to GET', async () => {
      const res = await dev.get('/v1/environments?limit=1');
      const one = await dev.get(`/v1/environments/${res.body.data[0].id}`);
      expect(res.body.data[0]).to.deep.equal(one.body);
    });

    it('filters by state without validating it: unknown values give an empty list', async () => {
      const pending = await dev.get('/v1/environments?state=pending');
      expect(pending.status).to.equal(200);
      expect(pending.body.data.map((e: any) => e.id)).to.have.members(created.map((e) => e.id).filter((id) => !destroyed.includes(id)));
      const gone = await dev.get('/v1/environments?state=destroyed');
      expect(gone.body.data.map((e: any) => e.id)).to.have.members(destroyed);
      for (const s of ['bogus', 'RUNNING', 'running', '']) {
        const r = await dev.get(`/v1/environments?state=${s}`);
        expect(r.status, s).to.equal(200);
        if (s !== '') expect(r.body, s).to.deep.equal({ data: [], next: null });
      }
    });

    it('clamps limit: 0 and negatives to 1, 500 to 200', async () => {
      for (const l of ['0', '-5', '1']) {
        const r = await dev.get(`/v1/environments?limit=${l}`);
        expect(r.status, l).to.equal(200);
        expect(r.body.data, l).to.have.length(1);
        expect(r.body.next, l).to.equal(r.body.data[0].id);
      }
      const big = await dev.get('/v1/environments?limit=500');
      expect(big.status).to.equal(200);
      expect(big.body.data).to.have.length(created.length);
      expect(big.body.next).to.equal(null);
    });

    it('rejects a limit that is not an integer with 400 invalid_request', async () => {
      for (const l of ['abc', '1.5', '10x', '1e2']) {
        expectError(await dev.get(`/v1/environments?limit=${l}`), 400, 'invalid_request');
      }
    });

    it('after/next walks every item exactly once, in order; next is null on the last page', async () => {
      const all = (await dev.get('/v1/environments')).body.data.map((e: any) => e.id);
      for (const limit of [1, 2, 4, 9, 10]) {
        const { items, pages } = await walk(dev, '/v1/environments', limit);
        expect(items.map((e) => e.id), `limit ${limit}`).to.deep.equal(all);
        expect(pages, `limit ${limit}`).to.equal(Math.max(1, Math.ceil(all.length / limit)));
      }
    });

    it('paging combines with the state filter', async () => {
      const { items } = await walk(dev, '/v1/environments?state=pending', 2);
      expect(items.map((e) => e.id)).to.deep.equal((await dev.get('/v1/environments?state=pending')).body.data.map((e: any) => e.id));
    });

    it("does not list another developer's environments", async () => {
      const mine = (await dev.get('/v1/environments?limit=200')).body.data.map((e: any) => e.id);
      const theirs = await createEnv(api);
      expect(mine).not.to.include(theirs.id);
      expect((await dev.get('/v1/environments?limit=200')).body.data.map((e: any) => e.id)).not.to.include(theirs.id);
    });

    it('clamps 500 to 200 when more than 200 exist', async () => {
      const bulk = await t.otherDeveloper();
      const res = await bulk.post('/v1/environments/batch', { environments: Array.from({ length: 200 }, (_, i) => ({ end_user_id: `u${i}` })) });
      expect(res.status).to.equal(200);
      await createEnv(bulk);
      const first = await bulk.get('/v1/environments?limit=500');
      expect(first.body.data).to.have.length(200);
      expect(first.body.next).to.equal(first.body.data[199].id);
      const rest = await bulk.get(`/v1/environments?limit=500&after=${first.body.next}`);
      expect(rest.body.data).to.have.length(1);
      expect(rest.body.next).to.equal(null);
      const dflt = await bulk.get('/v1/environments');
      expect(dflt.body.data).to.have.length(50);
      expect(dflt.body.next).to.equal(dflt.body.data[49].id);
    });
  });

  describe('get', () => {
    it('returns the environment', async () => {
      const e = await createEnv(api, { agent_version: '2.0.0' });
      const r = await api.get(`/v1/environments/${e.id}`);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal(e);
    });
    it('404 not_found `no such resource` for an unknown id', async () => {
      expectNotFound(await api.get('/v1/environments/env_000000000000000000000000'));
      expectNotFound(await api.get('/v1/environments/not-an-id'));
    });
  });

  describe("another developer's environment is 404 on every endpoint", () => {
    let foreign: any;
    let foreignWakeup: string;
    before(async () => {
      const other = await t.otherDeveloper();
      const r = await other.post('/v1/environments', { end_user_id: uid('foreign') });
      foreign = r.body;
      const now = (await other.post('/v1/test-clock/advance', { seconds: 0 })).body.now;
      const w = await other.post(`/v1/environments/${foreign.id}/wakeups`, { at: new Date(Date.parse(now) + 3_600_000).toISOString() });
      expect(w.status, w.text).to.equal(201);
      foreignWakeup = w.body.id;
    });

    const calls: Array<[string, string, unknown?]> = [
      ['GET', ''],
      ['DELETE', ''],
      ['POST', '/suspend'],
      ['POST', '/resume'],
      ['POST', '/wake'],
      ['POST', '/keep-awake', { seconds: 60 }],
      ['PATCH', '/idle', { suspend_after_secs: 60 }],
      ['PATCH', '/idle', {}],
      ['GET', '/config'],
      ['PUT', '/config', { env: { A: '1' } }],
      ['PUT', '/config', {}],
      ['GET', '/events'],
      ['GET', '/wakeups'],
      ['POST', '/wakeups', { at: new Date(Date.now() + 3_600_000).toISOString() }],
      ['GET', '/schedules'],
      ['DELETE', '/schedules/nightly'],
      ['GET', '/agent-settings'],
      ['PATCH', '/agent-settings', { max_schedules: 3 }],
      ['PATCH', '/agent-settings', {}],
    ];
    for (const [method, suffix, body] of calls) {
      it(`${method} /v1/environments/{id}${suffix}`, async () => {
        expectNotFound(await api.request(method, `/v1/environments/${foreign.id}${suffix}`, body));
      });
    }
    it('DELETE /v1/environments/{id}/wakeups/{wakeup_id}', async () => {
      expectNotFound(await api.delete(`/v1/environments/${foreign.id}/wakeups/${foreignWakeup}`));
    });
    it("none of those calls changed the other developer's environment", async () => {
      const row = await t.svc.db('environments').where({ id: foreign.id }).first();
      expect(row.desired_state).to.equal('running');
      expect(Number(row.suspend_after_secs)).to.equal(21600);
      expect(row.keep_awake_until).to.equal(null);
      expect(await t.svc.db('environment_configs').where({ environment_id: foreign.id })).to.have.length(0);
      expect((await t.svc.db('wakeups').where({ id: foreignWakeup }).first()).status).to.equal('pending');
    });
  });

  describe('unknown routes', () => {
    it('404 `no such route` for an unknown sub-path or an unsupported method', async () => {
      const e = await createEnv(api);
      for (const [m, p] of [['GET', `/v1/environments/${e.id}/nope`], ['PUT', `/v1/environments/${e.id}/suspend`], ['GET', `/v1/environments/${e.id}/suspend`], ['PATCH', `/v1/environments/${e.id}`], ['GET', '/v1/environment']]) {
        const r = await api.request(m!, p!);
        expectError(r, 404, 'not_found');
        expect(r.body.message, `${m} ${p}`).to.equal('no such route');
      }
    });
  });

  describe('destroy', () => {
    it('200 with desired_state destroyed; repeat 200; GET still works; events stay readable', async () => {
      const endUser = uid('destroy');
      const e = await createEnv(api, { end_user_id: endUser, env: { A: '1' } });
      const d = await api.delete(`/v1/environments/${e.id}`);
      expect(d.status, d.text).to.equal(200);
      expect(d.body.id).to.equal(e.id);
      expect(d.body.end_user_id).to.equal(endUser);
      expect(d.body.desired_state).to.equal('destroyed');
      // Never placed on a host (GATEWAY_RUNTIME=none): nothing to delete, destroyed at once.
      expect(d.body.state).to.equal('destroyed');

      const again = await api.delete(`/v1/environments/${e.id}`);
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(d.body);

      const got = await api.get(`/v1/environments/${e.id}`);
      expect(got.status).to.equal(200);
      expect(got.body).to.deep.equal(d.body);

      const events = await api.get(`/v1/environments/${e.id}/events`);
      expect(events.status).to.equal(200);
      const kinds = events.body.data.map((x: any) => x.kind);
      expect(kinds[0]).to.equal('created');
      expect(kinds).to.include('desired_destroyed');
      expect(kinds.filter((k: string) => k === 'desired_destroyed')).to.have.length(1);

      const next = await createEnv(api, { end_user_id: endUser });
      expect(next.id).not.to.equal(e.id);
      expect(next.desired_state).to.equal('running');
      // The old one is still listed and readable.
      const list = (await api.get('/v1/environments?state=destroyed&limit=200')).body.data.map((x: any) => x.id);
      expect(list).to.include(e.id);
    });

    it('destroys a suspended environment too', async () => {
      const e = await createEnv(api);
      await api.post(`/v1/environments/${e.id}/suspend`);
      const d = await api.delete(`/v1/environments/${e.id}`);
      expect(d.status).to.equal(200);
      expect(d.body.desired_state).to.equal('destroyed');
    });

    it('erases the configuration and secrets of a destroyed environment', async () => {
      const e = await createEnv(api, { env: { A: '1' }, secrets: { TOKEN: { value: 'erase-me', allowed_hosts: ['a.com'] } } });
      await api.delete(`/v1/environments/${e.id}`);
      expect(await t.svc.db('secrets').where({ environment_id: e.id })).to.have.length(0);
      expect((await api.get(`/v1/environments/${e.id}/config`)).body).to.deep.equal({ env: {}, files: {} });
    });

    it('404 for an unknown id', async () => {
      expectNotFound(await api.delete('/v1/environments/env_000000000000000000000000'));
    });
  });
});
