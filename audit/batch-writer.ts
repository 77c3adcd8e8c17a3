import type { Logger } from '../lib/log.js';
import type { UnchainedRow } from './entry.js';

/**
 * The proxy's audit writer: `enqueue` returns at once (the agent already has its
 * response), and a background loop appends the queue in batches, each batch in ONE
 * transaction (one lock of each developer's chain head, one multi-row insert, one commit
 * instead of one per entry).
 *
 * - A batch is written ~intervalMs after the first entry of an idle queue, at once when
 *   maxBatch entries wait, and otherwise at most one batch per intervalMs while more wait
 *   (group commit: under load a batch carries what arrived in intervalMs, up to maxBatch).
 * - A failed batch stays at the head of the queue, in order, and is retried with
 *   exponential backoff (retryBaseMs .. retryMaxMs) for as long as the store is down.
 *   Entries keep queueing up to maxQueue; beyond it new entries are dropped and counted
 *   (stats().dropped) and the log says so. Nothing else is ever dropped.
 * - After a failure the commit may have happened anyway (the connection died on the
 *   reply), so the next attempt first asks which of the batch's ids are stored and
 *   drops those: an entry is written at most once.
 * - Logs carry counts and driver error codes only: never an entry, and never a driver
 *   error message (knex inlines the statement's values into it).
 */

export interface BatchWriterOptions {
  intervalMs: number;
  maxBatch: number;
  maxQueue: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

export const BATCH_DEFAULTS: Readonly<BatchWriterOptions> = Object.freeze({
  intervalMs: 50,
  maxBatch: 200,
  maxQueue: 20_000,
  retryBaseMs: 100,
  retryMaxMs: 5_000,
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
  /** Entries refused because the queue was full or the writer closed. */
  dropped: number;
  /** Consecutive failed attempts (0 when the last one succeeded). */
  failures: number;
  /** Driver error code of the last failure, if any. */
  last_error: string | null;
}

interface Item {
  n: number;
  row: UnchainedRow;
}

/** A driver error's code, never its message. */
export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; errno?: unknown; name?: unknown };
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.errno === 'number') return `errno_${e.errno}`;
  return typeof e?.name === 'string' ? e.name : 'unknown';
}

const LOG_EVERY_MS = 10_000;

export class AuditBatchWriter {
  readonly #sink: AuditSink;
  readonly #log: Logger;
  readonly #opts: BatchWriterOptions;
  #queue: Item[] = [];
  #counter = 0;
  #timer: NodeJS.Timeout | null = null;
  #inflight: Promise<void> | null = null;
  #failures = 0;
  #uncertain = false;
  #closed = false;
  #written = 0;
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
    if (this.#closed || this.#queue.length >= this.#opts.maxQueue) {
      this.#drop(this.#closed ? 'closed' : 'queue_full');
      return false;
    }
    this.#queue.push({ n: ++this.#counter, row });
    // While a batch is in flight its completion schedules the next; while backing off
    // the retry timer is already set and new entries do not shorten it.
    if (this.#inflight || this.#failures > 0) return true;
    if (this.#queue.length >= this.#opts.maxBatch) this.#schedule(0);
    else if (!this.#timer) this.#schedule(this.#opts.intervalMs);
    return true;
  }

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
    if (abandoned > 0) {
      this.#log.error({ abandoned, last_error: this.#lastError }, 'audit: entries not written at shutdown (store unavailable)');
    }
    return { abandoned };
  }

  stats(): AuditWriterStats {
    return { queued: this.#queue.length, written: this.#written, dropped: this.#dropped, failures: this.#failures, last_error: this.#lastError };
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
      const startedAt = Date.now();
      this.#inflight = this.#step().then(
        () => {
          this.#inflight = null;
          if (this.#queue.length === 0) return;
          // Group commit: a full batch goes at once; a partial one waits until intervalMs
          // after the previous batch started. A commit costs about the same for 5 entries as
          // for 200 (round trips, the head lock, the log flush), and going again at once made
          // batches as small as what arrived during one commit: on MySQL at 3,000 requests/s
          // that was a handful, and the writer's CPU per entry several times higher.
          const wait = this.#queue.length >= this.#opts.maxBatch ? 0 : Math.max(0, this.#opts.intervalMs - (Date.now() - startedAt));
          this.#schedule(wait);
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
          this.#queue = this.#queue.filter((it) => !stored.has(it.row.id));
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
      if (this.#failures > 0) {
        this.#log.info({ failures: this.#failures, queued: this.#queue.length }, 'audit: writing again after store failures');
      }
      this.#failures = 0;
    } catch (err) {
      this.#failures += 1;
      this.#uncertain = true;
      this.#lastError = errorCode(err);
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
