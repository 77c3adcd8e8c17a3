/**
 * The service clock. Every domain decision about time (expiry, idle ladder, wakeups,
 * retry schedules) reads this, never Date.now(), so tests move time instead of sleeping.
 *
 * The clock is wall time plus an offset. The offset is always 0 in production; with
 * GATEWAY_TEST_CLOCK=1 the test-clock endpoint advances it. Only forward moves exist:
 * a clock that goes back would let an expired approval become pending again.
 */
export interface Clock {
  /** Milliseconds since the epoch, service time. */
  nowMs(): number;
  now(): Date;
  /** Service time minus wall time, in ms (0 unless a test clock was advanced). */
  offsetMs(): number;
  /**
   * Monotonic milliseconds (performance.now) plus the same offset: what the short-lived
   * caches (proxy credentials, gateway snapshots, policies) measure their age with, so an
   * advanced test clock ages them too instead of a test sleeping past their bound.
   */
  monotonicMs?(): number;
}

type Listener = (offsetMs: number) => void;

export class ServiceClock implements Clock {
  #offset = 0;
  #listeners = new Set<Listener>();

  constructor(private readonly wall: () => number = Date.now) {}

  nowMs(): number {
    return this.wall() + this.#offset;
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  offsetMs(): number {
    return this.#offset;
  }

  monotonicMs(): number {
    return performance.now() + this.#offset;
  }

  /** Moves service time forward. Throws on a negative or non-finite amount. */
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError('the clock only moves forward');
    this.#offset += ms;
    for (const l of this.#listeners) l(this.#offset);
    return this.nowMs();
  }

  /** Called after every advance (the job runner uses it to look for newly due jobs). */
  onAdvance(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** RFC 3339 UTC with milliseconds, the format of every timestamp in API records. */
export function iso(ms: number | null | undefined): string | null {
  return ms == null ? null : new Date(Number(ms)).toISOString();
}
