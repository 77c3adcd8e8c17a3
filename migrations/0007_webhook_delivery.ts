import type { Knex } from 'knex';

/**
 * Webhook delivery (webhooks/delivery.service.ts). 0003 gave webhook_events a lease
 * (`locked_until`); this adds whose lease it is.
 *
 * A worker claims due events with one conditional UPDATE that sets `locked_until` (the
 * lease) and `lock_token` (random, one per claim), then reads back the rows carrying its
 * token: several workers on one MySQL never get the same event from one claim, and a
 * worker that lost its lease (it expired while the attempt hung, another worker took the
 * event) cannot overwrite the newer worker's outcome, because every write of an outcome is
 * conditional on the token. A worker killed mid-attempt leaves the lease behind; once
 * `locked_until` passes, the next claim takes the event again (at least once).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_events', (t) => {
    t.string('lock_token', 40).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_events', (t) => {
    t.dropColumn('lock_token');
  });
}
