import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/** Usage limits on running seconds (issue 13, item 5), with real sandboxes and the test clock. */
describe('usage limit (process sandbox, test clock)', function () {
  this.timeout(60_000);
  let t: TestService;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
  });
  after(async () => {
    await t?.close();
  });

  it('meters running seconds; past the limit every environment is suspended with limit_exceeded; resume, wake, exec 409 until raised', async () => {
    const u0 = (await t.api.get('/v1/usage')).body;
    expect(u0).to.include({ running_seconds: 0, limit: null, limit_exceeded: false });
    expect(u0.period).to.match(/^\d{4}-\d{2}$/);
    const e = (await t.api.post('/v1/environments', { end_user_id: 'usage-1', resources: { cpus: 1, memory_mib: 512 }, idle: { suspend_after_secs: 0 } })).body;
    await waitState(t.api, e.id, 'running');
    expect((await t.api.put('/v1/usage/limit', { running_seconds: 3600 })).body.limit).to.deep.equal({ running_seconds: 3600 });
    await t.advance(1800);
    const u1 = (await t.api.get('/v1/usage')).body;
    expect(u1.running_seconds).to.be.within(1800, 1805);
    expect((await t.api.get(`/v1/environments/${e.id}`)).body.state).to.equal('running');
    await t.advance(1801);
    const limited = (await t.api.get(`/v1/environments/${e.id}`)).body;
    expect(limited).to.include({ limit_exceeded: true, desired_state: 'suspended', state: 'suspended' });
    expect((await t.api.get('/v1/usage')).body.limit_exceeded).to.equal(true);
    const ev = (await t.api.get(`/v1/environments/${e.id}/events?kind=limit_exceeded`)).body.data;
    expect(ev).to.have.length(1);
    expect(ev[0]).to.include({ source: 'system' });
    for (const r of [
      await t.api.post(`/v1/environments/${e.id}/resume`),
      await t.api.post(`/v1/environments/${e.id}/wake`),
      await t.api.post(`/v1/environments/${e.id}/exec`, { command: ['true'] }),
    ]) {
      expect(r.status).to.equal(409);
      expect(r.body.error).to.equal('limit_exceeded');
    }
    // Suspended time is not running time.
    await t.advance(3600);
    expect((await t.api.get('/v1/usage')).body.running_seconds).to.be.below(3620);
    const raised = await t.api.put('/v1/usage/limit', { running_seconds: 100_000 });
    expect(raised.body.limit_exceeded).to.equal(false);
    expect((await t.api.get(`/v1/environments/${e.id}`)).body).to.include({ limit_exceeded: false, state: 'suspended' });
    expect((await t.api.post(`/v1/environments/${e.id}/resume`)).status).to.equal(200);
    await waitState(t.api, e.id, 'running');
    const cleared = await t.api.delete('/v1/usage/limit');
    expect(cleared.status).to.equal(200);
    expect(cleared.body.limit).to.equal(null);
    expect((await t.api.put('/v1/usage/limit', { running_seconds: -1 })).status).to.equal(400);
    expect((await t.api.put('/v1/usage/limit', {})).status).to.equal(422);
    await t.api.delete(`/v1/environments/${e.id}`);
  });
});

/** Agent versions (issue 13, item 6; service.md, Versioning). */
describe('agent versions: default, upgrade, rollout', function () {
  this.timeout(30_000);
  let t: TestService;

  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t.close();
  });

  it('the default version is what a create without one gets; an upgrade records agent_upgrade', async () => {
    expect((await t.api.get('/v1/agent-version')).body).to.deep.equal({ default_version: null });
    expect((await t.api.put('/v1/agent-version', { default_version: '1.0.0' })).body).to.deep.equal({ default_version: '1.0.0' });
    const e = (await t.api.post('/v1/environments', { end_user_id: 'v-1' })).body;
    expect(e.agent_version).to.equal('1.0.0');
    const up = await t.api.post(`/v1/environments/${e.id}/agent-upgrade`, { version: '1.1.0' });
    expect(up.status).to.equal(200);
    expect(up.body.agent_version).to.equal('1.1.0');
    const ev = (await t.api.get(`/v1/environments/${e.id}/events?kind=agent_upgrade`)).body.data;
    expect(ev.map((x: any) => x.data)).to.deep.equal([{ from: '1.0.0', to: '1.1.0' }]);
    // The same version again changes nothing.
    await t.api.post(`/v1/environments/${e.id}/agent-upgrade`, { version: '1.1.0' });
    expect((await t.api.get(`/v1/environments/${e.id}/events?kind=agent_upgrade`)).body.data).to.have.length(1);
    expect((await t.api.post(`/v1/environments/${e.id}/agent-upgrade`, {})).status).to.equal(422);
    expect((await t.api.post('/v1/environments/env_000000000000000000000000/agent-upgrade', { version: '1' })).status).to.equal(404);
  });

  it('a rollout upgrades every environment not destroyed, then becomes the default; one at a time', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await t.api.post('/v1/environments', { end_user_id: `v-r-${i}`, agent_version: '0.9.0' })).body.id);
    const gone = (await t.api.post('/v1/environments', { end_user_id: 'v-gone', agent_version: '0.9.0' })).body.id;
    await t.api.delete(`/v1/environments/${gone}`);
    const r = await t.api.post('/v1/agent-rollouts', { version: '2.0.0' });
    expect(r.status).to.equal(201);
    let rollout = r.body;
    for (let i = 0; i < 20 && rollout.status !== 'completed'; i++) {
      await t.advance(5);
      rollout = (await t.api.get(`/v1/agent-rollouts/${rollout.id}`)).body;
    }
    expect(rollout).to.include({ status: 'completed', version: '2.0.0', remaining: 0 });
    expect(rollout.upgraded).to.be.at.least(3);
    for (const id of ids) {
      const e = (await t.api.get(`/v1/environments/${id}`)).body;
      expect(e.agent_version).to.equal('2.0.0');
      const ev = (await t.api.get(`/v1/environments/${id}/events?kind=agent_upgrade`)).body.data;
      expect(ev.at(-1).data).to.deep.equal({ from: '0.9.0', to: '2.0.0', rollout_id: rollout.id });
    }
    expect((await t.api.get(`/v1/environments/${gone}`)).body.agent_version).to.equal('0.9.0');
    expect((await t.api.get('/v1/agent-version')).body.default_version).to.equal('2.0.0');
    expect((await t.api.get('/v1/agent-rollouts')).body.data[0].id).to.equal(rollout.id);
    // A running rollout blocks a second one.
    await t.svc.db('agent_rollouts').insert({ id: 'rol_000000000000000000000001', developer_id: 'dev_000000000000000000000001', version: '3.0.0', status: 'running', running_key: 'dev_000000000000000000000001', upgraded: 0, created_at: t.svc.clock.nowMs(), completed_at: null });
    const again = await t.api.post('/v1/agent-rollouts', { version: '3.1.0' });
    expect(again.status).to.equal(409);
    expect(again.body.error).to.equal('rollout_in_progress');
  });
});
