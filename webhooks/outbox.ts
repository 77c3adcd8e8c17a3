import type { Knex } from 'knex';
import type { Queryable } from '../store/db.js';
import { buildEnvelope } from './envelope.js';
import { endpointsStore } from './endpoints.store.js';
import { eventsStore } from './events.store.js';
import { announceEnqueued } from './notifier.js';

export interface OutboxEvent {
  developerId: string;
  /** e.g. `approval.requested`, `connection.created` (service.md, Events; all listed with their data in webhooks/event-types.ts). */
  type: string;
  environmentId: string | null;
  data: Record<string, unknown>;
  /** Service time (clock.nowMs()); becomes the envelope's `created`. */
  createdAtMs: number;
}

/** The outermost transaction of `trx` (a nested one commits only with its parent), or null on the pool. */
function outermost(trx: Queryable): Knex.Transaction | null {
  const t = trx as Partial<Knex.Transaction>;
  if (!t.isTransaction) return null;
  let top = trx as Knex.Transaction;
  while (top.parentTransaction) top = top.parentTransaction;
  return top;
}

/**
 * Writes one event in the caller's transaction if the developer has a webhook URL set;
 * returns the evt_ id, or null when no URL is set (nothing queued: service.md "If none is
 * set, no webhook is sent").
 *
 * Call it inside the same transaction that makes the change the event reports (the
 * approval row, the connection row): the event then exists exactly when the change
 * committed, and a rollback takes both. Delivery (webhooks/delivery.service.ts) reads due
 * rows from webhook_events; the envelope text is fixed here so every retry sends identical
 * bytes.
 * Once the caller's transaction commits, this process's delivery worker is told
 * (webhooks/notifier.ts) and attempts it at once; a rollback tells nobody.
 */
export async function enqueueEvent(trx: Queryable, e: OutboxEvent): Promise<string | null> {
  if (!(await endpointsStore.exists(trx, e.developerId))) return null;
  const { envelope, body } = buildEnvelope({
    type: e.type,
    createdAtMs: e.createdAtMs,
    environmentId: e.environmentId,
    data: e.data,
  });
  await eventsStore.insert(trx, {
    id: envelope.id,
    developer_id: e.developerId,
    environment_id: e.environmentId,
    type: e.type,
    body,
    created_at: e.createdAtMs,
    status: 'pending',
    attempts: 0,
    next_attempt_at: e.createdAtMs,
    last_attempt_at: null,
    delivered_at: null,
    locked_until: null,
  });
  const notice = { eventId: envelope.id, developerId: e.developerId };
  const tx = outermost(trx);
  if (!tx) announceEnqueued(notice);
  else if (tx.executionPromise) {
    // Settles after COMMIT (or ROLLBACK). The rejection belongs to the caller of
    // transaction(); this derived promise only swallows its own copy.
    tx.executionPromise.then(() => announceEnqueued(notice), () => {});
  }
  return envelope.id;
}
