import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * One row per authorization link (service.md "Authorization link": valid 10 minutes, single
 * use). Only a SHA-256 of `state` is stored, so a read of the table cannot be turned into a
 * callback. The PKCE verifier the token exchange needs is sealed (envelope encryption).
 * `used_at` makes the link single use; the retention job prunes used and expired rows.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'oauth_states', (t) => {
    t.string('state_hash', 64).primary();
    t.string('developer_id', 40).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.string('provider', 16).notNullable();
    t.text('connectors').notNullable();
    t.text('return_url').notNullable();
    t.text('code_verifier_enc').nullable();
    t.string('client_source', 16).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('oauth_states');
}
