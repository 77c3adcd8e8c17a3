import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Hosts that run environments (issue 12). A host registers its capacity and heartbeats;
 * placement locks the host's row, sums what its environments hold and sets the
 * environment's host_id in the same transaction, so two placements never overbook it.
 * `capabilities` is what the host measured it can isolate (namespaces, cgroup controllers,
 * the sealed network): JSON, shown as measured, never assumed.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'hosts', (t) => {
    t.string('id', 40).primary();
    t.string('name', 200).notNullable();
    t.string('driver', 20).notNullable();
    t.integer('cpus').notNullable();
    t.integer('memory_mib').notNullable();
    t.text('capabilities').notNullable();
    t.string('status', 20).notNullable();
    t.bigInteger('started_at').notNullable();
    t.bigInteger('last_heartbeat_at').notNullable();
    t.bigInteger('created_at').notNullable();
  });
  await knex.schema.alterTable('environments', (t) => {
    t.index(['host_id', 'state']);
    t.index(['state', 'desired_state']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.dropIndex(['host_id', 'state']);
    t.dropIndex(['state', 'desired_state']);
  });
  await knex.schema.dropTable('hosts');
}
