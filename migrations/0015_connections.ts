import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Connections (service.md "Connection"): one end user's authorization at one provider.
 * Tokens are envelope blobs (context `connection:<id>:access|refresh`), erased on revoke.
 * At most one active connection per (developer, end user, provider): authorizing again
 * revokes the old one in the same transaction.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'connections', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.string('provider', 16).notNullable();
    t.string('account', 320).nullable();
    t.text('connectors').notNullable();
    t.text('scopes').notNullable();
    t.string('status', 16).notNullable();
    t.text('access_token_enc').nullable();
    t.text('refresh_token_enc').nullable();
    t.bigInteger('access_expires_at').nullable();
    t.string('client_source', 16).notNullable();
    t.string('error', 255).nullable();
    t.string('replaced_by', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['developer_id', 'end_user_id', 'provider', 'status']);
    t.index(['developer_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('connections');
}
