import type { Knex } from 'knex';

/**
 * Where a secret may be swapped into a request (issue 9, hole 1). By default only the
 * Authorization header; `inject` (JSON array of places, NULL when none) names more, and
 * `allow_minting` lets the secret reach endpoints that mint new credentials
 * (docs/secrets-egress.md). Existing secrets get neither: the safe default.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('secrets', (t) => {
    t.text('inject').nullable();
    t.boolean('allow_minting').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('secrets', (t) => {
    t.dropColumn('inject');
    t.dropColumn('allow_minting');
  });
}
