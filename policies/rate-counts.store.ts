import type { Queryable } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';

/**
 * The tables of count_over conditions (migration 0031): forwarded requests, and one lock
 * row per scope. Only this module queries them (ARCHITECTURE.md "The layering rule").
 */
export interface CountTarget {
  developerId: string;
  environmentId: string;
  /** The environment's end user (for `scope: end_user`); null when it could not be had. */
  endUserId: string | null;
}

export interface CountFilter {
  scope: 'environment' | 'end_user';
  /** Omitted: every connector (a rule without one counts them all). */
  connector?: string;
  category?: string;
  /** Rows with `at` greater than this are in the window. */
  afterMs: number;
}

/** The lock rows a request of this target takes, in one order everywhere (no deadlock). */
export function lockKeys(t: CountTarget): string[] {
  const keys = [`env:${t.environmentId}`];
  if (t.endUserId !== null) keys.push(`eu:${t.developerId}:${t.endUserId}`);
  return keys.sort();
}

export const rateCountsStore = {
  /** Forwarded requests of the scope in the window that the filter selects. */
  async count(db: Queryable, t: CountTarget, f: CountFilter): Promise<number> {
    const q = db('policy_rate_events').where('at', '>', f.afterMs);
    if (f.scope === 'environment') q.where({ environment_id: t.environmentId });
    else q.where({ developer_id: t.developerId, end_user_id: t.endUserId ?? '' });
    if (f.connector !== undefined) q.where({ connector: f.connector });
    if (f.category !== undefined) q.where({ category: f.category });
    const row = (await q.count({ n: '*' }).first()) as { n: number | string } | undefined;
    return Number(row?.n ?? 0);
  },

  /**
   * Takes the scope's lock rows for the rest of the transaction: an UPDATE holds the row
   * lock on MySQL and the write lock on SQLite until commit. A row is created the first
   * time (a concurrent first insert waits on the key, then updates).
   */
  async lock(trx: Queryable, keys: readonly string[], now: number): Promise<void> {
    for (const key of keys) {
      const n = await trx('policy_rate_locks').where({ scope_key: key }).update({ touched_at: now });
      if (n > 0) continue;
      try {
        await trx('policy_rate_locks').insert({ scope_key: key, touched_at: now });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        await trx('policy_rate_locks').where({ scope_key: key }).update({ touched_at: now });
      }
    }
  },

  async record(trx: Queryable, t: CountTarget, connector: string, category: string, at: number): Promise<void> {
    await trx('policy_rate_events').insert({
      developer_id: t.developerId, environment_id: t.environmentId, end_user_id: t.endUserId ?? '', connector, category, at,
    });
  },

  /** Deletes the environment's rows no window reads any more (at or before `beforeMs`). */
  async prune(trx: Queryable, environmentId: string, beforeMs: number): Promise<number> {
    return trx('policy_rate_events').where({ environment_id: environmentId }).where('at', '<=', beforeMs).delete();
  },
};
