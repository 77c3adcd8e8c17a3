import type { Knex } from 'knex';

/**
 * A host being drained (issue 25, item 5; docs/deploy.md, Draining a host): placement puts
 * nothing new on it, while what it runs keeps running. Set and cleared by the operator
 * (`gateway hosts drain|undrain <id>`); a restart of the host keeps it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('hosts', (t) => {
    t.boolean('draining').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('hosts', (t) => {
    t.dropColumn('draining');
  });
}
