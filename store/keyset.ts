import type { Knex } from 'knex';
import type { Queryable } from './db.js';

/**
 * Keyset pagination over (column, id): rows strictly after the row whose id is `afterId`
 * in the order `column dir, id dir`. An unknown `afterId` yields an empty page rather than
 * restarting from the top, so a client never loops.
 */
export async function applyKeysetAfter(
  db: Queryable,
  q: Knex.QueryBuilder,
  table: string,
  column: string,
  afterId: string | null,
  dir: 'asc' | 'desc',
  scope: Record<string, unknown> = {},
): Promise<Knex.QueryBuilder> {
  q.orderBy([{ column: `${table}.${column}`, order: dir }, { column: `${table}.id`, order: dir }]);
  if (!afterId) return q;
  const anchor = await db(table).where({ ...scope, id: afterId }).first(column);
  if (!anchor) return q.whereRaw('1 = 0');
  const v = anchor[column];
  const op = dir === 'asc' ? '>' : '<';
  return q.where((w) => {
    w.where(`${table}.${column}`, op, v).orWhere((w2) => w2.where(`${table}.${column}`, v).andWhere(`${table}.id`, op, afterId));
  });
}
