import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Browser leases (issue 14, item 2; service.md, Browser lease state table). `write_lock` is
 * the profile id while a write lease on it is pending, active or releasing, NULL otherwise:
 * the unique index is what allows one write lease per profile under any race. The
 * per-developer counter row is locked by every lease create, so the concurrency limits
 * hold under races on MySQL too (SQLite has one writer).
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'browser_leases', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('environment_id', 40).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.string('profile_id', 40).nullable();
    t.string('mode', 10).notNullable();
    t.string('state', 20).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.string('save_outcome', 20).nullable();
    t.boolean('taken_over').notNullable().defaultTo(false);
    t.string('write_lock', 40).nullable().unique();
    t.integer('base_version').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('released_at').nullable();
    t.index(['developer_id', 'created_at', 'id']);
    t.index(['developer_id', 'state']);
    t.index(['profile_id', 'state']);
    t.index(['state', 'expires_at']);
  });
  await createTable(knex, 'browser_lease_counters', (t) => {
    t.string('developer_id', 40).primary();
    t.bigInteger('touched_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('browser_lease_counters');
  await knex.schema.dropTable('browser_leases');
}
