import { cronTimes, type CronTimes } from './cron-times.js';

/**
 * `min_interval_secs` holds between any two runs of the agent's schedules, not only within
 * one expression (issue 24, item 5: fifteen crons offset by four minutes, each hourly, plus
 * one-offs, all accepted, fired every minute). When the agent sets a schedule, its upcoming
 * fire times are checked against those of every other schedule the agent has (the one of
 * the same key excluded: it is being replaced). Pure: the caller reads the rows.
 *
 * - A one-off against anything is exact, whatever the distance: a cron's first fire after
 *   `at - min` is before `at + min` or it never comes that close (one call per schedule).
 * - A cron against the crons: their fire times are merged in time order (a heap) from now,
 *   and the new schedule's fires are compared with their neighbours (the closest fire to any
 *   fire is a neighbour in that order). Bounded: over the next HORIZON_MS (366 days) or the
 *   first MAX_FIRES (1,000) fires of the merged set, whichever ends first. A set that keeps
 *   min_interval_secs has at most horizon / min fires, so 1,000 cover at least 1,000 × min
 *   (10 days at the default 900 s: every daily and weekly pattern repeats within them; 20
 *   daily schedules are checked over 50 days); rarer coincidences (two monthly crons 10
 *   minutes apart, with the set already dense) may pass. ~8 to 25 µs a fire time: ~10 to
 *   25 ms a check at most with 20 schedules, ~90 ms with 1,000 (max_schedules' ceiling;
 *   printed by test/unit/environments/schedule-union.test.ts); the control socket charges a
 *   PUT two tokens.
 * - Collisions between two schedules the agent already has (a developer may have raised
 *   min_interval_secs since) do not refuse a third.
 */
export interface FireSource {
  key: string;
  cron?: string | null;
  tz?: string | null;
  /** A one-off's time (ms). */
  at?: number | null;
}

export interface Collision {
  /** The schedule the new one comes too close to (its own key when it collides with itself). */
  key: string;
  /** The two fire times (ms): the new schedule's, then the other's. */
  fire: number;
  other: number;
}

export const HORIZON_MS = 366 * 86_400_000;
export const MAX_FIRES = 1000;

interface Stream {
  key: string;
  candidate: boolean;
  times: CronTimes;
  t: number;
}

function timesOf(s: FireSource): CronTimes | null {
  try {
    return cronTimes(s.cron!, s.tz ?? 'UTC');
  } catch {
    return null; // a stored expression croner no longer parses fires nothing here either
  }
}

/** A binary min-heap of streams by their next fire time. */
class Heap {
  #a: Stream[] = [];
  get size(): number {
    return this.#a.length;
  }
  push(s: Stream): void {
    const a = this.#a;
    a.push(s);
    for (let i = a.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (a[p]!.t <= a[i]!.t) break;
      [a[p], a[i]] = [a[i]!, a[p]!];
      i = p;
    }
  }
  pop(): Stream | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && a[l]!.t < a[m]!.t) m = l;
        if (r < a.length && a[r]!.t < a[m]!.t) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i]!, a[m]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * The first schedule of `others` the `candidate` fires closer than `minMs` to (or itself),
 * from `now` on; null when none does. `limits` is for tests.
 */
export function unionCollision(others: FireSource[], candidate: FireSource, minMs: number, now: number, limits: { horizonMs?: number; maxFires?: number } = {}): Collision | null {
  const horizon = now + (limits.horizonMs ?? HORIZON_MS);
  const maxFires = limits.maxFires ?? MAX_FIRES;
  const rest = others.filter((o) => o.key !== candidate.key);
  const oneOffs = rest.filter((o) => !o.cron && o.at != null);
  const crons = rest.filter((o) => o.cron);

  // Of several collisions, the closest is named (whatever order the rows came in: SQLite and
  // MySQL return them differently); a tie goes to the smaller key.
  let best: Collision | null = null;
  const consider = (c: Collision): void => {
    const d = Math.abs(c.fire - c.other);
    const bd = best ? Math.abs(best.fire - best.other) : Infinity;
    if (d < bd || (d === bd && best && c.key < best.key)) best = c;
  };
  if (!candidate.cron) {
    const at = candidate.at!;
    for (const o of oneOffs) if (Math.abs(o.at! - at) < minMs) consider({ key: o.key, fire: at, other: o.at! });
    for (const o of crons) {
      const times = timesOf(o);
      // The cron's fires within (at - min, at + min): the closest one to `at`.
      for (let f = times?.next(Math.max(at - minMs, now - 1)) ?? null; f !== null && f < at + minMs; f = times!.next(f)) {
        consider({ key: o.key, fire: at, other: f });
      }
    }
    return best;
  }

  const mine = timesOf(candidate);
  if (!mine) return null;
  for (const o of oneOffs) {
    for (let f = mine.next(Math.max(o.at! - minMs, now - 1)); f !== null && f < o.at! + minMs; f = mine.next(f)) {
      consider({ key: o.key, fire: f, other: o.at! });
    }
  }
  if (best) return best;

  const heap = new Heap();
  const add = (key: string, candidate: boolean, times: CronTimes | null): void => {
    const t = times?.next(now - 1) ?? null;
    if (times && t !== null && t <= horizon) heap.push({ key, candidate, times, t });
  };
  add(candidate.key, true, mine);
  for (const o of crons) add(o.key, false, timesOf(o));
  let prev: { key: string; candidate: boolean; t: number } | null = null;
  for (let fires = 0; heap.size > 0 && fires < maxFires; fires++) {
    const s = heap.pop()!;
    if (prev && (s.candidate || prev.candidate) && s.t - prev.t < minMs) {
      if (s.candidate && prev.candidate) return { key: s.key, fire: s.t, other: prev.t };
      return s.candidate ? { key: prev.key, fire: s.t, other: prev.t } : { key: s.key, fire: prev.t, other: s.t };
    }
    prev = { key: s.key, candidate: s.candidate, t: s.t };
    const n = s.times.next(s.t);
    if (n !== null && n <= horizon) {
      s.t = n;
      heap.push(s);
    }
  }
  return null;
}
