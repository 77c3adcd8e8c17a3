import type { Knex } from 'knex';
import type { Queryable } from './db.js';

/** Rows per DELETE when old rows are pruned (retention): a backlog never holds locks for long. */
export const PRUNE_BATCH = 1000;

export interface PruneOptions {
  /** Rows per statement; default PRUNE_BATCH. */
  batchSize?: number;
  /** Called after each full batch, before the next (the retention job keeps its lock fresh here). */
  onBatch?: () => Promise<void> | void;
}

/**
 * Deletes every row of `table` that `where` selects, at most `batchSize` rows per DELETE,
 * looping until none is left; returns how many were deleted. Each round reads up to
 * batchSize keys (`key`, the primary key) and deletes those keys with `where` applied
 * again, so a row that changed in between is left alone. Portable on purpose: SQLite has
 * no `DELETE ... LIMIT` unless compiled for it, and MySQL refuses LIMIT in an `IN (SELECT
 * ...)` of the same table. Each DELETE is its own autocommit statement: its locks are held
 * for one batch only. `beforeDelete` runs first with the keys of each batch (rows that
 * hang off them, deleted before their parent).
 *
 * `where` should be served by an index: it runs once per batch.
 */
export async function deleteInBatches(
  db: Queryable,
  table: string,
  where: (q: Knex.QueryBuilder) => void,
  opts: PruneOptions & { key?: string; beforeDelete?: (keys: string[]) => Promise<void> } = {},
): Promise<number> {
  const batchSize = opts.batchSize ?? PRUNE_BATCH;
  const key = opts.key ?? 'id';
  let deleted = 0;
  for (;;) {
    const pick = db(table).select(key).limit(batchSize);
    where(pick);
    const keys = ((await pick) as Array<Record<string, unknown>>).map((r) => String(r[key]));
    if (keys.length === 0) return deleted;
    await opts.beforeDelete?.(keys);
    const del = db(table).whereIn(key, keys);
    where(del);
    deleted += await del.delete();
    if (keys.length < batchSize) return deleted;
    await opts.onBatch?.();
    // better-sqlite3 answers synchronously: let timers and sockets run between batches.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
