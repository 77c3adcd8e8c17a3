import type { Logger } from '../lib/log.js';
import type { UnchainedRow } from './entry.js';

/**
 * The proxy's audit writer: group commit with no fixed wait. `commit(row)` resolves once
 * the row is committed (the gateway finishes an answer only then: issue 10, item 3);
 * `enqueue(row)` queues without waiting (tests, benches, and entries of answers that can no
 * longer be held, like a connection the agent already closed).
 *
 * - A commit starts as soon as the first entry arrives on an idle writer (after the current
 *   I/O callbacks: setImmediate, so entries produced by the same event-loop turn share it)
 *   and as soon as the previous commit ends; whatever queued meanwhile goes into it, up to
 *   maxBatch entries, each batch in ONE transaction (one lock of each developer's chain
 *   head, one multi-row insert, one commit). A lone request waits for one commit, never a
 *   timer; under load, batches grow by themselves to what arrived during one commit.
 * - Under load, one more turn of the event loop first: when more than one entry (and fewer
 *   than ONE_MORE_TURN_BELOW) waits as a commit is about to start, the commit waits for the
 *   next turn, so the answers that turn completes share it. On SQLite a commit is
 *   synchronous, nothing queues while it runs, and without this batches stayed at what one
 *   turn produced (5.8 entries at 16 requests in flight on the proxy bench; ~92 µs of
 *   BEGIN/head/COMMIT each): with it ~10, and the proxy's CPU per keep-alive request fell
 *   11–16 % with lower latency (docs/performance.md). A lone entry never waits the turn.
 * - A failed batch stays at the head of the queue, in order, and is retried with
 *   exponential backoff (retryBaseMs .. retryMaxMs) for as long as the store is down; the
 *   waiters of its entries are rejected at once (the gateway then fails closed), the entries
 *   themselves are kept and written when the store is back (what the gateway decided did
 *   happen). Entries keep queueing up to maxQueue; beyond it new entries are refused,
 *   counted (stats().dropped) and logged. Nothing else is ever dropped.
 * - After a failure the commit may have happened anyway (the connection died on the
 *   reply), so the next attempt first asks which of the batch's ids are stored and
 *   drops those: an entry is written at most once.
 * - Logs carry counts and driver error codes only: never an entry, and never a driver
 *   error message (knex inlines the statement's values into it).
 */

export interface BatchWriterOptions {
  maxBatch: number;
  maxQueue: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** A commit() not committed within this long is rejected ('timeout'; the entry stays queued). 0: no limit. */
  commitWaitMs: number;
}

export const BATCH_DEFAULTS: Readonly<BatchWriterOptions> = Object.freeze({
  maxBatch: 200,
  maxQueue: 20_000,
  retryBaseMs: 100,
  retryMaxMs: 5_000,
  commitWaitMs: 5_000,
});

export interface AuditSink {
  /** Appends the rows, chained in the given order, in one transaction: all or nothing. */
  writeBatch(rows: UnchainedRow[]): Promise<void>;
  /** Which of these ids are stored already. */
  existingIds(ids: string[]): Promise<Set<string>>;
}

export interface AuditWriterStats {
  /** Entries waiting to be written. */
  queued: number;
  /** Entries written by this writer since it started. */
  written: number;
  /** Batches it committed (written / commits: the entries a commit carried on average). */
  commits: number;
  /** Entries refused because the queue was full or the writer closed. */
  dropped: number;
  /** Consecutive failed attempts (0 when the last one succeeded). */
  failures: number;
  /** Driver error code of the last failure, if any. */
  last_error: string | null;
}

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

interface Item {
  n: number;
  row: UnchainedRow;
  waiter: Waiter | null;
  /** When the waiter gives up (ms, Date.now()). */
  deadline: number;
}

/** Why a commit() was refused or failed; `code` is the driver's code or the refusal's reason. */
export class AuditNotCommitted extends Error {
  constructor(readonly code: string) {
    super(`audit entry not committed (${code})`);
  }
}

/** A driver error's code, never its message. */
export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; errno?: unknown; name?: unknown };
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.errno === 'number') return `errno_${e.errno}`;
  return typeof e?.name === 'string' ? e.name : 'unknown';
}

const LOG_EVERY_MS = 10_000;

/** A commit about to start with 2..(this - 1) entries waiting waits one more event-loop turn (above). */
export const ONE_MORE_TURN_BELOW = 32;

export class AuditBatchWriter {
  readonly #sink: AuditSink;
  readonly #log: Logger;
  readonly #opts: BatchWriterOptions;
  #queue: Item[] = [];
  #counter = 0;
  #timer: NodeJS.Timeout | null = null;
  #immediate: NodeJS.Immediate | null = null;
  /** The commit about to start already waited its one more turn. */
  #waitedTurn = false;
  /** One timer for every waiter's deadline (not one per commit()). */
  #sweep: NodeJS.Timeout | null = null;
  #inflight: Promise<void> | null = null;
  #failures = 0;
  #uncertain = false;
  #closed = false;
  #written = 0;
  #commits = 0;
  #dropped = 0;
  #lastError: string | null = null;
  #lastFailureLog = 0;
  #lastDropLog = 0;
  #droppedSinceLog = 0;

  constructor(sink: AuditSink, log: Logger, opts: Partial<BatchWriterOptions> = {}) {
    this.#sink = sink;
    this.#log = log;
    this.#opts = { ...BATCH_DEFAULTS, ...opts };
  }

  /** Queues a row; false when it was dropped (queue full or writer closed). */
  enqueue(row: UnchainedRow): boolean {
    return this.#push(row, null);
  }

  /**
   * Queues a row and resolves once it is committed; rejects with AuditNotCommitted when the
   * queue is full, the writer is closed, or the attempt that carried it failed (the row then
   * stays queued and is written by a later attempt, unless refused outright).
   */
  commit(row: UnchainedRow): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#push(row, { resolve, reject });
    });
  }

  #push(row: UnchainedRow, waiter: Waiter | null): boolean {
    if (this.#closed || this.#queue.length >= this.#opts.maxQueue) {
      const why = this.#closed ? 'closed' : 'queue_full';
      this.#drop(why);
      waiter?.reject(new AuditNotCommitted(why));
      return false;
    }
    this.#queue.push({ n: ++this.#counter, row, waiter, deadline: waiter ? Date.now() + this.#opts.commitWaitMs : 0 });
    if (waiter && this.#opts.commitWaitMs > 0 && !this.#sweep) this.#armSweep(this.#opts.commitWaitMs);
    // While a batch is in flight its completion starts the next; while backing off the
    // retry timer is already set and new entries do not shorten it.
    if (this.#inflight || this.#failures > 0 || this.#immediate) return true;
    this.#immediate = setImmediate(this.#kick);
    return true;
  }

  #armSweep(ms: number): void {
    this.#sweep = setTimeout(this.#expire, ms);
    this.#sweep.unref();
  }

  /** Rejects the waiters past their deadline (queue order is deadline order). */
  readonly #expire = (): void => {
    this.#sweep = null;
    const now = Date.now();
    let next = 0;
    for (const it of this.#queue) {
      if (!it.waiter) continue;
      if (it.deadline > now) {
        next = it.deadline;
        break;
      }
      it.waiter.reject(new AuditNotCommitted('timeout'));
      it.waiter = null;
    }
    if (next > 0) this.#armSweep(next - now);
  };

  readonly #kick = (): void => {
    this.#immediate = null;
    if (this.#inflight || this.#closed) return;
    const waiting = this.#queue.length;
    if (!this.#waitedTurn && waiting > 1 && waiting < ONE_MORE_TURN_BELOW) {
      this.#waitedTurn = true;
      this.#immediate = setImmediate(this.#kick);
      return;
    }
    this.#waitedTurn = false;
    this.#run().catch(() => {}); // logged in #step; the failure path scheduled the retry
  };

  /**
   * Resolves when every entry queued before the call is written; rejects when an attempt
   * fails (the entries stay queued and the background retry goes on). For shutdown and
   * tests; the proxy never waits on it.
   */
  async flush(): Promise<void> {
    const target = this.#counter;
    for (;;) {
      if (this.#inflight) await this.#inflight.catch(() => {});
      const head = this.#queue[0];
      if (!head || head.n > target) return;
      this.#clearTimer();
      await this.#run();
    }
  }

  /**
   * Stops taking entries and writes what is queued, retrying until `timeoutMs` has
   * passed. Returns how many entries could not be written (also logged as an error).
   */
  async close(timeoutMs = 5_000): Promise<{ abandoned: number }> {
    this.#closed = true;
    this.#clearTimer();
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = null;
    if (this.#sweep) clearTimeout(this.#sweep);
    this.#sweep = null;
    const deadline = Date.now() + timeoutMs;
    while (this.#queue.length > 0 && Date.now() < deadline) {
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), left);
      });
      try {
        const r = await Promise.race([this.#run().then(() => 'ok' as const), timeout]);
        if (r === 'timeout') break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.#backoffMs(), Math.max(0, deadline - Date.now()))));
      } finally {
        clearTimeout(timer);
      }
    }
    this.#clearTimer();
    const abandoned = this.#queue.length;
    for (const it of this.#queue) it.waiter?.reject(new AuditNotCommitted('closed'));
    if (abandoned > 0) {
      this.#log.error({ abandoned, last_error: this.#lastError }, 'audit: entries not written at shutdown (store unavailable)');
    }
    return { abandoned };
  }

  stats(): AuditWriterStats {
    return { queued: this.#queue.length, written: this.#written, commits: this.#commits, dropped: this.#dropped, failures: this.#failures, last_error: this.#lastError };
  }

  #drop(why: 'closed' | 'queue_full'): void {
    this.#dropped += 1;
    this.#droppedSinceLog += 1;
    const now = Date.now();
    if (now - this.#lastDropLog >= LOG_EVERY_MS) {
      this.#log.error({ dropped: this.#droppedSinceLog, dropped_total: this.#dropped, queued: this.#queue.length, why }, 'audit: entries dropped');
      this.#lastDropLog = now;
      this.#droppedSinceLog = 0;
    }
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    this.#clearTimer();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#run().catch(() => {}); // logged in #step; the failure path scheduled the retry
    }, delayMs);
    // The writer never keeps a process alive by itself; shutdown calls close().
    this.#timer.unref();
  }

  #backoffMs(): number {
    const { retryBaseMs, retryMaxMs } = this.#opts;
    return Math.min(retryMaxMs, retryBaseMs * 2 ** Math.min(20, Math.max(0, this.#failures - 1)));
  }

  /** One batch; concurrent callers share the attempt in flight. */
  #run(): Promise<void> {
    if (!this.#inflight) {
      this.#inflight = this.#step().then(
        () => {
          this.#inflight = null;
          // Group commit without a timer: whatever queued during this commit goes now.
          if (this.#queue.length > 0 && !this.#closed && !this.#immediate) this.#immediate = setImmediate(this.#kick);
        },
        (err: unknown) => {
          this.#inflight = null;
          this.#schedule(this.#backoffMs());
          throw err;
        },
      );
    }
    return this.#inflight;
  }

  async #step(): Promise<void> {
    if (this.#queue.length === 0) return;
    try {
      if (this.#uncertain) {
        const batchIds = this.#queue.slice(0, this.#opts.maxBatch).map((it) => it.row.id);
        const stored = await this.#sink.existingIds(batchIds);
        if (stored.size > 0) {
          this.#queue = this.#queue.filter((it) => {
            if (!stored.has(it.row.id)) return true;
            it.waiter?.resolve();
            return false;
          });
          this.#written += stored.size;
        }
        this.#uncertain = false;
      }
      const batch = this.#queue.slice(0, this.#opts.maxBatch);
      if (batch.length === 0) return;
      await this.#sink.writeBatch(batch.map((it) => it.row));
      // Only this loop removes entries, one attempt at a time, and new entries go to the
      // end: the batch is still the head of the queue.
      this.#queue.splice(0, batch.length);
      this.#written += batch.length;
      this.#commits += 1;
      for (const it of batch) it.waiter?.resolve();
      if (this.#failures > 0) {
        this.#log.info({ failures: this.#failures, queued: this.#queue.length }, 'audit: writing again after store failures');
      }
      this.#failures = 0;
    } catch (err) {
      this.#failures += 1;
      this.#uncertain = true;
      this.#lastError = errorCode(err);
      // Fail closed now: whoever waits on the entries of this attempt answers without them.
      // The entries stay queued for the retry.
      const e = new AuditNotCommitted(this.#lastError);
      for (const it of this.#queue.slice(0, this.#opts.maxBatch)) {
        it.waiter?.reject(e);
        it.waiter = null;
      }
      const now = Date.now();
      if (this.#failures === 1 || now - this.#lastFailureLog >= LOG_EVERY_MS) {
        this.#log.warn(
          { err_code: this.#lastError, failures: this.#failures, queued: this.#queue.length, retry_in_ms: this.#backoffMs() },
          'audit: batch write failed; entries stay queued and are retried',
        );
        this.#lastFailureLog = now;
      }
      throw err;
    }
  }
}
