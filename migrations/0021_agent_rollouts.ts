import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Agent version rollouts (issue 13, item 6; service.md, Versioning): a rollout upgrades
 * every environment of a developer to one version, in batches, and on completion makes it
 * the developer's default. One running rollout per developer (`running_key` is the
 * developer id while running, NULL after: the unique index enforces it).
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'agent_rollouts', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('version', 200).notNullable();
    t.string('status', 20).notNullable();
    t.string('running_key', 40).nullable().unique();
    t.integer('upgraded').notNullable().defaultTo(0);
    t.bigInteger('created_at').notNullable();
    t.bigInteger('completed_at').nullable();
    t.index(['developer_id', 'created_at', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('agent_rollouts');
}
