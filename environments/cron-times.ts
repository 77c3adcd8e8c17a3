import { Cron, CronDate, CronPattern } from 'croner';

/**
 * Fire times of a 5-field cron in an IANA zone, the same as croner's `nextRun` with
 * `{timezone}` but about 25 times cheaper: croner builds a new Intl.DateTimeFormat for every
 * conversion (~0.5 ms a fire time, measured), which made checking an environment's whole set
 * of schedules (schedule-union.ts, issue 24 item 5) cost seconds. Here the pattern is matched
 * on wall-clock time by croner's own CronDate in fixed-offset mode (no Intl at all), and wall time and
 * instants are converted with one cached formatter per zone, by croner's own algorithm
 * (`fromTZ`: an ambiguous wall time, when the clocks go back, is its earlier instant; a
 * skipped one, when they go forward, fires after the gap). test/unit/environments/
 * cron-times.test.ts compares the two over daylight-saving changes in several zones.
 */
export interface CronTimes {
  /** The first fire time strictly after `afterMs` (null: never again). */
  next(afterMs: number): number | null;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    // Throws RangeError for a zone that is not IANA: only valid zones are cached.
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', hour12: false });
    formatters.set(tz, f);
  }
  return f;
}

function wallRaw(ms: number, tz: string): number {
  const p = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatter(tz).formatToParts(new Date(ms))) {
    if (part.type in p) p[part.type as keyof typeof p] = Number(part.value);
  }
  // en-US with hour12: false writes midnight as 24 on some engines (croner does the same).
  if (p.hour === 24) p.hour = 0;
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
}

/**
 * Zone offsets by UTC day (formatToParts costs ~9 µs): a day whose first and last second
 * have the same offset has it throughout (no zone changes its offset and back within one
 * day); a day with a change in it is computed each time. Bounded: cleared past 50,000.
 */
const DAY = 86_400_000;
const offsets = new Map<string, number>();

const floorSec = (ms: number): number => Math.floor(ms / 1000) * 1000;

/** The wall clock of instant `ms` in `tz`, written as UTC milliseconds (whole seconds). */
export function wallOf(ms: number, tz: string): number {
  const q = Math.floor(ms / DAY);
  const key = `${tz} ${q}`;
  const cached = offsets.get(key);
  if (cached !== undefined) return floorSec(ms) + cached;
  const start = q * DAY;
  const end = start + DAY - 1000;
  const a = wallRaw(start, tz) - start;
  if (a !== wallRaw(end, tz) - floorSec(end)) return wallRaw(ms, tz);
  if (offsets.size >= 50_000) offsets.clear();
  offsets.set(key, a);
  return floorSec(ms) + a;
}

/** The instant of wall time `w` (UTC milliseconds) in `tz`: croner's fromTZ, step for step. */
export function instantOf(w: number, tz: string): number {
  const o = w + (w - wallOf(w, tz));
  const h = wallOf(o, tz);
  if (h === w) {
    // Clocks going back: the same wall time an hour earlier is the first of the two.
    const u = o - 3_600_000;
    return wallOf(u, tz) === w ? u : o;
  }
  const l = o + w - h;
  if (wallOf(l, tz) === w) return l;
  return Math.max(o, l);
}

/** What `new Cron(expr, {mode: '5-part'})` matches with (croner's defaults: day of month OR weekday). */
const OPTIONS = new Cron('* * * * *', { paused: true, mode: '5-part' } as never).options;

/**
 * Parsed patterns, by expression, least recently used first out. A `new Cron` costs ~0.1 to
 * 0.6 ms and 160 KB (two patterns, each with a 10,000-entry year table): 1,000 schedules
 * checked per PUT made 80 MB of garbage. A 5-field pattern matches every year
 * (`starYear`), and croner reads the year table only when it does not, so it is dropped:
 * ~2.5 KB a pattern, 10 MB at most.
 */
const MAX_PATTERNS = 4096;
const patterns = new Map<string, CronPattern>();

function patternOf(expr: string): CronPattern {
  let p = patterns.get(expr);
  if (p) {
    patterns.delete(expr);
    patterns.set(expr, p);
    return p;
  }
  p = new CronPattern(expr, undefined, { mode: '5-part', alternativeWeekdays: false, sloppyRanges: false } as never);
  if (p.starYear) p.year = [];
  if (patterns.size >= MAX_PATTERNS) patterns.delete(patterns.keys().next().value!);
  patterns.set(expr, p);
  return p;
}

/** Throws what croner throws for a bad expression or zone (callers validate with cronNext first). */
export function cronTimes(expr: string, tz: string): CronTimes {
  const pattern = patternOf(expr);
  // The wall clock's next match: croner's own search, in its fixed-offset mode at offset 0
  // (no zone, no daylight saving: wall time written as UTC).
  const wallNext = (w: number): number | null => new CronDate(new Date(w), 0).increment(pattern, OPTIONS, true)?.getTime() ?? null;
  if (tz === 'UTC' || tz === 'Etc/UTC') return { next: (after) => wallNext(Math.floor(after / 1000) * 1000) };
  formatter(tz);
  return {
    next(after) {
      const n = wallNext(wallOf(after, tz));
      return n === null ? null : instantOf(n, tz);
    },
  };
}
