import { expect } from 'chai';
import { unionCollision, type FireSource } from '../../../environments/schedule-union.js';

/**
 * min_interval_secs over the whole set of the agent's schedules (issue 24, item 5):
 * table-driven, on fixed instants; and the work bounded with 1,000 schedules in the set.
 */
describe('schedule union: min_interval_secs between any two runs of the set', () => {
  const now = Date.parse('2027-01-04T10:00:30Z'); // a Monday
  const MIN = 900_000;
  const cron = (key: string, expr: string, tz = 'UTC'): FireSource => ({ key, cron: expr, tz });
  const at = (key: string, iso: string): FireSource => ({ key, at: Date.parse(iso) });

  const cases: Array<{ name: string; others: FireSource[]; add: FireSource; hit: string | null }> = [
    { name: 'offset hourly crons: the second, 4 minutes after the first', others: [cron('c0', '0 * * * *')], add: cron('c4', '4 * * * *'), hit: 'c0' },
    // Named: the closest, whatever order the rows come in (a regression: MySQL returned m16 first and it was named).
    { name: 'a one-off 2 minutes after one cron and 14 before another names the closer, rows in either order', others: [cron('m16', '16 * * * *'), cron('m0', '0 * * * *')], add: at('o', '2027-01-04T11:02:00Z'), hit: 'm0' },
    { name: 'the same, the rows the other way round', others: [cron('m0', '0 * * * *'), cron('m16', '16 * * * *')], add: at('o', '2027-01-04T11:02:00Z'), hit: 'm0' },
    { name: 'a cron near two one-offs names the closer one-off', others: [at('far', '2027-01-04T11:10:00Z'), at('near', '2027-01-04T11:01:00Z')], add: cron('c', '0 * * * *'), hit: 'near' },
    { name: 'offset hourly crons 30 minutes apart keep 15 minutes', others: [cron('c0', '0 * * * *')], add: cron('c30', '30 * * * *'), hit: null },
    { name: 'a cron 15 minutes after another is exactly the minimum: allowed', others: [cron('c0', '0 * * * *')], add: cron('c15', '15 * * * *'), hit: null },
    { name: 'across the hour: 55 past and on the hour are 5 minutes apart', others: [cron('c55', '55 * * * *')], add: cron('c0', '0 * * * *'), hit: 'c55' },
    { name: 'a daily cron against a weekly one on another weekday and hour', others: [cron('mon', '0 3 * * 1')], add: cron('daily', '0 9 * * *'), hit: null },
    { name: 'a daily cron 10 minutes after a weekly one', others: [cron('mon', '0 3 * * 1')], add: cron('daily', '10 3 * * *'), hit: 'mon' },
    { name: 'the same local time in two zones is the same instant', others: [cron('berlin', '0 9 * * *', 'Europe/Berlin')], add: cron('utc', '5 8 * * *'), hit: 'berlin' },
    { name: 'two monthly crons 10 minutes apart, next month', others: [cron('m1', '0 3 1 * *')], add: cron('m2', '10 3 1 * *'), hit: 'm1' },
    { name: 'a one-off 5 minutes after a cron\'s run', others: [cron('hourly', '0 * * * *')], add: at('once', '2027-01-04T12:05:00Z'), hit: 'hourly' },
    { name: 'a one-off between two hourly runs, 30 minutes from each', others: [cron('hourly', '0 * * * *')], add: at('once', '2027-01-04T12:30:00Z'), hit: null },
    { name: 'a one-off 300 days ahead on a monthly cron\'s run', others: [cron('monthly', '0 3 1 * *')], add: at('far', '2027-11-01T03:01:00Z'), hit: 'monthly' },
    { name: 'two one-offs 14 minutes apart', others: [at('a', '2027-02-01T00:00:00Z')], add: at('b', '2027-02-01T00:14:00Z'), hit: 'a' },
    { name: 'a cron against a far one-off it runs 2 minutes before', others: [at('far', '2027-06-15T12:02:00Z')], add: cron('noon', '0 12 * * *'), hit: 'far' },
    { name: 'the key being replaced is not in the set', others: [cron('same', '0 * * * *')], add: cron('same', '5 * * * *'), hit: null },
    { name: 'a cron whose own runs are too close names itself', others: [], add: cron('self', '0,5 * * * *'), hit: 'self' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const hit = unionCollision(c.others, c.add, MIN, now);
      expect(hit?.key ?? null).to.equal(c.hit);
      if (hit) expect(Math.abs(hit.fire - hit.other)).to.be.below(MIN);
    });
  }

  it('two schedules already too close (min_interval_secs raised since) do not refuse a third that keeps its distance', () => {
    const others = [cron('a', '0 * * * *'), cron('b', '5 * * * *')];
    expect(unionCollision(others, cron('c', '30 * * * *'), MIN, now)).to.equal(null);
    expect(unionCollision(others, cron('c', '19 * * * *'), MIN, now)?.key).to.equal('b');
  });

  it('the attack: 15 hourly crons 4 minutes apart and 5 one-offs, added one by one: only those 15 minutes apart stay', () => {
    const set: FireSource[] = [];
    const refused: Array<[string, string]> = [];
    for (let i = 0; i < 15; i++) {
      const s = cron(`m${i * 4}`, `${i * 4} * * * *`);
      const hit = unionCollision(set, s, MIN, now);
      if (hit) refused.push([s.key, hit.key]);
      else set.push(s);
    }
    for (let i = 0; i < 5; i++) {
      const s = at(`o${i}`, new Date(now + (i + 1) * 3_600_000 + 120_000).toISOString());
      const hit = unionCollision(set, s, MIN, now);
      if (hit) refused.push([s.key, hit.key]);
      else set.push(s);
    }
    // Minutes 0, 16 and 32 keep 15 minutes between them; 48 is 12 minutes before the hour.
    expect(set.map((s) => s.key)).to.deep.equal(['m0', 'm16', 'm32']);
    expect(refused).to.deep.include.members([['m4', 'm0'], ['m20', 'm16'], ['m48', 'm0'], ['m56', 'm0'], ['o0', 'm0'], ['o4', 'm0']]);
    expect(refused).to.have.length(17);
  });

  it('bounded work: 1,000 schedules in the set, a new cron and a new one-off checked in well under a second (printed)', () => {
    // 1,000 daily crons, each at its own minute of the day in Europe/Berlin, 1 min apart at
    // min 60 s: a valid set the merge must walk through.
    const others: FireSource[] = [];
    for (let i = 0; i < 1000; i++) others.push(cron(`d${i}`, `${i % 60} ${Math.floor(i / 60)} * * *`, 'Europe/Berlin'));
    let t0 = performance.now();
    expect(unionCollision(others, cron('late', '30 23 * * *', 'Europe/Berlin'), 60_000, now)).to.equal(null);
    const cronMs = performance.now() - t0;
    t0 = performance.now();
    expect(unionCollision(others, at('once', '2027-03-01T22:45:00Z'), 60_000, now)).to.equal(null);
    const atMs = performance.now() - t0;
    console.log(`      1,000 schedules: a new cron ${cronMs.toFixed(0)} ms, a new one-off ${atMs.toFixed(0)} ms`);
    expect(cronMs).to.be.below(2000);
    expect(atMs).to.be.below(2000);
  });
});
