import { expect } from 'chai';
import { Cron } from 'croner';
import { cronTimes } from '../../../environments/cron-times.js';

/**
 * cron-times.ts must give exactly croner's fire times (the scheduler fires by croner): a
 * year of each expression from a fixed start, with jumps to odd instants, across the
 * daylight-saving changes of zones that have them (an hour, half an hour, southern
 * hemisphere), in zones without, and with croner's extensions (L, #).
 */
describe('cron fire times without croner\'s per-call zone cost (cron-times.ts)', () => {
  const cases: Array<[string, string]> = [
    ['30 2 * * *', 'Europe/Berlin'], // a time the spring change skips, and one the autumn change repeats
    ['0 9 * * *', 'Europe/Berlin'],
    ['*/15 * * * *', 'America/New_York'],
    ['30 1 * * *', 'America/New_York'],
    ['0,30 * * * *', 'Australia/Lord_Howe'], // a half-hour change
    ['15 2 * * 0', 'Europe/London'],
    ['0 0 1 * *', 'Asia/Kolkata'],
    ['45 23 * * *', 'Asia/Tokyo'],
    ['0 3 L * *', 'UTC'],
    ['0 12 * * 1#2', 'America/Sao_Paulo'],
    ['7 */2 * * *', 'UTC'],
    ['*/7 1-3 * * *', 'Europe/Berlin'],
    ['59 23 31 12 *', 'Pacific/Auckland'],
  ];

  /** The instants (to the hour) in 2026 where the zone's offset changes. */
  function changes(tz: string): number[] {
    const f = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' });
    const off = (t: number) => f.formatToParts(new Date(t)).find((p) => p.type === 'timeZoneName')!.value;
    const out: number[] = [];
    const start = Date.parse('2026-01-01T00:00:00Z');
    for (let t = start; t < start + 366 * 86_400_000; t += 3_600_000) if (off(t) !== off(t + 3_600_000)) out.push(t);
    return out;
  }

  for (const [expr, tz] of cases) {
    it(`${expr} in ${tz}: the same fire times as croner`, () => {
      const ref = new Cron(expr, { timezone: tz, paused: true, mode: '5-part' } as never);
      const fast = cronTimes(expr, tz);
      // From new year, and from 6 hours before each change of the zone's offset.
      const starts = [Date.parse('2026-01-01T00:00:00Z') + 12_345, ...changes(tz).map((c) => c - 6 * 3_600_000 + 777)];
      for (const start of starts) {
        let at = start;
        for (let i = 0; at < start + 40 * 86_400_000 && i < 120; i++) {
          const want = ref.nextRun(new Date(at))?.getTime() ?? null;
          expect(fast.next(at), `after ${new Date(at).toISOString()}`).to.equal(want);
          if (want === null) break;
          // Every seventh step starts from an odd instant instead of the fire time.
          at = i % 7 === 0 ? want + ((i * 7_919_993) % 5_000_000) : want;
        }
      }
    });
  }

  it('is much cheaper than croner in a zone (printed, not asserted)', () => {
    const ref = new Cron('*/15 * * * *', { timezone: 'Europe/Berlin', paused: true, mode: '5-part' } as never);
    const fast = cronTimes('*/15 * * * *', 'Europe/Berlin');
    const time = (next: (t: number) => number | null): number => {
      let t = Date.parse('2026-03-01T00:00:00Z');
      const t0 = performance.now();
      for (let i = 0; i < 300; i++) t = next(t)!;
      return ((performance.now() - t0) * 1000) / 300;
    };
    const slow = time((t) => ref.nextRun(new Date(t))?.getTime() ?? null);
    const quick = time((t) => fast.next(t));
    console.log(`      croner with a zone: ${slow.toFixed(0)} µs a fire time; cron-times: ${quick.toFixed(0)} µs`);
  });
});
