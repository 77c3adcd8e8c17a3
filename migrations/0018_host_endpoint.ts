import type { Knex } from 'knex';

/**
 * Where a host serves exec and files for API processes elsewhere (hosts/rpc.ts): its
 * registered endpoint, null for a host no other process can reach.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('hosts', (t) => {
    t.string('endpoint', 300).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('hosts', (t) => {
    t.dropColumn('endpoint');
  });
}
