import type { Db } from '../store/db.js';
import { isMysql, isUniqueViolation, withTx } from '../store/db.js';
import { MysqlScriptRunner } from '../store/mysql-script.js';
import { PRUNE_BATCH, type PruneOptions } from '../store/prune.js';
import type { Clock } from '../lib/clock.js';
import { newTimeOrderedId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import { noopMetrics, type Metrics } from '../lib/metrics.js';
import { auditStore, type ListFilters } from './audit.store.js';
import { ChainVerifier, EMPTY_HEAD, chainRows, type ChainHead, type VerifyResult } from './chain.js';
import { AuditBatchWriter, type AuditWriterStats, type BatchWriterOptions } from './batch-writer.js';
import { parseFacts, sanitizeEntry, toAuditEntry, type AuditDecision, type AuditEntry, type AuditEntryInput, type AuditRow, type StoredFacts, type UnchainedRow } from './entry.js';

export type { AuditEntry, AuditEntryInput, StoredFacts } from './entry.js';
export type { VerifyResult } from './chain.js';
export { AuditNotCommitted } from './batch-writer.js';
export type { AuditWriterStats, BatchWriterOptions } from './batch-writer.js';

/** What a policy simulation asks for (issue 26): the caller's entries, newest first. */
export interface PolicyRecordsQuery {
  environment_id?: string;
  /** Only entries created at or after this (ms); null or absent: no bound. */
  sinceMs?: number | null;
  /** At most this many entries that reached the policy (a connector and a category). */
  limit: number;
}

/** An entry as a policy simulation reads it: the request's policy inputs and the recorded verdict. */
export interface PolicyRecord {
  id: string;
  created_at: number;
  environment_id: string | null;
  method: string;
  host: string;
  path: string;
  connector: string;
  category: string;
  decision: AuditDecision;
  reason: string | null;
  /** The stored facts (bounded, scrubbed), or null when none were recorded or they do not parse. */
  facts: StoredFacts | null;
  /** The MCP tool(s) called (issue 28), or null. */
  tool: string | null;
}

export interface PolicyRecords {
  /** Newest first (seq descending). */
  records: PolicyRecord[];
  /** Entries read, the skipped ones (no connector or category, before `since`) included. */
  scanned: number;
  /** False when the read stopped at POLICY_SCAN_MAX entries before it found `limit` or the start of the log. */
  complete: boolean;
}

/** Rows per query when a policy simulation reads the log. */
const POLICY_PAGE = 1000;
/** At most this many entries are read for one simulation, whatever they are (bounded work). */
export const POLICY_SCAN_MAX = 100_000;
/**
 * created_at is when a request finished, and seq is commit order: across processes an
 * entry may be committed a little after a younger one. Reading newest first, the walk
 * stops at the first entry older than `since` by more than this.
 */
const SINCE_SLACK_MS = 60_000;

export interface ListAuditOptions extends ListFilters {
  /** An audit id: entries older than it. Unknown (or another developer's): empty page. */
  after?: string | null;
  limit: number;
}

/** Rows per query when verify walks a chain. */
const VERIFY_PAGE = 1000;
/**
 * A verify that found a break while retention moved the anchor walks again from the new
 * anchor; a safety bound only (a prune run moves it once per batch, and then stops).
 */
const VERIFY_ATTEMPTS = 1000;

/** Attempts of one record() transaction on a deadlock, lock timeout or busy database. */
const RECORD_ATTEMPTS = 4;

/** The head row disappeared between ensureHead and the lock (tampering, or a stale cache). */
class MissingHead extends Error {
  constructor(readonly developerId: string) {
    super('audit chain head missing');
  }
}

/** MySQL: another process appended since this one last did (the one-round-trip append failed its guard). */
class HeadMoved extends Error {
  readonly code = 'AUDIT_HEAD_MOVED';
  constructor() {
    super('audit chain head moved');
  }
}

/** Errors worth another attempt of the same transaction. */
function transient(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return err instanceof MissingHead || err instanceof HeadMoved || code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT' || code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT';
}

export function createAuditService(deps: { db: Db; clock: Clock; log: Logger; batch?: Partial<BatchWriterOptions>; metrics?: Metrics }) {
  const { db, clock, log } = deps;
  // Without metrics (or the no-op port) commit() stays a bare pass-through.
  const metrics = deps.metrics && deps.metrics !== noopMetrics ? deps.metrics : null;
  // Developers whose chain head row is known to exist: saves the INSERT IGNORE round trip
  // on every append. Heads are never deleted; if one is (tampering), the lock finds no
  // row, the id leaves this set, and the append is retried after re-creating it.
  const knownHeads = new Set<string>();

  async function ensureHeads(developerIds: Iterable<string>): Promise<void> {
    for (const d of developerIds) {
      if (knownHeads.has(d)) continue;
      await auditStore.ensureHead(db, d, clock.nowMs());
      knownHeads.add(d);
    }
  }

  /**
   * MySQL: the head of each developer's chain as this process last wrote (or read) it. An
   * append chains onto it without locking or reading the head row: if another process
   * appended meanwhile, the first row's (developer_id, seq) is taken and the primary key
   * refuses the batch (ER_DUP_ENTRY; InnoDB makes the insert wait for the other
   * transaction first), the heads are forgotten and the append retried from fresh reads.
   */
  const lastHeads = new Map<string, ChainHead>();
  const script = isMysql(db) ? new MysqlScriptRunner(db) : null;

  function groupByDeveloper(rows: readonly UnchainedRow[]): { developers: string[]; byDeveloper: Map<string, UnchainedRow[]> } {
    const byDeveloper = new Map<string, UnchainedRow[]>();
    for (const r of rows) {
      const list = byDeveloper.get(r.developer_id);
      if (list) list.push(r);
      else byDeveloper.set(r.developer_id, [r]);
    }
    return { developers: [...byDeveloper.keys()].sort(), byDeveloper };
  }

  /**
   * Appends rows in ONE transaction, chained in order per developer (developer id order).
   * SQLite: one synchronous better-sqlite3 transaction. MySQL, first attempt: one round
   * trip — the rows and head moves of every developer sent as one `START TRANSACTION;
   * INSERT ...; UPDATE ...; COMMIT` script on a dedicated connection (store/mysql-script.ts),
   * chained onto the heads this process last wrote; five round trips (begin, lock the head,
   * insert, move it, commit) made each answer wait ~1.6 ms. A retry (another process
   * appended meanwhile) takes the locking path.
   */
  async function appendOnce(rows: readonly UnchainedRow[], attempt: number): Promise<AuditRow[]> {
    const { developers, byDeveloper } = groupByDeveloper(rows);
    if (!script) {
      return auditStore.appendSqlite(db, developers.map((d) => [d, byDeveloper.get(d)!] as const), clock.nowMs());
    }
    await ensureHeads(developers);
    if (attempt > 1) return appendLocked(developers, byDeveloper);
    try {
      return await script.run(async () => {
        const out: AuditRow[] = [];
        const statements: string[] = [];
        const values: unknown[] = [];
        const now = clock.nowMs();
        for (const d of developers) {
          let head = lastHeads.get(d);
          if (!head) {
            const read = await auditStore.head(db, d);
            if (!read) {
              knownHeads.delete(d);
              throw new MissingHead(d);
            }
            head = read;
          }
          const chained = chainRows(head, byDeveloper.get(d)!);
          auditStore.mysqlAppendStatements(statements, values, d, head, chained.rows, chained.head, now);
          // Optimistic: if the script fails, the catch below forgets every head it touched.
          lastHeads.set(d, chained.head);
          out.push(...chained.rows);
        }
        return { statements, values, result: out };
      });
    } catch (err) {
      for (const d of developers) lastHeads.delete(d);
      // The head was not where this process left it (the head guard's NULL, or the rows'
      // key taken): another process appended. Retried on the locking path.
      const code = (err as { code?: string }).code;
      if (code === 'ER_BAD_NULL_ERROR' || isUniqueViolation(err)) throw new HeadMoved();
      throw err;
    }
  }

  /** MySQL: the locking append (heads locked in developer id order, so two writers cannot deadlock). */
  async function appendLocked(developers: string[], byDeveloper: Map<string, UnchainedRow[]>): Promise<AuditRow[]> {
    return withTx(db, async (trx) => {
      const out: AuditRow[] = [];
      const now = clock.nowMs();
      for (const d of developers) {
        const head = await auditStore.lockHead(trx, d);
        if (!head) {
          knownHeads.delete(d);
          throw new MissingHead(d);
        }
        const chained = chainRows(head, byDeveloper.get(d)!);
        await auditStore.insertRows(trx, chained.rows);
        await auditStore.setHead(trx, d, chained.head, now);
        out.push(...chained.rows);
      }
      return out;
    });
  }

  async function append(rows: readonly UnchainedRow[]): Promise<AuditRow[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await appendOnce(rows, attempt);
      } catch (err) {
        if (attempt >= RECORD_ATTEMPTS || !transient(err)) throw err;
      }
    }
  }

  const writer = new AuditBatchWriter(
    {
      writeBatch: async (rows) => {
        await append(rows);
      },
      existingIds: (ids) => auditStore.existingIds(db, ids),
    },
    log,
    deps.batch,
  );

  function prepare(entry: AuditEntryInput): UnchainedRow {
    const now = clock.nowMs();
    // Time-ordered: audit_log's id index then grows at its end (lib/ids.ts).
    return sanitizeEntry(entry, newTimeOrderedId('aud', now), now);
  }

  /**
   * Appends one entry now, in its own transaction, and returns it as stored. Throws
   * TypeError for an entry that breaks the field rules, and the store's error when the
   * store is down (the entry is then not recorded).
   */
  async function record(entry: AuditEntryInput): Promise<AuditEntry> {
    const [row] = await append([prepare(entry)]);
    return toAuditEntry(row!);
  }

  /**
   * Queues one entry for the batched writer and returns its id at once, or null when the
   * queue is full or the writer closed (counted in stats().dropped). Throws TypeError for
   * an entry that breaks the field rules. For entries no answer waits on (tests, benches).
   */
  function recordLater(entry: AuditEntryInput): string | null {
    const row = prepare(entry);
    return writer.enqueue(row) ? row.id : null;
  }

  /**
   * The gateway's call, before it finishes an answer: resolves once the entry is committed
   * (group commit: it shares a transaction with whatever else is waiting). Rejects with
   * AuditNotCommitted when the store cannot take it (the attempt failed, the queue is full,
   * the writer is closed) or has not committed within 5 s (commitWaitMs); the gateway then fails
   * closed. An entry whose attempt failed stays queued and is written once the store is back.
   * Throws TypeError for an entry that breaks the field rules.
   */
  function commit(entry: AuditEntryInput): Promise<void> {
    const row = prepare(entry);
    if (!metrics) return writer.commit(row);
    // gateway_audit_commit_seconds (issue 25, item 2): what the answer waits for, queueing included.
    const handedAt = performance.now();
    return writer.commit(row).then(() => metrics.auditCommitted((performance.now() - handedAt) / 1000));
  }

  /** Newest first; returns up to limit + 1 entries (api/pagination page() cuts). */
  async function list(developerId: string, opts: ListAuditOptions): Promise<AuditEntry[]> {
    let beforeSeq: number | null = null;
    if (opts.after) {
      beforeSeq = await auditStore.seqOf(db, developerId, opts.after);
      if (beforeSeq === null) return [];
    }
    const filters: ListFilters = { environment_id: opts.environment_id, decision: opts.decision, connector: opts.connector };
    return (await auditStore.list(db, developerId, filters, beforeSeq, opts.limit + 1)).map(toAuditEntry);
  }

  /**
   * The developer's entries that reached the policy (a connector and a category: a
   * request that carried a credential and was classified), newest first, for a policy
   * simulation (issue 26; docs/policies-approvals.md "Simulation"). Reads POLICY_PAGE rows
   * per query by seq (one index range each: the primary key, or the environment index),
   * at most `limit` records and POLICY_SCAN_MAX rows in all, yielding to the event loop
   * between pages. Read-only.
   */
  async function policyRecords(developerId: string, q: PolicyRecordsQuery): Promise<PolicyRecords> {
    const out: PolicyRecord[] = [];
    const since = q.sinceMs ?? null;
    let beforeSeq: number | null = null;
    let scanned = 0;
    while (out.length < q.limit) {
      if (scanned >= POLICY_SCAN_MAX) return { records: out, scanned, complete: false };
      const rows = await auditStore.policyPage(db, developerId, q.environment_id, beforeSeq, Math.min(POLICY_PAGE, POLICY_SCAN_MAX - scanned));
      for (const r of rows) {
        scanned++;
        const createdAt = Number(r.created_at);
        if (since !== null && createdAt < since) {
          if (createdAt < since - SINCE_SLACK_MS) return { records: out, scanned, complete: true };
          continue;
        }
        if (r.connector == null || r.connector === '' || r.category == null || r.category === '') continue;
        out.push({
          id: r.id, created_at: createdAt, environment_id: r.environment_id ?? null, method: r.method, host: r.host, path: r.path,
          connector: r.connector, category: r.category, decision: r.decision, reason: r.reason ?? null,
          facts: r.facts == null ? null : parseFacts(r.facts),
          tool: r.tool ?? null,
        });
        if (out.length >= q.limit) break;
      }
      if (rows.length < POLICY_PAGE || out.length >= q.limit) break;
      beforeSeq = Number(rows[rows.length - 1]!.seq);
      await new Promise((resolve) => setImmediate(resolve));
    }
    return { records: out, scanned, complete: true };
  }

  /**
   * Walks the developer's chain in seq order, VERIFY_PAGE rows per query, recomputing each
   * hash (docs/audit.md: what it detects). It starts at the anchor, the last entry
   * retention pruned (genesis when none was), so only a prefix recorded as pruned may be
   * missing. Safe while appends go on: it checks the rows up to the head it read first
   * (every row up to that seq was committed with or before that head), then that no row
   * lies beyond the head as it is at the end. Safe while retention prunes: a break found
   * while the anchor moved is checked again from the new anchor.
   */
  async function verify(developerId: string, opts: { pageSize?: number } = {}): Promise<VerifyResult> {
    for (let attempt = 1; ; attempt++) {
      const { result, anchor, reason } = await verifyOnce(developerId, opts.pageSize ?? VERIFY_PAGE);
      // Retention pruned rows this walk had yet to read: walk again from the new anchor.
      // The anchor only moves forward and only over verified rows, so each new walk reads
      // only rows the previous one did not get to, and it ends once pruning does.
      if (!result.ok && attempt < VERIFY_ATTEMPTS) {
        const now = await auditStore.state(db, developerId);
        if (now && now.anchor.seq > anchor.seq) continue;
      }
      if (!result.ok) log.warn({ developer_id: developerId, first_broken_id: result.first_broken_id, reason, checked: result.checked }, 'audit: chain verification failed');
      return result;
    }
  }

  async function verifyOnce(developerId: string, pageSize: number): Promise<{ result: VerifyResult; anchor: ChainHead; reason: string | null }> {
    const q = db;
    const state = await auditStore.state(q, developerId);
    const head = state?.head ?? EMPTY_HEAD;
    const anchor = state?.anchor ?? EMPTY_HEAD;
    const v = new ChainVerifier(anchor);
    let after = anchor.seq;
    while (after < head.seq) {
      const rows = await auditStore.chainPage(q, developerId, after, head.seq, pageSize);
      if (rows.length === 0) break;
      if (!v.feed(rows)) break;
      after = Number(rows[rows.length - 1]!.seq);
      // better-sqlite3 answers synchronously, so a long walk would be one unbroken chain
      // of microtasks: let timers and sockets (the proxy) run between pages.
      await new Promise((resolve) => setImmediate(resolve));
    }
    let result = v.finish(head);
    if (result.ok) {
      // In this order: a row committed after maxSeq was read cannot be counted, and every
      // row counted was committed with a head move that the second read sees.
      const max = await auditStore.maxSeq(q, developerId);
      const headNow = (await auditStore.head(q, developerId)) ?? EMPTY_HEAD;
      if (max > headNow.seq) {
        const extra = await auditStore.firstAfter(q, developerId, headNow.seq);
        if (extra) result = v.beyondHead(extra.id);
      }
    }
    return { result, anchor, reason: v.reason };
  }

  /**
   * Retention (docs/audit.md "Retention"): prunes, for every developer, the oldest entries
   * of the chain created before `beforeMs`: only a prefix, in seq order, stopping at the
   * first entry created at or after `beforeMs` (created_at is not strictly increasing in
   * seq, so a few older entries after it are kept) and at the first entry that does not
   * verify (tampering is never pruned away: verify still names it). Each batch of at most
   * `batchSize` rows is one transaction that deletes a range of the primary key and moves
   * the anchor to the last pruned entry, under the lock appends take. One log line per
   * developer records what was pruned, with the anchor's seq and hash: a copy of the
   * chain's new starting point outside the database. Returns the entries deleted.
   */
  async function prune(beforeMs: number, opts: PruneOptions = {}): Promise<number> {
    const batchSize = opts.batchSize ?? PRUNE_BATCH;
    let total = 0;
    let after: string | null = null;
    for (;;) {
      const developers = await auditStore.developers(db, after, 1000);
      if (developers.length === 0) return total;
      for (const developerId of developers) total += await pruneDeveloper(developerId, beforeMs, batchSize, opts.onBatch);
      after = developers[developers.length - 1]!;
    }
  }

  async function pruneDeveloper(developerId: string, beforeMs: number, batchSize: number, onBatch: PruneOptions['onBatch']): Promise<number> {
    let pruned = 0;
    let from: ChainHead | null = null;
    let through: { id: string; seq: number; hash: string } | null = null;
    for (let raced = 0; raced < 3; ) {
      const state = await auditStore.state(db, developerId);
      if (!state || state.anchor.seq >= state.head.seq) break;
      // The usual hourly case, nothing old yet: one primary-key lookup, not a page of rows.
      const oldest = await auditStore.firstAfter(db, developerId, state.anchor.seq);
      if (!oldest || Number(oldest.created_at) >= beforeMs) break;
      const rows = await auditStore.chainPage(db, developerId, state.anchor.seq, state.head.seq, batchSize);
      const v = new ChainVerifier(state.anchor);
      let reachedKept = false;
      for (const row of rows) {
        if (Number(row.created_at) >= beforeMs) {
          reachedKept = true;
          break;
        }
        if (!v.feed([row])) break;
      }
      const last = v.lastGood;
      if (last) {
        const n = await withTx(db, async (trx) => {
          // Another worker pruned meanwhile: read again from its anchor.
          const locked = await auditStore.lockState(trx, developerId);
          if (!locked || locked.anchor.seq !== state.anchor.seq || locked.anchor.hash !== state.anchor.hash) return null;
          return auditStore.pruneThrough(trx, developerId, state.anchor, { seq: last.seq, hash: last.hash }, clock.nowMs());
        });
        if (n === null) {
          raced++;
          continue;
        }
        from ??= state.anchor;
        through = last;
        pruned += n;
      }
      if (v.broken) {
        log.error({ developer_id: developerId, first_broken_id: v.result().first_broken_id, reason: v.reason }, 'audit: retention stopped at an entry that does not verify; it and everything after it are kept');
        break;
      }
      if (!last || reachedKept || rows.length < batchSize) break;
      await onBatch?.();
    }
    if (through && from) {
      log.info(
        { developer_id: developerId, entries: pruned, from_seq: from.seq + 1, through_seq: through.seq, through_id: through.id, anchor_hash: through.hash, before: new Date(beforeMs).toISOString() },
        'audit: pruned',
      );
    }
    return pruned;
  }

  return {
    record,
    recordLater,
    commit,
    /** Writes everything queued before the call; rejects if the store fails (entries stay queued). */
    flush: () => writer.flush(),
    /** Stops the batched writer after writing what is queued (retrying up to timeoutMs). */
    close: async (timeoutMs?: number) => {
      const r = await writer.close(timeoutMs);
      script?.close();
      return r;
    },
    stats: (): AuditWriterStats => writer.stats(),
    list,
    policyRecords,
    verify,
    prune,
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
