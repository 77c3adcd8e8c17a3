import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { pollUntil, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * The idle ladder on running sandboxes and the test clock (issue 13, item 1): six hours of
 * idleness suspend, a week from the last activity powers off (only from suspended), a step
 * of 0 is off, keep-awake holds the ladder, exec and CPU use are activity. Every wait is an
 * advance of the injected clock; the answer to an advance already shows the new states.
 */
describe('idle ladder (process sandbox, test clock)', function () {
  this.timeout(60_000);
  let t: TestService;
  let n = 0;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
  });
  after(async () => {
    await t?.close();
  });

  async function create(idle: Record<string, number> = {}): Promise<any> {
    const r = await t.api.post('/v1/environments', { end_user_id: `idle-${++n}`, resources: { cpus: 1, memory_mib: 512 }, idle });
    expect(r.status).to.equal(201);
    return waitState(t.api, r.body.id, 'running');
  }
  const get = async (id: string) => (await t.api.get(`/v1/environments/${id}`)).body;
  const kinds = async (id: string) => (await t.api.get(`/v1/environments/${id}/events`)).body.data.map((e: any) => `${e.kind}:${e.source}`);

  it('six hours idle → suspended (idle_suspended); a week from the last activity → stopped (idle_stopped); the record shows the next step', async () => {
    const e = await create();
    const last = Date.parse(e.last_active_at);
    expect(e.idle).to.include({ next_step: 'suspend' });
    expect(Date.parse(e.idle.next_step_at)).to.equal(last + 21_600_000);
    await t.advance(21_600 - 60);
    expect((await get(e.id)).state).to.equal('running');
    await t.advance(61);
    const s = await get(e.id);
    expect(s).to.include({ desired_state: 'suspended', state: 'suspended' });
    expect(s.idle).to.include({ next_step: 'stop' });
    expect(Date.parse(s.idle.next_step_at)).to.equal(last + 604_800_000);
    expect(await kinds(e.id)).to.include.members(['idle_suspended:system', 'suspended:host']);
    await t.advance(604_800 - 21_600 - 100);
    expect((await get(e.id)).state).to.equal('suspended');
    await t.advance(100);
    const stopped = await get(e.id);
    expect(stopped).to.include({ desired_state: 'stopped', state: 'stopped' });
    expect(stopped.idle).to.include({ next_step: null, next_step_at: null });
    expect(await kinds(e.id)).to.include.members(['idle_stopped:system', 'stopped:host']);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('a step of 0 is off; stop happens only from suspended', async () => {
    const e = await create({ suspend_after_secs: 0, stop_after_secs: 60 });
    expect(e.idle).to.include({ next_step: null });
    await t.advance(30 * 86_400);
    expect(await get(e.id)).to.include({ state: 'running', desired_state: 'running' });
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('keep-awake holds the ladder until keep_awake_until, then it steps', async () => {
    const e = await create({ suspend_after_secs: 60 });
    const k = await t.api.post(`/v1/environments/${e.id}/keep-awake`, { seconds: 3600 });
    expect(k.status).to.equal(200);
    expect(k.body.idle).to.include({ next_step: 'suspend', next_step_at: k.body.idle.keep_awake_until });
    await t.advance(3500);
    expect((await get(e.id)).state).to.equal('running');
    await t.advance(101);
    expect((await get(e.id)).state).to.equal('suspended');
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('exec is activity: the clock restarts from it', async () => {
    const e = await create({ suspend_after_secs: 3600 });
    await t.advance(3000);
    await sh(t.api, e.id, 'true');
    await t.advance(3000);
    expect((await get(e.id)).state).to.equal('running');
    await t.advance(700);
    expect((await get(e.id)).state).to.equal('suspended');
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('a VM using CPU is active (not suspended); a sleeping one is idle', async () => {
    const busy = await create({ suspend_after_secs: 600 });
    const idle = await create({ suspend_after_secs: 600 });
    await sh(t.api, busy.id, "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &");
    await sh(t.api, idle.id, 'nohup sleep 100000 >/dev/null 2>&1 &');
    const idleAt = Date.parse((await get(idle.id)).last_active_at);
    // The event waited on: the host's CPU sampler (every 5 s, over spans of at least 2 s)
    // has judged the busy one active, which moves its last_active_at; 3 s past the idle
    // one's last exec, so the two ladders' steps are 3 s apart.
    const b = await pollUntil(() => get(busy.id), (e) => Date.parse(e.last_active_at) - idleAt >= 3000, 30_000, 100);
    expect(Date.parse(b.last_active_at) - idleAt, 'the busy environment was never seen using CPU').to.be.at.least(3000);
    // Service time to just past the idle one's step (600 s after its last exec): the busy
    // one's step is still ahead, whatever the sampler of the advance itself decides.
    await t.advance(Math.ceil((idleAt + 600_000 - t.svc.clock.nowMs()) / 1000) + 1);
    expect((await get(busy.id)).state).to.equal('running');
    expect((await get(idle.id)).state).to.equal('suspended');
    await t.api.delete(`/v1/environments/${busy.id}`);
    await t.api.delete(`/v1/environments/${idle.id}`);
  });
});
