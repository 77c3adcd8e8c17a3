import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Counts for `count_over` rule conditions (issue 26, item 1; policies/rate-counts.store.ts).
 *
 * - policy_rate_events: one row per forwarded request that some count_over rule of its
 *   environment's policy counts (connector and category as classified, service time). A
 *   rule's count is the rows of its scope (the environment, or every environment of the
 *   end user) in its rolling window. Rows older than the longest window (a day) are
 *   deleted as the scope writes.
 * - policy_rate_locks: one row per scope (`env:<id>`, `eu:<developer>:<end user>`), updated
 *   first in the transaction that counts and records a request, so two nodes never both
 *   see the last free place (the row lock on MySQL, the write lock on SQLite).
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'policy_rate_events', (t) => {
    t.increments('id').primary();
    t.string('developer_id', 40).notNullable();
    t.string('environment_id', 40).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.string('connector', 100).notNullable();
    t.string('category', 32).notNullable();
    t.bigInteger('at').notNullable();
    t.index(['environment_id', 'at'], 'policy_rate_events_env_idx');
    t.index(['developer_id', 'end_user_id', 'at'], 'policy_rate_events_eu_idx');
  });
  await createTable(knex, 'policy_rate_locks', (t) => {
    t.string('scope_key', 300).primary();
    t.bigInteger('touched_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('policy_rate_locks');
  await knex.schema.dropTable('policy_rate_events');
}
