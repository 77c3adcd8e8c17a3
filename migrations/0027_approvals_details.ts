import type { Knex } from 'knex';

/**
 * What a held request would do, decoded for the console's approval card (issue 15, item 2):
 * JSON of policy-engine/describe.ts RequestDetails (bounded: 12 fields of at most ~540
 * characters), or null. Never carries a credential: it is built from the agent's request
 * before anything is swapped in, with its placeholders hidden.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.text('details').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.dropColumn('details');
  });
}
