import type { Knex } from 'knex';

/**
 * Retention of webhook events (issue 10, item 6; docs/retention.md): the job deletes, a
 * batch at a time, events that are over (`delivered`, `failed`, `cancelled`) and older
 * than the window: `status IN (...) AND created_at < ?`. This index makes each batch three
 * index ranges instead of a scan of the table.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_events', (t) => {
    t.index(['status', 'created_at'], 'webhook_events_retention_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_events', (t) => {
    t.dropIndex(['status', 'created_at'], 'webhook_events_retention_idx');
  });
}
