import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { createWakeupsService } from '../../environments/wakeups.service.js';
import { createAgentService } from '../../environments/agent.service.js';
import { silentLogger } from '../../lib/log.js';

/**
 * Wakeups and schedules fire exactly once with several job workers (issue 13, items 2 and
 * 4): four workers sweep the same due rows at the same moment (on MySQL, on separate
 * connections); every wakeup and every schedule's due time gives one event, never two.
 */
describe('wakeups and schedules: exactly once with several workers', function () {
  this.timeout(60_000);
  let t: TestService;

  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t.close();
  });

  it('20 due wakeups swept by 4 workers at once: each fires once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const e = (await t.api.post('/v1/environments', { end_user_id: `race-w-${i}` })).body;
      ids.push(e.id);
      for (const min of [5, 6]) {
        const r = await t.api.post(`/v1/environments/${e.id}/wakeups`, { at: new Date(t.svc.clock.nowMs() + min * 60_000).toISOString() });
        expect(r.status).to.equal(201);
      }
    }
    t.svc.clock.advance(10 * 60_000);
    const workers = Array.from({ length: 4 }, () => createWakeupsService({ db: t.svc.db, clock: t.svc.clock }));
    const fired = await Promise.all(workers.map((w) => w.fireDue()));
    // The service's own job runner is a fifth worker that may take some: never more than 20 in all.
    expect(fired.reduce((a, b) => a + b, 0)).to.be.at.most(20);
    for (const id of ids) {
      const ev = (await t.api.get(`/v1/environments/${id}/events?kind=wakeup_fired`)).body.data;
      expect(ev, id).to.have.length(2);
      expect(new Set(ev.map((x: any) => x.data.wakeup_id)).size).to.equal(2);
    }
  });

  it('10 due schedules swept by 4 workers at once: each due time fires once', async () => {
    const agents = Array.from({ length: 4 }, () => createAgentService({ db: t.svc.db, clock: t.svc.clock, log: silentLogger }));
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const e = (await t.api.post('/v1/environments', { end_user_id: `race-s-${i}` })).body;
      ids.push(e.id);
      const r = await agents[0]!.setSchedule(e.id, 'hourly', { cron: '0 * * * *', tz: 'UTC' });
      expect(r.status).to.equal(201);
    }
    for (let round = 0; round < 3; round++) {
      t.svc.clock.advance(3_600_000);
      const fired = await Promise.all(agents.map((a) => a.fireDue()));
      expect(fired.reduce((a, b) => a + b, 0), `round ${round}`).to.be.at.most(10);
      await agents[0]!.fireDue(); // whatever the service's own runner has not finished yet
    }
    for (const id of ids) {
      const ev = (await t.api.get(`/v1/environments/${id}/events?kind=schedule_fired`)).body.data;
      expect(ev).to.have.length(3);
      expect(new Set(ev.map((x: any) => x.data.scheduled_for)).size).to.equal(3);
    }
  });
});
