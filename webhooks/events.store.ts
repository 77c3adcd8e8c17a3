import type { Queryable } from '../store/db.js';

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
}

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
  async get(db: Queryable, id: string): Promise<WebhookEventRow | null> {
    const row = await db<WebhookEventRow>('webhook_events').where({ id }).first();
    return row ? normalize(row) : null;
  },
  async listForDeveloper(db: Queryable, developerId: string): Promise<WebhookEventRow[]> {
    const rows = await db<WebhookEventRow>('webhook_events').where({ developer_id: developerId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
    return rows.map(normalize);
  },
  /** Removing the endpoint stops every webhook not yet delivered. */
  async cancelPending(db: Queryable, developerId: string): Promise<number> {
    return db('webhook_events')
      .where({ developer_id: developerId, status: 'pending' })
      .update({ status: 'cancelled', next_attempt_at: null, locked_until: null });
  },
};
