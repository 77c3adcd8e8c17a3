import type { Queryable } from '../store/db.js';
import { deleteInBatches, type PruneOptions } from '../store/prune.js';

/**
 * `pending`: waiting for its next attempt (next_attempt_at). `delivered`: a 2xx came back.
 * `failed`: the 24-hour retry window ran out. `cancelled`: the endpoint was removed
 * before the event was delivered ("no further webhooks").
 */
export type WebhookEventStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

export interface WebhookEventRow {
  id: string;
  developer_id: string;
  environment_id: string | null;
  type: string;
  /** The exact JSON text sent on every attempt. */
  body: string;
  created_at: number;
  status: WebhookEventStatus;
  attempts: number;
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  delivered_at: number | null;
  /** A delivery worker's claim; another worker skips the row until this passes. */
  locked_until: number | null;
  /** Which claim holds the lease (migrations/0007); outcomes are written only with it. */
  lock_token?: string | null;
}

/** What a delivery worker needs of a claimed event. */
export type ClaimedEventRow = Pick<WebhookEventRow, 'id' | 'developer_id' | 'type' | 'body' | 'created_at' | 'attempts'>;

/** The columns an attempt's outcome sets (webhooks/delivery.service.ts). */
export type EventOutcomePatch = Pick<WebhookEventRow, 'status' | 'next_attempt_at' | 'last_attempt_at' | 'delivered_at'> & { attempts: number };

/** Statuses an event never leaves: what retention may delete. */
const FINISHED: readonly WebhookEventStatus[] = ['delivered', 'failed', 'cancelled'];

const NUMERIC = ['created_at', 'attempts', 'next_attempt_at', 'last_attempt_at', 'delivered_at', 'locked_until'] as const;

function normalize(r: WebhookEventRow): WebhookEventRow {
  const out = { ...r };
  for (const k of NUMERIC) if (out[k] != null) (out as Record<string, unknown>)[k] = Number(out[k]);
  return out;
}

/** The only code that queries webhook_events (the transactional outbox). */
export const eventsStore = {
  async insert(db: Queryable, row: WebhookEventRow): Promise<void> {
    await db('webhook_events').insert(row);
  },
  /** Events still to deliver (webhook_events_due_idx: a range of the index, not the table). */
  async countPending(db: Queryable): Promise<number> {
    const row = await db('webhook_events').where('status', 'pending').count({ n: '*' }).first();
    return Number((row as { n?: number | string } | undefined)?.n ?? 0);
  },
  async get(db: Queryable, id: string): Promise<WebhookEventRow | null> {
    const row = await db<WebhookEventRow>('webhook_events').where({ id }).first();
    return row ? normalize(row) : null;
  },
  async listForDeveloper(db: Queryable, developerId: string): Promise<WebhookEventRow[]> {
    const rows = await db<WebhookEventRow>('webhook_events').where({ developer_id: developerId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
    return rows.map(normalize);
  },
  /**
   * Up to `limit` events due by `nowMs` (pending, next_attempt_at passed, lease free or
   * expired), oldest due first, skipping the developers listed (those at their
   * concurrency cap in this worker). A plain read: claim() decides who gets them.
   */
  async dueCandidates(db: Queryable, nowMs: number, limit: number, skipDevelopers: readonly string[]): Promise<Array<{ id: string; developer_id: string }>> {
    const q = db('webhook_events')
      .select('id', 'developer_id')
      .where('status', 'pending')
      .andWhere('next_attempt_at', '<=', nowMs)
      .andWhere((w) => w.whereNull('locked_until').orWhere('locked_until', '<=', nowMs))
      .orderBy([{ column: 'next_attempt_at' }, { column: 'id' }])
      .limit(limit);
    if (skipDevelopers.length > 0) q.whereNotIn('developer_id', [...skipDevelopers]);
    return q;
  },
  /**
   * Takes the lease on those of `ids` still free: one conditional UPDATE, so of several
   * workers (processes) racing for an event exactly one gets it. Returns the rows this
   * claim got (read back by the token).
   */
  async claim(db: Queryable, ids: readonly string[], nowMs: number, leaseUntilMs: number, token: string): Promise<ClaimedEventRow[]> {
    if (ids.length === 0) return [];
    const n = await db('webhook_events')
      .whereIn('id', [...ids])
      .andWhere('status', 'pending')
      .andWhere((w) => w.whereNull('locked_until').orWhere('locked_until', '<=', nowMs))
      .update({ locked_until: leaseUntilMs, lock_token: token });
    if (n === 0) return [];
    const rows = await db<WebhookEventRow>('webhook_events')
      .select('id', 'developer_id', 'type', 'body', 'created_at', 'attempts')
      .whereIn('id', [...ids])
      .andWhere('lock_token', token);
    return rows.map((r) => ({ ...r, created_at: Number(r.created_at), attempts: Number(r.attempts) }));
  },
  /**
   * Writes an attempt's outcome and frees the lease, only while this claim still holds it
   * and the event is still pending (a DELETE of the endpoint may have cancelled it
   * meanwhile). Returns 1 when written, 0 when the lease or the event moved on.
   */
  async finish(db: Queryable, id: string, token: string, patch: EventOutcomePatch): Promise<number> {
    return db('webhook_events')
      .where({ id, lock_token: token, status: 'pending' })
      .update({ ...patch, locked_until: null, lock_token: null });
  },
  /** Gives a claimed event back untouched (this worker stops before attempting it). */
  async releaseClaim(db: Queryable, id: string, token: string): Promise<number> {
    return db('webhook_events').where({ id, lock_token: token }).update({ locked_until: null, lock_token: null });
  },
  /** The endpoint was gone at send time: no attempt, no further webhooks for this event. */
  async cancelClaimed(db: Queryable, id: string, token: string): Promise<number> {
    return db('webhook_events')
      .where({ id, lock_token: token, status: 'pending' })
      .update({ status: 'cancelled', next_attempt_at: null, locked_until: null, lock_token: null });
  },
  /**
   * Retention: deletes the events that are over (delivered, failed, cancelled) and were
   * created before `beforeMs`, in batches (webhook_events_retention_idx, migrations/0012).
   * `beforeDelete` gets each batch's ids first (their delivery attempts go before them).
   * A pending event is never deleted, however old.
   */
  async pruneFinished(db: Queryable, beforeMs: number, opts: PruneOptions & { beforeDelete?: (ids: string[]) => Promise<void> } = {}): Promise<number> {
    return deleteInBatches(db, 'webhook_events', (q) => q.whereIn('status', FINISHED).andWhere('created_at', '<', beforeMs), opts);
  },
  /** Removing the endpoint stops every webhook not yet delivered. */
  async cancelPending(db: Queryable, developerId: string): Promise<number> {
    return db('webhook_events')
      .where({ developer_id: developerId, status: 'pending' })
      .update({ status: 'cancelled', next_attempt_at: null, locked_until: null });
  },
};
