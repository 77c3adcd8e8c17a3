/**
 * A token bucket: `burst` tokens, refilled at `perSecond`; a request takes one (or its cost). Pure and
 * in memory, with its clock passed in (milliseconds, monotonic), so tests move time instead
 * of sleeping. Used per environment by the agent's control socket (hosts/control-socket.ts).
 */
export interface BucketRate {
  perSecond: number;
  burst: number;
}

export class TokenBucket {
  #tokens: number;
  #at: number;

  constructor(
    readonly rate: BucketRate,
    now: number,
  ) {
    this.#tokens = rate.burst;
    this.#at = now;
  }

  #refill(now: number): void {
    if (now > this.#at) {
      this.#tokens = Math.min(this.rate.burst, this.#tokens + ((now - this.#at) / 1000) * this.rate.perSecond);
      this.#at = now;
    }
  }

  /** Takes `cost` tokens (at most the burst): 0 when granted, else the milliseconds until they are there. */
  take(now: number, cost = 1): number {
    this.#refill(now);
    const c = Math.min(cost, this.rate.burst);
    if (this.#tokens >= c) {
      this.#tokens -= c;
      return 0;
    }
    return Math.ceil(((c - this.#tokens) / this.rate.perSecond) * 1000);
  }

  /** Whether the bucket is full at `now` (nothing to remember about its owner). */
  full(now: number): boolean {
    this.#refill(now);
    return this.#tokens >= this.rate.burst;
  }
}
