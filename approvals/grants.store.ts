import type { Queryable } from '../store/db.js';
import { applyKeysetAfter } from '../store/keyset.js';

export type GrantScopeValue = 'task' | 'session' | 'time_limited' | 'permanent';

export interface GrantRow {
  id: string;
  developer_id: string;
  environment_id: string;
  connector: string;
  category: string;
  scope: GrantScopeValue;
  task_id: string | null;
  session_id: string | null;
  /** ms, time_limited only. */
  expires_at: number | null;
  approval_id: string;
  created_at: number;
  revoked_at: number | null;
}

/** Not revoked, and not a time-limited grant past its end. */
function inEffect<Q extends { whereNull: any; where: any }>(q: Q, nowMs: number): Q {
  q.whereNull('revoked_at');
  q.where((w: any) => w.whereNull('expires_at').orWhere('expires_at', '>', nowMs));
  return q;
}

export const grantsStore = {
  async insert(db: Queryable, row: GrantRow): Promise<void> {
    await db('grants').insert(row);
  },

  get(db: Queryable, developerId: string, id: string): Promise<GrantRow | undefined> {
    return db<GrantRow>('grants').where({ developer_id: developerId, id }).first();
  },

  /** An environment's grants in effect, oldest first (the order GrantIndex prefers among equals). */
  inEffectFor(db: Queryable, developerId: string, environmentId: string, nowMs: number): Promise<GrantRow[]> {
    const q = db<GrantRow>('grants').where({ developer_id: developerId, environment_id: environmentId });
    return inEffect(q, nowMs).orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]);
  },

  /** Newest first, grants in effect only. */
  async list(db: Queryable, developerId: string, opts: { environmentId?: string; limit: number; after: string | null; nowMs: number }): Promise<GrantRow[]> {
    const q = db<GrantRow>('grants').where({ developer_id: developerId });
    if (opts.environmentId !== undefined) q.where('environment_id', opts.environmentId);
    inEffect(q, opts.nowMs);
    await applyKeysetAfter(db, q, 'grants', 'created_at', opts.after, 'desc', { developer_id: developerId });
    return q.limit(opts.limit + 1);
  },

  /** Idempotent: only a grant not yet revoked changes. Returns rows updated. */
  revoke(db: Queryable, developerId: string, id: string, nowMs: number): Promise<number> {
    return db('grants').where({ developer_id: developerId, id }).whereNull('revoked_at').update({ revoked_at: nowMs });
  },
};
