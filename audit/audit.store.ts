import { isMysql, type Db, type Queryable } from '../store/db.js';
import type { AuditDecision, AuditRow, UnchainedRow } from './entry.js';
import { GENESIS_HASH, chainRows, type ChainHead } from './chain.js';

/** The only module that queries `audit_log` and `audit_chain_heads` (ARCHITECTURE.md). */

export interface ListFilters {
  environment_id?: string;
  decision?: AuditDecision;
  connector?: string;
}

function headOf(row: { seq: unknown; hash: string } | undefined): ChainHead | null {
  return row ? { seq: Number(row.seq), hash: row.hash } : null;
}

/**
 * A developer's chain as audit_chain_heads records it: the head (last seq and hash) and
 * the anchor, where the kept chain starts (the last entry retention pruned; seq 0 and the
 * genesis hash while nothing was pruned; migrations/0011).
 */
export interface ChainState {
  head: ChainHead;
  anchor: ChainHead;
}

function stateOf(row: { seq: unknown; hash: string; pruned_seq: unknown; pruned_hash: string } | undefined): ChainState | null {
  return row ? { head: { seq: Number(row.seq), hash: row.hash }, anchor: { seq: Number(row.pruned_seq), hash: row.pruned_hash } } : null;
}

/** Columns of `audit_log` in the order of the SQLite fast path's positional INSERT. */
const COLUMNS = [
  'developer_id', 'seq', 'id', 'created_at', 'environment_id', 'method', 'host', 'path', 'connector', 'category',
  'credential', 'decision', 'reason', 'matched_rules', 'approval_id', 'grant_id', 'status', 'upstream_status',
  'bytes_in', 'bytes_out', 'duration_ms', 'redacted', 'facts', 'tool', 'prev_hash', 'hash',
] as const satisfies ReadonlyArray<keyof AuditRow>;
const REDACTED = COLUMNS.indexOf('redacted');

/** The better-sqlite3 API this module uses (knex's connection object for `client: better-sqlite3`). */
interface SqliteStatement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
}
interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): { immediate(...args: A): R };
}
type SqliteAppend = (groups: ReadonlyArray<readonly [string, readonly UnchainedRow[]]>, now: number) => AuditRow[];

/**
 * Statements prepared once per connection. Prepared lazily and cached only once all of
 * them prepared: while a table is missing (the outage test renames one) nothing is
 * cached, and SQLite re-prepares a cached statement by itself after a schema change.
 */
const sqliteAppends = new WeakMap<SqliteConnection, SqliteAppend>();

function sqliteAppendFor(conn: SqliteConnection): SqliteAppend {
  const cached = sqliteAppends.get(conn);
  if (cached) return cached;
  const ensureHead = conn.prepare('INSERT INTO audit_chain_heads (developer_id, seq, hash, updated_at) VALUES (?, 0, ?, ?) ON CONFLICT (developer_id) DO NOTHING');
  const head = conn.prepare('SELECT seq, hash FROM audit_chain_heads WHERE developer_id = ?');
  const setHead = conn.prepare('UPDATE audit_chain_heads SET seq = ?, hash = ?, updated_at = ? WHERE developer_id = ?');
  const insert = conn.prepare(`INSERT INTO audit_log (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`);
  const params: unknown[] = new Array(COLUMNS.length);
  const append = conn.transaction((groups: ReadonlyArray<readonly [string, readonly UnchainedRow[]]>, now: number): AuditRow[] => {
    const out: AuditRow[] = [];
    for (const [developerId, rows] of groups) {
      ensureHead.run(developerId, GENESIS_HASH, now);
      const chained = chainRows(headOf(head.get(developerId) as { seq: unknown; hash: string })!, rows);
      for (const row of chained.rows) {
        for (let i = 0; i < COLUMNS.length; i++) params[i] = row[COLUMNS[i]!];
        params[REDACTED] = row.redacted ? 1 : 0; // better-sqlite3 binds no booleans
        insert.run(params);
        out.push(row);
      }
      setHead.run(chained.head.seq, chained.head.hash, now, developerId);
    }
    return out;
  });
  const run: SqliteAppend = (groups, now) => append.immediate(groups, now);
  sqliteAppends.set(conn, run);
  return run;
}

/** audit_log's columns, in the order the MySQL append script writes them. */
const AUDIT_COLUMNS = [
  'id', 'developer_id', 'seq', 'created_at', 'environment_id', 'method', 'host', 'path', 'connector', 'category', 'credential', 'decision',
  'reason', 'matched_rules', 'approval_id', 'grant_id', 'status', 'upstream_status', 'bytes_in', 'bytes_out', 'duration_ms', 'redacted',
  'facts', 'tool', 'prev_hash', 'hash',
] as const satisfies ReadonlyArray<keyof AuditRow>;

/** What a policy simulation reads of an entry (policyPage). */
const POLICY_COLUMNS = ['seq', 'id', 'created_at', 'environment_id', 'method', 'host', 'path', 'connector', 'category', 'decision', 'reason', 'facts', 'tool'] as const;
export type PolicyRow = Pick<AuditRow, (typeof POLICY_COLUMNS)[number]>;

export const auditStore = {
  /**
   * Makes sure the developer's chain head exists, as its own autocommit statement. It must
   * not run inside the locking transaction: on InnoDB, two transactions that both find the
   * row missing (or both take the shared lock INSERT IGNORE leaves on a duplicate) and then
   * ask for the exclusive lock deadlock each other.
   */
  async ensureHead(db: Queryable, developerId: string, now: number): Promise<void> {
    await db('audit_chain_heads')
      .insert({ developer_id: developerId, seq: 0, hash: GENESIS_HASH, updated_at: now })
      .onConflict('developer_id')
      .ignore();
  },

  /**
   * MySQL: the head, locked until the transaction ends (SELECT ... FOR UPDATE): every append
   * for this developer, from any process, waits here, so the read of the previous hash and
   * the insert are one step. SQLite appends through appendSqlite, whose BEGIN IMMEDIATE
   * takes the database's write lock instead.
   */
  async lockHead(trx: Queryable, developerId: string): Promise<ChainHead | null> {
    return headOf(await trx('audit_chain_heads').where({ developer_id: developerId }).forUpdate().first('seq', 'hash'));
  },

  head(db: Queryable, developerId: string): Promise<ChainHead | null> {
    return db('audit_chain_heads').where({ developer_id: developerId }).first('seq', 'hash').then(headOf);
  },

  /** Head and anchor in one read (verify's starting point). */
  state(db: Queryable, developerId: string): Promise<ChainState | null> {
    return db('audit_chain_heads').where({ developer_id: developerId }).first('seq', 'hash', 'pruned_seq', 'pruned_hash').then(stateOf);
  },

  /**
   * Head and anchor, locked until the transaction ends on MySQL (the lock appends take, so
   * a prune and an append of one developer run one after the other); on SQLite the
   * transaction already holds the database's only connection.
   */
  async lockState(trx: Queryable, developerId: string): Promise<ChainState | null> {
    const q = trx('audit_chain_heads').where({ developer_id: developerId });
    return stateOf(await (isMysql(trx) ? q.forUpdate() : q).first('seq', 'hash', 'pruned_seq', 'pruned_hash'));
  },

  /**
   * Retention: deletes the developer's entries anchor.seq < seq <= through.seq (one range
   * of the primary key, at most one batch of rows) and moves the anchor to `through`, in
   * the caller's transaction. Returns the rows deleted.
   */
  async pruneThrough(trx: Queryable, developerId: string, anchor: ChainHead, through: ChainHead, now: number): Promise<number> {
    const n = await trx('audit_log').where({ developer_id: developerId }).andWhere('seq', '>', anchor.seq).andWhere('seq', '<=', through.seq).delete();
    await trx('audit_chain_heads').where({ developer_id: developerId }).update({ pruned_seq: through.seq, pruned_hash: through.hash, pruned_at: now });
    return n;
  },

  /** Developers with an audit chain, `limit` at a time in id order after `after`. */
  async developers(db: Queryable, after: string | null, limit: number): Promise<string[]> {
    const q = db('audit_chain_heads').select('developer_id').orderBy('developer_id').limit(limit);
    if (after !== null) q.where('developer_id', '>', after);
    return (await q).map((r: { developer_id: string }) => r.developer_id);
  },

  async setHead(trx: Queryable, developerId: string, head: ChainHead, now: number): Promise<void> {
    await trx('audit_chain_heads').where({ developer_id: developerId }).update({ seq: head.seq, hash: head.hash, updated_at: now });
  },

  /**
   * SQLite: appends every group (one developer's rows, in order; groups in developer id
   * order) in ONE synchronous better-sqlite3 transaction on the pool's connection, with
   * statements prepared once: `BEGIN IMMEDIATE` takes the database's write lock first
   * (waiting busy_timeout for another process), then per developer the head is made sure
   * of, read, the rows chained onto it and inserted, and the head moved. All or nothing.
   * Through knex the same batch cost ~90 µs of CPU per entry (a 200-row x 23-column
   * statement compiled and prepared anew each batch, a promise per query); this way ~35 µs,
   * most of it SQLite's own work on six B-trees (docs/performance.md). The connection is taken from knex's pool (one connection on
   * SQLite), so no knex transaction can be open on it meanwhile.
   */
  async appendSqlite(db: Db, groups: ReadonlyArray<readonly [string, readonly UnchainedRow[]]>, now: number): Promise<AuditRow[]> {
    const client = db.client as { acquireConnection(): Promise<SqliteConnection>; releaseConnection(c: SqliteConnection): Promise<unknown> };
    const conn = await client.acquireConnection();
    try {
      return sqliteAppendFor(conn)(groups, now);
    } finally {
      await client.releaseConnection(conn);
    }
  },

  /**
   * MySQL: the statements that append one developer's chained rows and move its head from
   * `from` to `to`, with `?` placeholders (values pushed in order), for a one-round-trip
   * transaction script (store/mysql-script.ts). The head moves only from where the rows
   * were chained (else the script fails); the primary key (developer_id, seq) refuses the
   * rows too if another process appended meanwhile.
   */
  mysqlAppendStatements(statements: string[], values: unknown[], developerId: string, from: ChainHead, rows: readonly AuditRow[], to: ChainHead, now: number): void {
    // The head first, as the locking path does (lock the head, then insert): the same lock
    // order in both, so a fast append and a locked one cannot deadlock each other.
    // The head must be where the rows were chained from: if not, `hash` becomes NULL, which
    // the NOT NULL column refuses (the script runs in strict mode), and the whole script
    // stops and is rolled back — never rows committed without their head move. (MySQL
    // applies SET assignments left to right: `hash` is computed from the old `seq`.)
    statements.push('UPDATE audit_chain_heads SET hash = IF(seq = ? AND hash = ?, ?, NULL), seq = ?, updated_at = ? WHERE developer_id = ?');
    values.push(from.seq, from.hash, to.hash, to.seq, now, developerId);
    const tuple = `(${AUDIT_COLUMNS.map(() => '?').join(',')})`;
    statements.push(`INSERT INTO audit_log (${AUDIT_COLUMNS.join(',')}) VALUES ${rows.map(() => tuple).join(',')}`);
    for (const r of rows) {
      for (const c of AUDIT_COLUMNS) {
        const v = r[c];
        values.push(c === 'redacted' ? (v ? 1 : 0) : v === undefined ? null : v);
      }
    }
  },

  async insertRows(trx: Queryable, rows: AuditRow[]): Promise<void> {
    if (rows.length > 0) await trx('audit_log').insert(rows);
  },

  /** Which of these ids are already stored (a batch whose commit reply was lost). */
  async existingIds(db: Queryable, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows: Array<{ id: string }> = await db('audit_log').whereIn('id', ids).select('id');
    return new Set(rows.map((r) => r.id));
  },

  /** Rows with afterSeq < seq <= uptoSeq, in seq order, at most `limit` (verify's pages). */
  chainPage(db: Queryable, developerId: string, afterSeq: number, uptoSeq: number, limit: number): Promise<AuditRow[]> {
    return db<AuditRow>('audit_log')
      .where({ developer_id: developerId })
      .andWhere('seq', '>', afterSeq)
      .andWhere('seq', '<=', uptoSeq)
      .orderBy('seq', 'asc')
      .limit(limit);
  },

  async maxSeq(db: Queryable, developerId: string): Promise<number> {
    const row = await db('audit_log').where({ developer_id: developerId }).max({ m: 'seq' }).first();
    return row?.m == null ? 0 : Number(row.m);
  },

  /** The first row after `seq` (the one verify names when rows lie beyond the head). */
  firstAfter(db: Queryable, developerId: string, seq: number): Promise<AuditRow | undefined> {
    return db<AuditRow>('audit_log').where({ developer_id: developerId }).andWhere('seq', '>', seq).orderBy('seq', 'asc').first();
  },

  async seqOf(db: Queryable, developerId: string, id: string): Promise<number | null> {
    const row = await db('audit_log').where({ developer_id: developerId, id }).first('seq');
    return row ? Number(row.seq) : null;
  },

  /**
   * A page of the columns a policy simulation reads (issue 26), newest first, seq below
   * `beforeSeq` (null: from the newest); one index range read (the primary key, or the
   * environment index when `environmentId` is given).
   */
  policyPage(db: Queryable, developerId: string, environmentId: string | undefined, beforeSeq: number | null, limit: number): Promise<PolicyRow[]> {
    const q = db<AuditRow>('audit_log').where({ developer_id: developerId });
    if (environmentId !== undefined) q.andWhere({ environment_id: environmentId });
    if (beforeSeq !== null) q.andWhere('seq', '<', beforeSeq);
    return q.orderBy('seq', 'desc').limit(limit).select(...POLICY_COLUMNS) as unknown as Promise<PolicyRow[]>;
  },

  /** Newest first; `beforeSeq` is the keyset (the seq of the `after` entry). */
  list(db: Queryable, developerId: string, filters: ListFilters, beforeSeq: number | null, limit: number): Promise<AuditRow[]> {
    const q = db<AuditRow>('audit_log').where({ developer_id: developerId });
    if (filters.environment_id !== undefined) q.andWhere({ environment_id: filters.environment_id });
    if (filters.decision !== undefined) q.andWhere({ decision: filters.decision });
    if (filters.connector !== undefined) q.andWhere({ connector: filters.connector });
    if (beforeSeq !== null) q.andWhere('seq', '<', beforeSeq);
    return q.orderBy('seq', 'desc').limit(limit);
  },
};
