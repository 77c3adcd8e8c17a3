/**
 * How many bytes of request bodies the gateway keeps in memory at once: per environment and
 * in all. The pipeline buffers a body to scan it for placeholders (up to 1 MiB), to decode
 * its facts (up to the hold limit, 10 MiB) and, whole, while it is held for approval. Each
 * read is bounded, but not how many run at once: an agent that keeps a thousand 10 MiB
 * requests waiting for approval asked the service for 10 GB, and its end was every
 * tenant's. With a budget, a body that would go past its environment's share or the
 * gateway's total is read as one too large to buffer (docs/security.md, "Request bodies in
 * memory"): held → 413, scanned or decoded → streamed on unread.
 *
 * Counts only: the bytes are charged as they are read and given back when the exchange
 * ends (answered, refused or cut off).
 */
export class BodyBudget {
  #total = 0;
  readonly #byEnvironment = new Map<string, number>();

  constructor(
    /** Bytes one environment's requests may have buffered at once. */
    readonly perEnvironment: number,
    /** Bytes all requests may have buffered at once. */
    readonly total: number,
  ) {}

  /** Charges `n` bytes to `environmentId`; false, charging nothing, when either limit would be passed. */
  take(environmentId: string, n: number): boolean {
    const mine = this.#byEnvironment.get(environmentId) ?? 0;
    if (mine + n > this.perEnvironment || this.#total + n > this.total) return false;
    this.#byEnvironment.set(environmentId, mine + n);
    this.#total += n;
    return true;
  }

  /** Gives back `n` bytes charged to `environmentId`. */
  give(environmentId: string, n: number): void {
    if (n <= 0) return;
    const left = (this.#byEnvironment.get(environmentId) ?? 0) - n;
    if (left > 0) this.#byEnvironment.set(environmentId, left);
    else this.#byEnvironment.delete(environmentId);
    this.#total = Math.max(0, this.#total - n);
  }

  /** Bytes buffered now, in all and for one environment. */
  used(environmentId?: string): number {
    return environmentId === undefined ? this.#total : this.#byEnvironment.get(environmentId) ?? 0;
  }
}
