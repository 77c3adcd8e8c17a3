import type { Queryable } from '../store/db.js';
import { applyKeysetAfter } from '../store/keyset.js';
import { deleteInBatches, type PruneOptions } from '../store/prune.js';

export type DeliveryStatus = 'succeeded' | 'failed';
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = Object.freeze(['succeeded', 'failed']);

/** One attempt to deliver one event (webhook_deliveries, migrations/0003). */
export interface DeliveryRow {
  id: string;
  event_id: string;
  developer_id: string;
  /** The URL this attempt went to (the endpoint's URL at send time). */
  url: string | null;
  attempted_at: number;
  status: DeliveryStatus;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  /** When the event is tried again after this attempt; null when this was the last. */
  next_attempt_at: number | null;
}

export type DeliveryListRow = DeliveryRow & { event_type: string | null };

function normalize(r: DeliveryListRow): DeliveryListRow {
  return {
    ...r,
    attempted_at: Number(r.attempted_at),
    status_code: r.status_code == null ? null : Number(r.status_code),
    duration_ms: Number(r.duration_ms),
    next_attempt_at: r.next_attempt_at == null ? null : Number(r.next_attempt_at),
  };
}

/** The only code that queries webhook_deliveries. */
export const deliveriesStore = {
  async insert(db: Queryable, row: DeliveryRow): Promise<void> {
    await db('webhook_deliveries').insert(row);
  },

  /** Retention: every attempt of these events, in batches (webhook_deliveries_event_idx). */
  async deleteForEvents(db: Queryable, eventIds: readonly string[], opts: PruneOptions = {}): Promise<number> {
    return deleteInBatches(db, 'webhook_deliveries', (q) => q.whereIn('event_id', [...eventIds]), opts);
  },

  /**
   * A developer's attempts, newest first (attempted_at, then id), `limit + 1` rows so the
   * caller knows whether a next page exists. `after` is the id of the last attempt of the
   * previous page; an id that is not this developer's gives an empty page.
   */
  async list(
    db: Queryable,
    developerId: string,
    opts: { eventId?: string; status?: DeliveryStatus; limit: number; after: string | null },
  ): Promise<DeliveryListRow[]> {
    const q = db('webhook_deliveries')
      .leftJoin('webhook_events', 'webhook_events.id', 'webhook_deliveries.event_id')
      .select('webhook_deliveries.*', 'webhook_events.type as event_type')
      .where('webhook_deliveries.developer_id', developerId);
    if (opts.eventId !== undefined) q.andWhere('webhook_deliveries.event_id', opts.eventId);
    if (opts.status !== undefined) q.andWhere('webhook_deliveries.status', opts.status);
    await applyKeysetAfter(db, q, 'webhook_deliveries', 'attempted_at', opts.after, 'desc', { developer_id: developerId });
    const rows = (await q.limit(opts.limit + 1)) as DeliveryListRow[];
    return rows.map(normalize);
  },
};
