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
  /** JSON of the grant's GrantLimits (migration 0032), or null: a grant without limits. */
  limits?: string | null;
  /** Consumed by forwarded requests; counted only on a grant with limits. */
  used_minor_units?: number;
  uses?: number;
  /** The MCP tool(s) it covers (issue 28; migration 0036), or null: not an MCP tool call. */
  tool?: string | null;
}

/** What one forwarded request spends of a grant with limits, and the bounds it must stay within. */
export interface GrantConsumption {
  minor_units: number;
  /** From the grant's limits: the UPDATE matches only while the sum stays within them. */
  total_minor_units?: number;
  max_uses?: number;
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

  /**
   * Spends one use of a grant with limits, atomically (issue 26, item 2): one conditional
   * UPDATE, so of two nodes spending the last of a total at once exactly one matches a row.
   * Only a grant in effect (not revoked, not past its end) is spent. Returns rows updated:
   * 0 means the request is not covered after all.
   */
  consume(db: Queryable, developerId: string, id: string, c: GrantConsumption, nowMs: number): Promise<number> {
    const q = db('grants').where({ developer_id: developerId, id });
    inEffect(q, nowMs);
    if (c.total_minor_units !== undefined) q.whereRaw('used_minor_units + ? <= ?', [c.minor_units, c.total_minor_units]);
    if (c.max_uses !== undefined) q.whereRaw('uses + 1 <= ?', [c.max_uses]);
    return q.update({ used_minor_units: db.raw('used_minor_units + ?', [c.minor_units]), uses: db.raw('uses + 1') });
  },

  /** Idempotent: only a grant not yet revoked changes. Returns rows updated. */
  revoke(db: Queryable, developerId: string, id: string, nowMs: number): Promise<number> {
    return db('grants').where({ developer_id: developerId, id }).whereNull('revoked_at').update({ revoked_at: nowMs });
  },
};
