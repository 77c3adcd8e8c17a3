import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { createAgentService, type AgentService } from '../../environments/agent.service.js';
import { silentLogger } from '../../lib/log.js';

/**
 * The agent's keep-awake budget over any 24 hours and a cron across midnight, on the
 * injected clock alone (issue 13, item 7): the control socket's service called as the
 * socket would, no sandbox needed.
 */
describe('agent caps on the clock: keep-awake daily budget, a schedule across midnight', function () {
  this.timeout(30_000);
  let t: TestService;
  let agent: AgentService;

  before(async () => {
    t = await startTestService();
    agent = createAgentService({ db: t.svc.db, clock: t.svc.clock, log: silentLogger });
  });
  after(async () => {
    await t.close();
  });

  it('keep_awake_daily_secs counts the seconds granted in the last 24 hours; the window rolls', async () => {
    const e = (await t.api.post('/v1/environments', { end_user_id: 'budget' })).body;
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { keep_awake_max_secs: 3600, keep_awake_daily_secs: 1000 });
    const t0 = performance.now();
    expect((await agent.keepAwake(e.id, { seconds: 600 }, null)).status).to.equal(200);
    const refused = await agent.keepAwake(e.id, { seconds: 401 }, null);
    expect(refused.status).to.equal(429);
    expect((refused.body as any).error).to.equal('keep_awake_budget_exhausted');
    expect((await agent.keepAwake(e.id, { seconds: 400 }, null)).status).to.equal(200);
    await t.advance(86_400 - 10);
    expect((await agent.keepAwake(e.id, { seconds: 1 }, null)).status).to.equal(429);
    await t.advance(11);
    expect((await agent.keepAwake(e.id, { seconds: 600 }, null)).status).to.equal(200);
    expect(performance.now() - t0).to.be.below(1000);
  });

  it('keep-awake looks its caller up only once the body, the caps and the budget passed (issue 24, item 5); an unknown caller is refused', async () => {
    const e = (await t.api.post('/v1/environments', { end_user_id: 'lookup' })).body;
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { keep_awake_max_secs: 600, keep_awake_daily_secs: 1000 });
    let lookups = 0;
    const peer = (p: { pid: number; start: string; unidentified?: string }) => async () => {
      lookups++;
      return p;
    };
    const caller = peer({ pid: 4242, start: '99' });
    expect((await agent.keepAwake(e.id, { seconds: 'x' }, caller)).status).to.equal(400);
    expect((await agent.keepAwake(e.id, { seconds: 601 }, caller)).status).to.equal(400);
    expect((await agent.keepAwake(e.id, { seconds: 600 }, caller)).status).to.equal(200);
    expect(lookups).to.equal(1);
    const over = await agent.keepAwake(e.id, { seconds: 401 }, caller);
    expect([over.status, (over.body as any).error]).to.deep.equal([429, 'keep_awake_budget_exhausted']);
    expect(lookups).to.equal(1);
    const unknown = await agent.keepAwake(e.id, { seconds: 10 }, peer({ pid: 77, start: '', unidentified: 'the calling process has exited' }));
    expect([unknown.status, (unknown.body as any).error]).to.deep.equal([409, 'caller_unknown']);
    const rows = await t.svc.db('keep_awakes').where({ environment_id: e.id });
    expect(rows.map((r: any) => [r.pid, r.pid_start])).to.deep.equal([[4242, '99']]);
    const rejected = (await t.api.get(`/v1/environments/${e.id}/events?kind=agent_request_rejected`)).body.data;
    expect(rejected.map((x: any) => x.data.reason)).to.deep.equal(['invalid_request', 'keep_awake_too_long', 'keep_awake_budget_exhausted', 'caller_unknown']);
  });

  it('a rate-limited episode is one agent_request_rejected {reason: rate_limited}', async () => {
    const e = (await t.api.post('/v1/environments', { end_user_id: 'rated' })).body;
    await agent.rateLimited(e.id);
    const rejected = (await t.api.get(`/v1/environments/${e.id}/events?kind=agent_request_rejected`)).body.data;
    expect(rejected.map((x: any) => [x.source, x.data])).to.deep.equal([['agent', { reason: 'rate_limited' }]]);
  });

  it('a 23:30 Asia/Tokyo schedule fires each day across midnight UTC+9, once per day', async () => {
    const e = (await t.api.post('/v1/environments', { end_user_id: 'midnight' })).body;
    const set = await agent.setSchedule(e.id, 'late', { cron: '30 23 * * *', tz: 'Asia/Tokyo' });
    expect(set.status).to.equal(201);
    const first = Date.parse((set.body as any).next_run_at);
    expect(new Date(first + 9 * 3_600_000).toISOString().slice(11, 16)).to.equal('23:30');
    for (let day = 0; day < 3; day++) {
      await t.advance((first + day * 86_400_000 - t.svc.clock.nowMs()) / 1000 + 1);
      await agent.fireDue();
    }
    const fired = (await t.api.get(`/v1/environments/${e.id}/events?kind=schedule_fired`)).body.data.map((x: any) => Date.parse(x.data.scheduled_for));
    expect(fired).to.deep.equal([first, first + 86_400_000, first + 2 * 86_400_000]);
  });
});
