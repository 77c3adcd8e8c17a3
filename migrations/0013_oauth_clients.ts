import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * A developer's own OAuth app per provider (service.md "OAuth client entry"): one row per
 * (developer, provider); a second PUT replaces it. The secret is an envelope blob
 * (lib/crypto.ts Keyring, context `oauth-client:<developer>:<provider>`), never returned.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'oauth_clients', (t) => {
    t.string('developer_id', 40).notNullable();
    t.string('provider', 16).notNullable();
    t.string('client_id', 512).notNullable();
    t.text('client_secret_enc').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['developer_id', 'provider']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('oauth_clients');
}
