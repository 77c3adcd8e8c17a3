/**
 * Wakeups, schedules and environment events (service.md: Wakeup, Schedule, Environment
 * event, Limits; decisions.md). Time only moves through the test clock.
 */
import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { TIMESTAMP, WAKEUP_ID, createEnv, expectError, expectNotFound, walk } from './environments.fixtures.js';

const MIN = 60_000;
const DAY = 86_400_000;

describe('environments: wakeups, schedules, events', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  /** The service's current time (the test clock may be ahead of the wall clock). */
  async function now(): Promise<number> {
    const r = await api.post('/v1/test-clock/advance', { seconds: 0 });
    expect(r.status).to.equal(200);
    return Date.parse(r.body.now);
  }
  const isoAt = (ms: number) => new Date(ms).toISOString();
  const createWakeup = (id: string, body: unknown) => api.post(`/v1/environments/${id}/wakeups`, body);
  const pending = async (id: string): Promise<any[]> => {
    const r = await api.get(`/v1/environments/${id}/wakeups?limit=200`);
    expect(r.status).to.equal(200);
    return r.body.data;
  };
  const auth = () => ({ authorization: `Bearer ${api.key}` });

  describe('create wakeup', () => {
    it('201 with {id: wak_..., at, reason}', async () => {
      const e = await createEnv(api);
      const at = isoAt((await now()) + 3_600_000);
      const r = await createWakeup(e.id, { at, reason: 'morning digest' });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.id).to.match(WAKEUP_ID);
      expect(r.body.at).to.equal(at);
      expect(r.body.reason).to.equal('morning digest');
      const listed = await pending(e.id);
      expect(listed).to.have.length(1);
      expect(listed[0]).to.deep.equal(r.body);
      expect((await api.get(`/v1/environments/${e.id}/events?kind=wakeup_created`)).body.data).to.have.length(1);
    });

    it('reason is optional; an offset time is normalized to UTC', async () => {
      const e = await createEnv(api);
      const base = (await now()) + 2 * 3_600_000;
      const whole = base - (base % 1000);
      const plus2 = new Date(whole + 2 * 3_600_000).toISOString().replace('Z', '').replace(/\.\d{3}$/, '') + '+02:00';
      const r = await createWakeup(e.id, { at: plus2 });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.at).to.equal(isoAt(whole));
      expect(r.body.at).to.match(TIMESTAMP);
      expect(r.body.reason).to.equal(null);
      const n = await createWakeup(e.id, { at: isoAt(base), reason: null });
      expect(n.status).to.equal(201);
    });

    it('accepts one minute ago and 366 days ahead; rejects two minutes ago and 367 days ahead', async () => {
      const e = await createEnv(api);
      const n = await now();
      const oneMinAgo = await createWakeup(e.id, { at: isoAt(n - MIN) });
      expect(oneMinAgo.status, oneMinAgo.text).to.equal(201);
      const ahead = await createWakeup(e.id, { at: isoAt(n + 366 * DAY) });
      expect(ahead.status, ahead.text).to.equal(201);
      expectError(await createWakeup(e.id, { at: isoAt(n - 2 * MIN) }), 400, 'invalid_request');
      expectError(await createWakeup(e.id, { at: isoAt(n - MIN - 5000) }), 400, 'invalid_request');
      expectError(await createWakeup(e.id, { at: isoAt(n + 367 * DAY) }), 400, 'invalid_request');
      expectError(await createWakeup(e.id, { at: isoAt(n + 366 * DAY + 60_000) }), 400, 'invalid_request');
    });

    it('a wakeup already due fires at once: a suspended environment is running again', async () => {
      const e = await createEnv(api);
      await api.post(`/v1/environments/${e.id}/suspend`);
      const r = await createWakeup(e.id, { at: isoAt((await now()) - 30_000), reason: 'catch up' });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.id).to.match(WAKEUP_ID);
      const env = (await api.get(`/v1/environments/${e.id}`)).body;
      expect(env.desired_state).to.equal('running');
      expect(await pending(e.id)).to.have.length(0);
      expect((await api.get(`/v1/environments/${e.id}/events?kind=wakeup_fired`)).body.data).to.have.length(1);
      expectNotFound(await api.delete(`/v1/environments/${e.id}/wakeups/${r.body.id}`));
    });

    it('garbage times are 400 invalid_request', async () => {
      const e = await createEnv(api);
      for (const at of ['tomorrow', '', '2030-01-01', '2030-01-01T10:00:00', '2030-13-01T10:00:00Z', '2030-01-01T25:00:00Z', '1700000000', 'NaN']) {
        expectError(await createWakeup(e.id, { at }), 400, 'invalid_request');
      }
    });

    it('wrong types, a missing at and unknown fields are 422 invalid_body', async () => {
      const e = await createEnv(api);
      const at = isoAt((await now()) + 3_600_000);
      for (const body of [{ at: 1_900_000_000 }, { at: null }, {}, { reason: 'x' }, { at, reason: 5 }, { at, cron: '* * * * *' }, [], null]) {
        expectError(await createWakeup(e.id, body), 422, 'invalid_body');
      }
      expect(await pending(e.id)).to.have.length(0);
    });

    it('415 without a JSON content type; 400 for malformed JSON', async () => {
      const e = await createEnv(api);
      const body = JSON.stringify({ at: isoAt((await now()) + 3_600_000) });
      expectError(await t.raw('POST', `/v1/environments/${e.id}/wakeups`, { body, headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', `/v1/environments/${e.id}/wakeups`, { headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', `/v1/environments/${e.id}/wakeups`, { body: '{"at":', headers: { ...auth(), 'content-type': 'application/json' } }), 400, 'invalid_request');
    });

    it('the 101st pending wakeup is 429 wakeup_limit_reached; cancelling one frees a slot', async () => {
      const e = await createEnv(api);
      const base = (await now()) + 3_600_000;
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) {
        const r = await createWakeup(e.id, { at: isoAt(base + i * 1000) });
        expect(r.status, r.text).to.equal(201);
        ids.push(r.body.id);
      }
      expectError(await createWakeup(e.id, { at: isoAt(base + 500_000) }), 429, 'wakeup_limit_reached');
      // The list pages through all 100, ascending by at.
      const { items } = await walk(api, `/v1/environments/${e.id}/wakeups`, 30);
      expect(items.map((w) => w.id)).to.deep.equal(ids);
      const dflt = await api.get(`/v1/environments/${e.id}/wakeups`);
      expect(dflt.body.data).to.have.length(50);
      expect(dflt.body.next).to.equal(dflt.body.data[49].id);

      expect((await api.delete(`/v1/environments/${e.id}/wakeups/${ids[0]}`)).status).to.equal(204);
      expect((await createWakeup(e.id, { at: isoAt(base + 500_000) })).status).to.equal(201);
      expectError(await createWakeup(e.id, { at: isoAt(base + 600_000) }), 429, 'wakeup_limit_reached');
    });

    it('on a destroyed environment: 409 environment_destroyed', async () => {
      const e = await createEnv(api);
      await api.delete(`/v1/environments/${e.id}`);
      expectError(await createWakeup(e.id, { at: isoAt((await now()) + 3_600_000) }), 409, 'environment_destroyed');
    });
  });

  describe('list and cancel wakeups', () => {
    it('lists only pending wakeups, ascending by at', async () => {
      const e = await createEnv(api);
      const n = await now();
      const late = await createWakeup(e.id, { at: isoAt(n + 3 * 3_600_000), reason: 'late' });
      const early = await createWakeup(e.id, { at: isoAt(n + 3_600_000), reason: 'early' });
      const mid = await createWakeup(e.id, { at: isoAt(n + 2 * 3_600_000), reason: 'mid' });
      expect((await pending(e.id)).map((w) => w.reason)).to.deep.equal(['early', 'mid', 'late']);
      await api.delete(`/v1/environments/${e.id}/wakeups/${mid.body.id}`);
      expect((await pending(e.id)).map((w) => w.id)).to.deep.equal([early.body.id, late.body.id]);
      const page = await api.get(`/v1/environments/${e.id}/wakeups`);
      expect(Object.keys(page.body).sort()).to.deep.equal(['data', 'next']);
      expect(page.body.next).to.equal(null);
    });

    it('an empty list is {data: [], next: null}', async () => {
      const e = await createEnv(api);
      const r = await api.get(`/v1/environments/${e.id}/wakeups`);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ data: [], next: null });
    });

    it('cancel: 204 with no body, then 404; records wakeup_cancelled', async () => {
      const e = await createEnv(api);
      const w = await createWakeup(e.id, { at: isoAt((await now()) + 3_600_000) });
      const c = await api.delete(`/v1/environments/${e.id}/wakeups/${w.body.id}`);
      expect(c.status).to.equal(204);
      expect(c.text).to.equal('');
      expectNotFound(await api.delete(`/v1/environments/${e.id}/wakeups/${w.body.id}`));
      expect(await pending(e.id)).to.have.length(0);
      expect((await api.get(`/v1/environments/${e.id}/events?kind=wakeup_cancelled`)).body.data).to.have.length(1);
    });

    it('cancel: 404 for an unknown id or a wakeup of another environment', async () => {
      const a = await createEnv(api);
      const b = await createEnv(api);
      const w = await createWakeup(a.id, { at: isoAt((await now()) + 3_600_000) });
      expectNotFound(await api.delete(`/v1/environments/${a.id}/wakeups/wak_000000000000000000000000`));
      expectNotFound(await api.delete(`/v1/environments/${b.id}/wakeups/${w.body.id}`));
      expect(await pending(a.id)).to.have.length(1);
    });

    it('destroy cancels pending wakeups', async () => {
      const e = await createEnv(api);
      const w = await createWakeup(e.id, { at: isoAt((await now()) + 3_600_000) });
      await api.delete(`/v1/environments/${e.id}`);
      expect(await pending(e.id)).to.have.length(0);
      expectNotFound(await api.delete(`/v1/environments/${e.id}/wakeups/${w.body.id}`));
    });
  });

  describe('firing', () => {
    it('a wakeup 1 hour ahead on a suspended environment fires when the clock passes it', async () => {
      const e = await createEnv(api);
      expect((await api.post(`/v1/environments/${e.id}/suspend`)).body.desired_state).to.equal('suspended');
      const w = await createWakeup(e.id, { at: isoAt((await now()) + 3_600_000), reason: 'nightly' });
      expect(w.status).to.equal(201);

      await t.advance(3500);
      expect((await pending(e.id)).map((x) => x.id)).to.deep.equal([w.body.id]);
      expect((await api.get(`/v1/environments/${e.id}`)).body.desired_state).to.equal('suspended');

      await t.advance(101);
      expect(await pending(e.id)).to.have.length(0);
      const env = (await api.get(`/v1/environments/${e.id}`)).body;
      expect(env.desired_state).to.equal('running');
      // Counted as activity: last_active_at is the firing time.
      expect(Date.parse(env.last_active_at) - Date.parse(e.last_active_at)).to.be.at.least(3_601_000);
      const fired = (await api.get(`/v1/environments/${e.id}/events?kind=wakeup_fired`)).body.data;
      expect(fired).to.have.length(1);
      expect(fired[0].environment_id).to.equal(e.id);
      expectNotFound(await api.delete(`/v1/environments/${e.id}/wakeups/${w.body.id}`));
    });

    it('fires each due wakeup once, earliest first, and leaves later ones pending', async () => {
      const e = await createEnv(api);
      const n = await now();
      const a = await createWakeup(e.id, { at: isoAt(n + 10 * MIN) });
      const b = await createWakeup(e.id, { at: isoAt(n + 20 * MIN) });
      const c = await createWakeup(e.id, { at: isoAt(n + 90 * MIN) });
      await t.advance(30 * 60);
      expect((await pending(e.id)).map((x) => x.id)).to.deep.equal([c.body.id]);
      const fired = (await api.get(`/v1/environments/${e.id}/events?kind=wakeup_fired`)).body.data;
      expect(fired.map((x: any) => x.data?.wakeup_id)).to.deep.equal([a.body.id, b.body.id]);
      await t.advance(30 * 60);
      expect((await api.get(`/v1/environments/${e.id}/events?kind=wakeup_fired`)).body.data).to.have.length(2);
    });
  });

  describe('schedules', () => {
    it('an environment without schedules lists an empty page', async () => {
      const e = await createEnv(api);
      const r = await api.get(`/v1/environments/${e.id}/schedules`);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ data: [], next: null });
    });
    it('cancel of an unknown key is 404 not_found', async () => {
      const e = await createEnv(api);
      expectNotFound(await api.delete(`/v1/environments/${e.id}/schedules/nightly`));
    });
    it('limit=abc is 400', async () => {
      const e = await createEnv(api);
      expectError(await api.get(`/v1/environments/${e.id}/schedules?limit=abc`), 400, 'invalid_request');
    });
  });

  describe('events', () => {
    let env: any;
    let all: any[];

    before(async () => {
      env = await createEnv(api);
      const id = env.id;
      await api.post(`/v1/environments/${id}/suspend`);
      await api.post(`/v1/environments/${id}/resume`);
      await api.post(`/v1/environments/${id}/wake`);
      await api.post(`/v1/environments/${id}/keep-awake`, { seconds: 60 });
      await api.put(`/v1/environments/${id}/config`, { env: { A: '1' } });
      await api.post(`/v1/environments/${id}/suspend`);
      // 7 events in all; another environment's events interleave.
      const other = await createEnv(api);
      await api.post(`/v1/environments/${other.id}/suspend`);
      all = (await api.get(`/v1/environments/${id}/events`)).body.data;
    });

    it('lists events oldest first with integer ids, kind, source', async () => {
      expect(all.map((e) => e.kind)).to.deep.equal(['created', 'desired_suspended', 'desired_running', 'wake', 'keep_awake', 'config_updated', 'desired_suspended']);
      for (let i = 0; i < all.length; i++) {
        expect(Number.isInteger(all[i].id)).to.equal(true);
        if (i > 0) expect(all[i].id).to.be.greaterThan(all[i - 1].id);
        expect(all[i].source).to.equal('api');
        expect(all[i].environment_id).to.equal(env.id);
        expect(all[i].created_at).to.match(TIMESTAMP);
      }
    });

    it('the envelope is {data, next}; next is null when the page is not full', async () => {
      const r = await api.get(`/v1/environments/${env.id}/events`);
      expect(Object.keys(r.body).sort()).to.deep.equal(['data', 'next']);
      expect(r.body.next).to.equal(null);
    });

    it('next is non-null exactly when the page is full; passing it as after walks every event once', async () => {
      const seen: number[] = [];
      let after: number | null = null;
      for (let guard = 0; guard < 20; guard++) {
        const r: any = await api.get(`/v1/environments/${env.id}/events?limit=3${after !== null ? `&after=${after}` : ''}`);
        expect(r.status).to.equal(200);
        seen.push(...r.body.data.map((e: any) => e.id));
        if (r.body.data.length === 3) {
          expect(r.body.next).to.equal(r.body.data[2].id);
          after = r.body.next;
        } else {
          expect(r.body.next).to.equal(null);
          break;
        }
      }
      expect(seen).to.deep.equal(all.map((e) => e.id));
    });

    it('a full last page still has a next, and the page after it is empty with next null', async () => {
      const r = await api.get(`/v1/environments/${env.id}/events?limit=7`);
      expect(r.body.data).to.have.length(7);
      expect(r.body.next).to.equal(all[6].id);
      const after = await api.get(`/v1/environments/${env.id}/events?after=${r.body.next}`);
      expect(after.body).to.deep.equal({ data: [], next: null });
    });

    it('after skips events up to that id', async () => {
      const r = await api.get(`/v1/environments/${env.id}/events?after=${all[2].id}`);
      expect(r.body.data.map((e: any) => e.id)).to.deep.equal(all.slice(3).map((e) => e.id));
      const zero = await api.get(`/v1/environments/${env.id}/events?after=0`);
      expect(zero.body.data).to.have.length(7);
    });

    it('kind filters', async () => {
      const r = await api.get(`/v1/environments/${env.id}/events?kind=desired_suspended`);
      expect(r.body.data.map((e: any) => e.id)).to.deep.equal([all[1].id, all[6].id]);
      const none = await api.get(`/v1/environments/${env.id}/events?kind=bogus`);
      expect(none.body).to.deep.equal({ data: [], next: null });
      const paged = await api.get(`/v1/environments/${env.id}/events?kind=desired_suspended&limit=1&after=${all[1].id}`);
      expect(paged.body.data.map((e: any) => e.id)).to.deep.equal([all[6].id]);
      expect(paged.body.next).to.equal(all[6].id);
    });

    it('limit is clamped: 0 → 1, 500 → 200', async () => {
      const one = await api.get(`/v1/environments/${env.id}/events?limit=0`);
      expect(one.status).to.equal(200);
      expect(one.body.data).to.have.length(1);
      expect(one.body.next).to.equal(all[0].id);
      const big = await api.get(`/v1/environments/${env.id}/events?limit=500`);
      expect(big.body.data).to.have.length(7);
      expect(big.body.next).to.equal(null);
    });

    it('after or limit that is not an integer is 400 invalid_request', async () => {
      for (const q of ['after=abc', 'after=1.5', 'after=1e3', 'after=99999999999999999999', 'limit=abc', 'limit=2.5']) {
        expectError(await api.get(`/v1/environments/${env.id}/events?${q}`), 400, 'invalid_request');
      }
    });

    it('404 for an unknown environment', async () => {
      expectNotFound(await api.get('/v1/environments/env_000000000000000000000000/events'));
    });
  });
});
