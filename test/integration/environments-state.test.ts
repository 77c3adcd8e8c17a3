/**
 * State moves (suspend, resume, wake, keep-awake), idle settings, configuration and
 * agent settings (service.md: Environment state table, Idle settings, Configuration,
 * Agent settings; decisions.md "Environments (operations the spec names without a path)").
 */
import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { TIMESTAMP, createEnv, expectError } from './environments.fixtures.js';

describe('environments: state moves, idle, config, agent settings', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  const move = (id: string, action: string) => api.post(`/v1/environments/${id}/${action}`);
  const kinds = async (id: string): Promise<string[]> => (await api.get(`/v1/environments/${id}/events`)).body.data.map((e: any) => e.kind);
  const destroyedEnv = async () => {
    const e = await createEnv(api);
    expect((await api.delete(`/v1/environments/${e.id}`)).status).to.equal(200);
    return e;
  };
  const auth = () => ({ authorization: `Bearer ${api.key}` });

  describe('suspend', () => {
    it('desired running → suspended, event desired_suspended; state stays as the host reports', async () => {
      const e = await createEnv(api);
      const r = await move(e.id, 'suspend');
      expect(r.status, r.text).to.equal(200);
      expect(r.body.id).to.equal(e.id);
      expect(r.body.desired_state).to.equal('suspended');
      expect(r.body.state).to.equal('pending');
      expect(r.body.last_active_at).to.equal(e.last_active_at);
      expect(await kinds(e.id)).to.deep.equal(['created', 'desired_suspended']);
      expect((await api.get(`/v1/environments/${e.id}`)).body).to.deep.equal(r.body);
    });

    it('suspend on suspended: 200 with the environment unchanged, no new event', async () => {
      const e = await createEnv(api);
      const first = await move(e.id, 'suspend');
      await t.advance(5);
      const again = await move(e.id, 'suspend');
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(first.body);
      expect(await kinds(e.id)).to.deep.equal(['created', 'desired_suspended']);
    });

    it('suspend on destroyed: 409 invalid_state_transition', async () => {
      const e = await destroyedEnv();
      expectError(await move(e.id, 'suspend'), 409, 'invalid_state_transition');
      expect((await api.get(`/v1/environments/${e.id}`)).body.desired_state).to.equal('destroyed');
    });

    it('suspend on desired stopped: 409 invalid_state_transition', async () => {
      // The idle ladder (not an API call) moves desired to stopped.
      const e = await createEnv(api);
      await t.svc.db('environments').where({ id: e.id }).update({ desired_state: 'stopped' });
      expectError(await move(e.id, 'suspend'), 409, 'invalid_state_transition');
      // resume brings it back to running
      const r = await move(e.id, 'resume');
      expect(r.status).to.equal(200);
      expect(r.body.desired_state).to.equal('running');
    });
  });

  describe('resume', () => {
    it('suspended → running, not counted as activity (last_active_at stays)', async () => {
      const e = await createEnv(api);
      await move(e.id, 'suspend');
      await t.advance(120);
      const r = await move(e.id, 'resume');
      expect(r.status, r.text).to.equal(200);
      expect(r.body.desired_state).to.equal('running');
      expect(r.body.last_active_at).to.equal(e.last_active_at);
    });

    it('resume on running: 200 unchanged, no event', async () => {
      const e = await createEnv(api);
      await t.advance(5);
      const r = await move(e.id, 'resume');
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal(e);
      expect(await kinds(e.id)).to.deep.equal(['created']);
    });

    it('resume on destroyed: 409 invalid_state_transition', async () => {
      const e = await destroyedEnv();
      expectError(await move(e.id, 'resume'), 409, 'invalid_state_transition');
    });
  });

  describe('wake', () => {
    it('on running: 200, desired unchanged, only last_active_at moves', async () => {
      const e = await createEnv(api);
      await t.advance(30);
      const r = await move(e.id, 'wake');
      expect(r.status, r.text).to.equal(200);
      expect(r.body.desired_state).to.equal('running');
      expect(r.body.last_active_at).to.match(TIMESTAMP);
      expect(Date.parse(r.body.last_active_at) - Date.parse(e.last_active_at)).to.be.at.least(30_000);
      const { last_active_at: _a, updated_at: _b, ...rest } = r.body;
      const { last_active_at: _c, updated_at: _d, ...before } = e;
      expect(rest).to.deep.equal(before);
    });

    it('on suspended: desired running, counted as activity', async () => {
      const e = await createEnv(api);
      await move(e.id, 'suspend');
      await t.advance(60);
      const r = await move(e.id, 'wake');
      expect(r.status).to.equal(200);
      expect(r.body.desired_state).to.equal('running');
      expect(Date.parse(r.body.last_active_at) - Date.parse(e.last_active_at)).to.be.at.least(60_000);
    });

    it('on stopped: desired running', async () => {
      const e = await createEnv(api);
      await t.svc.db('environments').where({ id: e.id }).update({ desired_state: 'stopped' });
      const r = await move(e.id, 'wake');
      expect(r.body.desired_state).to.equal('running');
    });

    it('on destroyed: 409 invalid_state_transition', async () => {
      const e = await destroyedEnv();
      expectError(await move(e.id, 'wake'), 409, 'invalid_state_transition');
    });
  });

  describe('keep-awake', () => {
    const keepAwake = (id: string, body: unknown) => api.post(`/v1/environments/${id}/keep-awake`, body);

    it('sets idle.keep_awake_until to now + seconds and desired running, counted as activity', async () => {
      const e = await createEnv(api);
      await move(e.id, 'suspend');
      await t.advance(10);
      const r = await keepAwake(e.id, { seconds: 3600 });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.desired_state).to.equal('running');
      expect(r.body.idle.keep_awake_until).to.match(TIMESTAMP);
      expect(Date.parse(r.body.idle.keep_awake_until) - Date.parse(r.body.last_active_at)).to.equal(3_600_000);
      expect(Date.parse(r.body.last_active_at)).to.be.greaterThan(Date.parse(e.last_active_at));
      expect(r.body.idle.suspend_after_secs).to.equal(21600);
      expect(await kinds(e.id)).to.include('keep_awake');
      expect((await api.get(`/v1/environments/${e.id}`)).body).to.deep.equal(r.body);
    });

    it('accepts 1 and 86400 seconds', async () => {
      const e = await createEnv(api);
      const one = await keepAwake(e.id, { seconds: 1 });
      expect(one.status).to.equal(200);
      const max = await keepAwake(e.id, { seconds: 86400 });
      expect(max.status).to.equal(200);
      expect(Date.parse(max.body.idle.keep_awake_until) - Date.parse(max.body.last_active_at)).to.equal(86_400_000);
    });

    it('0, 86401, negative and fractional seconds are 400 invalid_request', async () => {
      const e = await createEnv(api);
      for (const seconds of [0, 86401, -1, 1.5]) expectError(await keepAwake(e.id, { seconds }), 400, 'invalid_request');
      expect((await api.get(`/v1/environments/${e.id}`)).body.idle.keep_awake_until).to.equal(null);
    });

    it('missing, string, null seconds or an unknown field are 422 invalid_body', async () => {
      const e = await createEnv(api);
      for (const body of [{}, { seconds: '60' }, { seconds: null }, { seconds: 60, reason: 'x' }, [], null]) {
        expectError(await keepAwake(e.id, body), 422, 'invalid_body');
      }
    });

    it('415 without a body or a JSON content type; 400 for malformed JSON', async () => {
      const e = await createEnv(api);
      expectError(await t.raw('POST', `/v1/environments/${e.id}/keep-awake`, { headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', `/v1/environments/${e.id}/keep-awake`, { body: '{"seconds":60}', headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', `/v1/environments/${e.id}/keep-awake`, { body: '{"seconds":', headers: { ...auth(), 'content-type': 'application/json' } }), 400, 'invalid_request');
    });

    it('on destroyed: 409 invalid_state_transition', async () => {
      const e = await destroyedEnv();
      expectError(await keepAwake(e.id, { seconds: 60 }), 409, 'invalid_state_transition');
    });
  });

  describe('idle settings (PATCH /idle)', () => {
    const patch = (id: string, body: unknown) => api.patch(`/v1/environments/${id}/idle`, body);

    it('only the fields sent change', async () => {
      const e = await createEnv(api);
      const a = await patch(e.id, { suspend_after_secs: 120 });
      expect(a.status, a.text).to.equal(200);
      expect(a.body.idle).to.deep.equal({ suspend_after_secs: 120, stop_after_secs: 604800, keep_awake_until: null, next_step: null, next_step_at: null });
      const b = await patch(e.id, { stop_after_secs: 0 });
      expect(b.body.idle).to.deep.equal({ suspend_after_secs: 120, stop_after_secs: 0, keep_awake_until: null, next_step: null, next_step_at: null });
      const c = await patch(e.id, { suspend_after_secs: 0, stop_after_secs: 7776000 });
      expect(c.body.idle).to.deep.equal({ suspend_after_secs: 0, stop_after_secs: 7776000, keep_awake_until: null, next_step: null, next_step_at: null });
      expect((await api.get(`/v1/environments/${e.id}`)).body).to.deep.equal(c.body);
      expect(c.body.desired_state).to.equal('running');
      expect(c.body.resources).to.deep.equal(e.resources);
    });

    it('{} returns the environment unchanged', async () => {
      const e = await createEnv(api);
      const r = await patch(e.id, {});
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal(e);
    });

    it('does not touch keep_awake_until or last_active_at', async () => {
      const e = await createEnv(api);
      const k = await api.post(`/v1/environments/${e.id}/keep-awake`, { seconds: 600 });
      await t.advance(5);
      const r = await patch(e.id, { suspend_after_secs: 60 });
      expect(r.body.idle.keep_awake_until).to.equal(k.body.idle.keep_awake_until);
      expect(r.body.last_active_at).to.equal(k.body.last_active_at);
    });

    for (const [field, v] of [['suspend_after_secs', 1], ['suspend_after_secs', 59], ['stop_after_secs', 7776001], ['stop_after_secs', -1], ['suspend_after_secs', 90.5]] as const) {
      it(`${field}: ${v} is 400 invalid_request and changes nothing`, async () => {
        const e = await createEnv(api);
        expectError(await patch(e.id, { [field]: v, stop_after_secs: field === 'stop_after_secs' ? v : 120 }), 400, 'invalid_request');
        expect((await api.get(`/v1/environments/${e.id}`)).body.idle).to.deep.equal(e.idle);
      });
    }

    it('wrong types and unknown fields are 422 (keep_awake_until is not settable here)', async () => {
      const e = await createEnv(api);
      for (const body of [{ suspend_after_secs: '60' }, { stop_after_secs: null }, { keep_awake_until: null }, { idle: { suspend_after_secs: 60 } }, [], null]) {
        expectError(await patch(e.id, body), 422, 'invalid_body');
      }
    });

    it('415 without a JSON content type', async () => {
      const e = await createEnv(api);
      expectError(await t.raw('PATCH', `/v1/environments/${e.id}/idle`, { body: '{"suspend_after_secs":60}', headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('PATCH', `/v1/environments/${e.id}/idle`, { body: '{"suspend_after_secs":', headers: { ...auth(), 'content-type': 'application/json' } }), 400, 'invalid_request');
    });

    it('on destroyed: 409 environment_destroyed', async () => {
      const e = await destroyedEnv();
      expectError(await patch(e.id, { suspend_after_secs: 60 }), 409, 'environment_destroyed');
    });
  });

  describe('configuration', () => {
    const put = (id: string, body: unknown) => api.put(`/v1/environments/${id}/config`, body);
    const get = (id: string) => api.get(`/v1/environments/${id}/config`);

    it('GET is {env: {}, files: {}} when none was set', async () => {
      const e = await createEnv(api);
      const r = await get(e.id);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ env: {}, files: {} });
    });

    it('PUT replaces env and files as a whole; {} clears', async () => {
      const e = await createEnv(api, { env: { OLD: '1' }, files: { 'old.txt': 'old' } });
      const a = await put(e.id, { env: { A: '1', B: '' }, files: { 'a.txt': 'hello', 'b.bin': { content: 'AAE=', encoding: 'base64' } } });
      expect(a.status, a.text).to.equal(200);
      const stored = { env: { A: '1', B: '' }, files: { 'a.txt': { content: 'hello', encoding: 'utf8' }, 'b.bin': { content: 'AAE=', encoding: 'base64' } } };
      expect(a.body).to.deep.equal(stored);
      expect((await get(e.id)).body).to.deep.equal(stored);

      const b = await put(e.id, { env: { C: '3' } });
      expect(b.body).to.deep.equal({ env: { C: '3' }, files: {} });
      expect((await get(e.id)).body).to.deep.equal({ env: { C: '3' }, files: {} });

      const c = await put(e.id, { files: { 'c.txt': 'x' } });
      expect(c.body).to.deep.equal({ env: {}, files: { 'c.txt': { content: 'x', encoding: 'utf8' } } });

      const d = await put(e.id, {});
      expect(d.status).to.equal(200);
      expect(d.body).to.deep.equal({ env: {}, files: {} });
      expect((await get(e.id)).body).to.deep.equal({ env: {}, files: {} });
    });

    it('does not wake the environment and is not activity; records config_updated', async () => {
      const e = await createEnv(api);
      await move(e.id, 'suspend');
      await t.advance(10);
      await put(e.id, { env: { A: '1' } });
      const after = (await api.get(`/v1/environments/${e.id}`)).body;
      expect(after.desired_state).to.equal('suspended');
      expect(after.last_active_at).to.equal(e.last_active_at);
      expect(await kinds(e.id)).to.include('config_updated');
    });

    it('applies the create rules: values 400', async () => {
      const e = await createEnv(api);
      const vars = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, 'x']));
      const files = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, 'x']));
      for (const body of [
        { env: vars(101) },
        { env: { HOME: '/root' } },
        { env: { SERVICE_X: '1' } },
        { env: { HTTPS_PROXY: 'http://evil' } },
        { env: { SSL_CERT_FILE: '/x' } },
        { env: { A: "it's" } },
        { env: { A: 'line\nbreak' } },
        { env: { 'A-B': '1' } },
        { env: { BIG: 'x'.repeat(33 * 1024) } },
        { files: files(21) },
        { files: { 'a/b': 'x' } },
        { files: { '..': 'x' } },
        { files: { big: 'x'.repeat(256 * 1024 + 1) } },
        { files: { 'b.bin': { content: '***', encoding: 'base64' } } },
      ]) {
        expectError(await put(e.id, body), 400, 'invalid_request');
      }
      expect(await put(e.id, { env: vars(100), files: files(20) })).to.have.property('status', 200);
      expect((await get(e.id)).body.env).to.deep.equal(vars(100));
    });

    it('shape errors are 422', async () => {
      const e = await createEnv(api);
      for (const body of [{ env: { A: 1 } }, { env: [] }, { files: { a: 3 } }, { files: { a: { content: 'x', encoding: 'gzip' } } }, { secrets: {} }, { env: null }, [], null]) {
        expectError(await put(e.id, body), 422, 'invalid_body');
      }
      expect((await get(e.id)).body).to.deep.equal({ env: {}, files: {} });
    });

    it('415 without a JSON content type or body; 400 for malformed JSON', async () => {
      const e = await createEnv(api);
      expectError(await t.raw('PUT', `/v1/environments/${e.id}/config`, { body: '{}', headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('PUT', `/v1/environments/${e.id}/config`, { body: '{}', headers: { ...auth(), 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
      expectError(await t.raw('PUT', `/v1/environments/${e.id}/config`, { headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('PUT', `/v1/environments/${e.id}/config`, { body: '{"env":{', headers: { ...auth(), 'content-type': 'application/json' } }), 400, 'invalid_request');
    });

    it('PUT after destroy is 409 environment_destroyed; GET still answers', async () => {
      const e = await createEnv(api, { env: { A: '1' } });
      await api.delete(`/v1/environments/${e.id}`);
      expectError(await put(e.id, { env: { A: '2' } }), 409, 'environment_destroyed');
      expectError(await put(e.id, {}), 409, 'environment_destroyed');
      expect((await get(e.id)).status).to.equal(200);
    });
  });

  describe('agent settings', () => {
    const DEFAULTS = { scheduling: true, max_schedules: 20, min_interval_secs: 900, keep_awake_max_secs: 7200, keep_awake_daily_secs: 21600 };
    const patch = (id: string, body: unknown) => api.patch(`/v1/environments/${id}/agent-settings`, body);

    it('GET returns the defaults', async () => {
      const e = await createEnv(api);
      const r = await api.get(`/v1/environments/${e.id}/agent-settings`);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal(DEFAULTS);
    });

    it('PATCH changes only the fields sent and returns the full set', async () => {
      const e = await createEnv(api);
      const a = await patch(e.id, { max_schedules: 5 });
      expect(a.status, a.text).to.equal(200);
      expect(a.body).to.deep.equal({ ...DEFAULTS, max_schedules: 5 });
      const b = await patch(e.id, { scheduling: false, keep_awake_max_secs: 0 });
      expect(b.body).to.deep.equal({ ...DEFAULTS, max_schedules: 5, scheduling: false, keep_awake_max_secs: 0 });
      expect((await api.get(`/v1/environments/${e.id}/agent-settings`)).body).to.deep.equal(b.body);
      const c = await patch(e.id, { scheduling: true });
      expect(c.body).to.deep.equal({ ...DEFAULTS, max_schedules: 5, keep_awake_max_secs: 0 });
    });

    it('{} returns the current values', async () => {
      const e = await createEnv(api);
      expect((await patch(e.id, {})).body).to.deep.equal(DEFAULTS);
      await patch(e.id, { min_interval_secs: 60 });
      const r = await patch(e.id, {});
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ ...DEFAULTS, min_interval_secs: 60 });
    });

    it('accepts every boundary', async () => {
      const e = await createEnv(api);
      for (const body of [
        { max_schedules: 0 }, { max_schedules: 1000 },
        { min_interval_secs: 60 }, { min_interval_secs: 86400 },
        { keep_awake_max_secs: 0 }, { keep_awake_max_secs: 86400 },
        { keep_awake_daily_secs: 0 }, { keep_awake_daily_secs: 86400 },
      ]) {
        const r = await patch(e.id, body);
        expect(r.status, JSON.stringify(body)).to.equal(200);
        expect(r.body).to.deep.include(body);
      }
    });

    it('out-of-range values are 400 invalid_request and change nothing', async () => {
      const e = await createEnv(api);
      for (const body of [
        { max_schedules: -1 }, { max_schedules: 1001 }, { max_schedules: 2.5 },
        { min_interval_secs: 59 }, { min_interval_secs: 86401 },
        { keep_awake_max_secs: -1 }, { keep_awake_max_secs: 86401 },
        { keep_awake_daily_secs: -1 }, { keep_awake_daily_secs: 86401 },
      ]) {
        expectError(await patch(e.id, body), 400, 'invalid_request');
      }
      expect((await api.get(`/v1/environments/${e.id}/agent-settings`)).body).to.deep.equal(DEFAULTS);
    });

    it('wrong types and unknown fields are 422', async () => {
      const e = await createEnv(api);
      for (const body of [{ scheduling: 'true' }, { scheduling: 1 }, { scheduling: null }, { max_schedules: '5' }, { min_interval_secs: null }, { cron: '* * * * *' }, [], null]) {
        expectError(await patch(e.id, body), 422, 'invalid_body');
      }
    });

    it('415 without a JSON content type; 400 for malformed JSON', async () => {
      const e = await createEnv(api);
      expectError(await t.raw('PATCH', `/v1/environments/${e.id}/agent-settings`, { body: '{}', headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('PATCH', `/v1/environments/${e.id}/agent-settings`, { body: '{', headers: { ...auth(), 'content-type': 'application/json' } }), 400, 'invalid_request');
    });
  });
});
