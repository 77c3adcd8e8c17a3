import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Usage limits (issue 13, item 5): running seconds are metered per developer and calendar
 * month (UTC); a developer may set a limit on them. `metered_at` is where the meter last
 * counted a running environment up to.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'usage_limits', (t) => {
    t.string('developer_id', 40).primary();
    t.bigInteger('running_seconds').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  await createTable(knex, 'usage_counters', (t) => {
    t.string('developer_id', 40).notNullable();
    t.string('period', 7).notNullable();
    t.bigInteger('running_ms').notNullable().defaultTo(0);
    t.primary(['developer_id', 'period']);
  });
  await knex.schema.alterTable('environments', (t) => {
    t.bigInteger('metered_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.dropColumn('metered_at');
  });
  await knex.schema.dropTable('usage_counters');
  await knex.schema.dropTable('usage_limits');
}
