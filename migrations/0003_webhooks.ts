import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Webhooks: the developer's endpoint (one per developer), the transactional outbox of
 * events, and the log of delivery attempts. Times are BIGINT ms of service time.
 *
 * webhook_events.body is the exact envelope text sent on every attempt, built once when
 * the event is queued so retries keep the id and the bytes. The delivery columns
 * (status, attempts, next_attempt_at, last_attempt_at, delivered_at, locked_until) are
 * there for the delivery job: "due" is status = 'pending' AND next_attempt_at <= now,
 * one range on webhook_events_due_idx.
 */
const ID = 40;

/** utf8mb4_bin on MySQL, as in 0001: knex would otherwise pick a case-insensitive collation. */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'webhook_endpoints', (t) => {
    t.string('developer_id', ID).primary().references('developers.id');
    t.string('url', 2048).notNullable();
    // Keyring blobs bound to the developer (webhooks/endpoints.service.ts); never plaintext.
    t.text('secret_enc').notNullable();
    // First characters of the secret (`whsec_ab12`), for recognising it in the console.
    t.string('secret_prefix', 16).notNullable();
    t.text('previous_secret_enc').nullable();
    t.bigInteger('previous_secret_expires_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });

  await createTable(knex, 'webhook_events', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable();
    t.string('environment_id', ID).nullable();
    t.string('type', 100).notNullable();
    // mediumtext on MySQL: data payloads (summaries) may pass TEXT's 64 KiB.
    t.text('body', 'mediumtext').notNullable();
    t.bigInteger('created_at').notNullable();
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.bigInteger('next_attempt_at').nullable();
    t.bigInteger('last_attempt_at').nullable();
    t.bigInteger('delivered_at').nullable();
    t.bigInteger('locked_until').nullable();
    t.index(['status', 'next_attempt_at'], 'webhook_events_due_idx');
    t.index(['developer_id', 'created_at', 'id'], 'webhook_events_developer_idx');
  });

  await createTable(knex, 'webhook_deliveries', (t) => {
    t.string('id', ID).primary();
    t.string('event_id', ID).notNullable();
    t.string('developer_id', ID).notNullable();
    // The URL this attempt went to (the endpoint's URL may change between attempts).
    t.string('url', 2048).nullable();
    t.bigInteger('attempted_at').notNullable();
    // `succeeded` (a 2xx) or `failed`; the list filter of GET /v1/webhook-deliveries.
    t.string('status', 20).notNullable();
    t.integer('status_code').nullable();
    t.string('error', 500).nullable();
    t.integer('duration_ms').notNullable();
    t.bigInteger('next_attempt_at').nullable();
    t.index(['developer_id', 'attempted_at', 'id'], 'webhook_deliveries_developer_idx');
    t.index(['event_id', 'attempted_at'], 'webhook_deliveries_event_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['webhook_deliveries', 'webhook_events', 'webhook_endpoints']) {
    await knex.schema.dropTableIfExists(t);
  }
}
