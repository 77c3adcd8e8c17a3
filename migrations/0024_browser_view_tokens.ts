import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Takeover viewer URLs (issue 14, item 4): one-time, valid 10 minutes, a new one per
 * takeover call. Only the token's SHA-256 is stored. `used_at` is set when the viewer's
 * WebSocket is established (opening the page does not consume it); a handback invalidates
 * the unused ones.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'browser_view_tokens', (t) => {
    t.string('token_hash', 64).primary();
    t.string('lease_id', 40).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.bigInteger('invalidated_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['lease_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('browser_view_tokens');
}
