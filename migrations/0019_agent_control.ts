import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * The agent's control socket (issue 13): a schedule may carry the command it runs when it
 * fires (its handler), and keep-awakes are recorded one per grant, so the daily budget is
 * a sum over the last 24 hours and a hold can end with the process that asked for it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('schedules', (t) => {
    t.text('command').nullable();
    t.bigInteger('last_fired_at').nullable();
    t.index(['next_run_at']);
  });
  await createTable(knex, 'keep_awakes', (t) => {
    t.string('id', 40).primary();
    t.string('environment_id', 40).notNullable();
    t.string('developer_id', 40).notNullable();
    t.string('source', 10).notNullable();
    t.integer('seconds').notNullable();
    t.bigInteger('granted_at').notNullable();
    t.bigInteger('until').notNullable();
    /** The requesting process (host pid and its start time), for agent holds. */
    t.integer('pid').nullable();
    t.string('pid_start', 40).nullable();
    t.bigInteger('released_at').nullable();
    t.string('release_reason', 40).nullable();
    t.index(['environment_id', 'granted_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('keep_awakes');
  await knex.schema.alterTable('schedules', (t) => {
    t.dropIndex(['next_run_at']);
    t.dropColumn('command');
    t.dropColumn('last_fired_at');
  });
}
