import type { Queryable } from '../store/db.js';
import { isMysql } from '../store/db.js';
import type { AuditDecision, AuditRow } from './entry.js';
import { GENESIS_HASH, type ChainHead } from './chain.js';

/** The only module that queries `audit_log` and `audit_chain_heads` (ARCHITECTURE.md). */

export interface ListFilters {
  environment_id?: string;
  decision?: AuditDecision;
  connector?: string;
}

function headOf(row: { seq: unknown; hash: string } | undefined): ChainHead | null {
  return row ? { seq: Number(row.seq), hash: row.hash } : null;
}

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
   * The head, locked until the transaction ends: every append for this developer, from any
   * process, waits here, so the read of the previous hash and the insert are one step.
   * MySQL: SELECT ... FOR UPDATE. SQLite: a no-op write first, which takes the database's
   * write lock (waiting busy_timeout for another process) before the read, so a deferred
   * transaction never has to upgrade a read snapshot that another writer made stale.
   */
  async lockHead(trx: Queryable, developerId: string): Promise<ChainHead | null> {
    if (isMysql(trx)) {
      return headOf(await trx('audit_chain_heads').where({ developer_id: developerId }).forUpdate().first('seq', 'hash'));
    }
    await trx('audit_chain_heads').where({ developer_id: developerId }).update({ seq: trx.raw('seq') });
    return headOf(await trx('audit_chain_heads').where({ developer_id: developerId }).first('seq', 'hash'));
  },

  head(db: Queryable, developerId: string): Promise<ChainHead | null> {
    return db('audit_chain_heads').where({ developer_id: developerId }).first('seq', 'hash').then(headOf);
  },

  async setHead(trx: Queryable, developerId: string, head: ChainHead, now: number): Promise<void> {
    await trx('audit_chain_heads').where({ developer_id: developerId }).update({ seq: head.seq, hash: head.hash, updated_at: now });
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
