import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { createAgentService, type AgentService } from '../../environments/agent.service.js';
import { silentLogger } from '../../lib/log.js';
import { runtimeUnavailable, sh, waitState } from '../helpers/runtime.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 24, item 5: "min_interval_secs holds per expression only. 15 offset crons plus 5
 * one-offs were all accepted and fire every minute." Now the agent's whole set is checked:
 * a schedule that would run closer than min_interval_secs to any run of another is refused
 * 400 `interval_too_short`, naming that schedule. The agent service is called as the control
 * socket calls it, on the test clock; one refusal also comes through the real socket.
 */
describe('schedules: min_interval_secs between any two runs of the agent\'s whole set', function () {
  this.timeout(60_000);
  let t: TestService;
  let agent: AgentService;
  let n = 0;

  before(async () => {
    t = await startTestService(runtimeUnavailable() ? {} : { GATEWAY_RUNTIME: 'process' });
    agent = createAgentService({ db: t.svc.db, clock: t.svc.clock, log: silentLogger });
  });
  after(async () => {
    await t.close();
  });

  const newEnv = async (): Promise<any> => (await t.api.post('/v1/environments', { end_user_id: `union-${++n}`, resources: { cpus: 1, memory_mib: 512 } })).body;
  const events = async (id: string, kind: string) => (await t.api.get(`/v1/environments/${id}/events?kind=${kind}&limit=200`)).body.data;

  it('15 hourly crons 4 minutes apart and 5 one-offs: only those 15 minutes from every other stay; each refusal names the schedule it collides with', async () => {
    const e = await newEnv();
    const refused: Array<[string, string]> = [];
    for (let i = 0; i < 15; i++) {
      const r = await agent.setSchedule(e.id, `m${i * 4}`, { cron: `${i * 4} * * * *`, tz: 'UTC' });
      if (r.status === 201) continue;
      expect(r.status).to.equal(400);
      expect((r.body as any).error).to.equal('interval_too_short');
      refused.push([`m${i * 4}`, /schedule "([^"]+)"/.exec((r.body as any).message)![1]!]);
    }
    const hour = Math.ceil(t.svc.clock.nowMs() / 3_600_000) * 3_600_000;
    for (let i = 0; i < 5; i++) {
      const r = await agent.setSchedule(e.id, `o${i}`, { at: new Date(hour + i * 3_600_000 + 120_000).toISOString() });
      expect(r.status).to.equal(400);
      expect((r.body as any).message).to.include('schedule "m0"');
      refused.push([`o${i}`, 'm0']);
    }
    const kept = (await t.svc.db('schedules').where({ environment_id: e.id }).orderBy('schedule_key')).map((s: any) => s.schedule_key);
    expect(kept).to.deep.equal(['m0', 'm16', 'm32']);
    // Named: the kept schedule it runs closest to first (m8 is 8 minutes from m0 and from m16).
    expect(refused).to.deep.include.members([['m4', 'm0'], ['m20', 'm16'], ['m36', 'm32'], ['m48', 'm0'], ['m56', 'm0']]);
    expect(refused.every(([, other]) => ['m0', 'm16', 'm32'].includes(other))).to.equal(true);
    expect(refused).to.have.length(17);
    const rejected = await events(e.id, 'agent_request_rejected');
    expect(rejected).to.have.length(17);
    expect(rejected.every((x: any) => x.data.reason === 'interval_too_short' && typeof x.data.with === 'string')).to.equal(true);
    // What fires: no two runs closer than 900 s over the next three hours.
    const end = t.svc.clock.nowMs() + 3 * 3_600_000;
    for (;;) {
      const next = await t.svc.db('schedules').where({ environment_id: e.id }).min({ m: 'next_run_at' }).first();
      if (Number(next!.m) > end) break;
      await t.advance((Number(next!.m) - t.svc.clock.nowMs()) / 1000 + 1);
      await agent.fireDue();
    }
    const fired = (await events(e.id, 'schedule_fired')).map((x: any) => Date.parse(x.data.scheduled_for)).sort((a: number, b: number) => a - b);
    expect(fired.length).to.be.at.least(8);
    for (let i = 1; i < fired.length; i++) expect(fired[i] - fired[i - 1]).to.be.at.least(900_000);
  });

  it('replacing a key is checked without its old self; the developer\'s schedules are not the agent\'s set', async () => {
    const e = await newEnv();
    expect((await agent.setSchedule(e.id, 'a', { cron: '0 * * * *' })).status).to.equal(201);
    expect((await agent.setSchedule(e.id, 'a', { cron: '5 * * * *' })).status).to.equal(200);
    expect((await agent.setSchedule(e.id, 'b', { cron: '10 * * * *' })).status).to.equal(400);
    // A schedule of the developer's every 5 minutes binds nothing of the agent's (and is never named to it).
    const now = t.svc.clock.nowMs();
    const row = await t.svc.db('environments').where({ id: e.id }).first();
    await t.svc.db('schedules').insert({
      id: `sch_dev${n}`, environment_id: e.id, developer_id: row.developer_id, schedule_key: 'dev', cron: '*/5 * * * *', tz: 'UTC', at: null,
      source: 'api', next_run_at: now + 300_000, command: null, created_at: now, updated_at: now, last_fired_at: null,
    });
    expect((await agent.setSchedule(e.id, 'b', { cron: '35 * * * *' })).status).to.equal(201);
  });

  it('through the control socket from inside an environment: 400 interval_too_short naming the colliding schedule', async function () {
    skipOrFailInCI(this, runtimeUnavailable());
    const e = await waitState(t.api, (await newEnv()).id, 'running');
    const put = async (key: string, body: unknown) => {
      const r = await sh(t.api, e.id, `curl -sS -X PUT -H 'content-type: application/json' --data-binary @- --unix-socket /run/service/control.sock http://control/schedules/${key}`, { stdin: JSON.stringify(body) });
      return JSON.parse(r.stdout);
    };
    expect(await put('hourly', { cron: '0 * * * *' })).to.include({ key: 'hourly' });
    const refused = await put('offset', { cron: '4 * * * *' });
    expect(refused.error).to.equal('interval_too_short');
    expect(refused.message).to.include('schedule "hourly"');
  });
});
