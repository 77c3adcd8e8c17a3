import type { Knex } from 'knex';

/**
 * `redacted`: the gateway replaced a real value in the upstream's answer before the agent
 * got it (issue 9, hole 1). Hashed into the chain only when true (audit/chain.ts), so the
 * entries written before this column keep their hashes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.boolean('redacted').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.dropColumn('redacted');
  });
}
