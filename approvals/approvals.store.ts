import type { Queryable } from '../store/db.js';
import { applyKeysetAfter } from '../store/keyset.js';

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired';
export type DecidedVia = 'signature' | 'api_key' | 'console' | 'slack';

export interface ApprovalRow {
  id: string;
  developer_id: string;
  environment_id: string;
  connector: string;
  category: string;
  method: string;
  host: string;
  path: string;
  summary: string;
  task_id: string | null;
  session_id: string | null;
  max_scope: string;
  /** As stored; a `pending` row whose expires_at has passed reads as `expired` (see effectiveStatus). */
  status: ApprovalStatus;
  scope: string | null;
  decided_via: DecidedVia | null;
  /** The team member who decided in the console (issue 15). */
  decided_by?: string | null;
  /** JSON of the request's decoded details for the console (policy-engine describeRequest), or null. */
  details?: string | null;
  /** JSON of the request's facts (policy-engine RequestFacts; migration 0032), or null: what a decision's limits must cover. */
  facts?: string | null;
  decided_at: number | null;
  grant_id: string | null;
  /**
   * The node whose proxy holds the agent's request (hosts/nodes.service.ts; migration 0029):
   * a decision made on another node pokes it. Null for old rows and processes without a node.
   */
  held_by?: string | null;
  /** The MCP tool(s) of the request (issue 28; migration 0036), or null. */
  tool?: string | null;
  expires_at: number;
  created_at: number;
}

/** The columns a waiter needs to learn an outcome. */
export type ApprovalOutcomeRow = Pick<ApprovalRow, 'id' | 'status' | 'scope' | 'grant_id' | 'expires_at'>;

export const approvalsStore = {
  async insert(db: Queryable, row: ApprovalRow): Promise<void> {
    await db('approvals').insert(row);
  },

  get(db: Queryable, developerId: string, id: string): Promise<ApprovalRow | undefined> {
    return db<ApprovalRow>('approvals').where({ developer_id: developerId, id }).first();
  },

  /** By id alone: signed callbacks learn the developer from the approval. */
  getById(db: Queryable, id: string): Promise<ApprovalRow | undefined> {
    return db<ApprovalRow>('approvals').where({ id }).first();
  },

  outcomes(db: Queryable, ids: string[]): Promise<ApprovalOutcomeRow[]> {
    return db<ApprovalRow>('approvals').whereIn('id', ids).select('id', 'status', 'scope', 'grant_id', 'expires_at');
  },

  /**
   * Newest first. `status` filters by the status a reader sees: a pending row past its
   * expiry counts as expired, not pending.
   */
  async list(
    db: Queryable,
    developerId: string,
    opts: { status?: ApprovalStatus; environmentId?: string; limit: number; after: string | null; nowMs: number },
  ): Promise<ApprovalRow[]> {
    const q = db<ApprovalRow>('approvals').where({ developer_id: developerId });
    if (opts.environmentId !== undefined) q.where('environment_id', opts.environmentId);
    if (opts.status === 'pending') q.where('status', 'pending').where('expires_at', '>', opts.nowMs);
    else if (opts.status === 'expired') {
      q.where((w) => w.where('status', 'expired').orWhere((w2) => w2.where('status', 'pending').where('expires_at', '<=', opts.nowMs)));
    } else if (opts.status !== undefined) q.where('status', opts.status);
    await applyKeysetAfter(db, q, 'approvals', 'created_at', opts.after, 'desc', { developer_id: developerId });
    return q.limit(opts.limit + 1);
  },

  /**
   * The decision, atomically: only a row still pending and not past its expiry changes, so
   * of two concurrent decisions exactly one updates a row. Returns rows updated (0 or 1).
   */
  decide(
    db: Queryable,
    id: string,
    nowMs: number,
    patch: Pick<ApprovalRow, 'status' | 'scope' | 'decided_via' | 'decided_at' | 'grant_id' | 'decided_by'>,
  ): Promise<number> {
    return db('approvals').where({ id, status: 'pending' }).where('expires_at', '>', nowMs).update(patch);
  },

  /** Ids of pending approvals whose expiry has passed (the sweep's work). */
  async duePending(db: Queryable, nowMs: number, limit: number): Promise<string[]> {
    const rows = await db('approvals').where('status', 'pending').where('expires_at', '<=', nowMs).orderBy('expires_at').limit(limit).select('id');
    return rows.map((r: { id: string }) => r.id);
  },

  /** Marks the given approvals expired if they are still pending and past expiry. */
  expire(db: Queryable, ids: string[], nowMs: number): Promise<number> {
    return db('approvals').whereIn('id', ids).where('status', 'pending').where('expires_at', '<=', nowMs).update({ status: 'expired' });
  },
};
