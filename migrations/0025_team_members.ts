import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * The console's team members (issue 15, item 1): each with their own login (a scrypt
 * password hash, or a one-time sign-in link), and their sessions. Tokens are stored as
 * SHA-256 only; a member belongs to one developer and sees nothing of another's.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'team_members', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('email', 320).notNullable();
    t.string('name', 200).notNullable();
    t.string('password_hash', 300).nullable();
    t.bigInteger('created_at').notNullable();
    t.unique(['developer_id', 'email']);
    t.index(['email']);
  });
  await createTable(knex, 'console_sessions', (t) => {
    t.string('token_hash', 64).primary();
    t.string('member_id', 40).notNullable();
    t.string('developer_id', 40).notNullable();
    t.string('csrf', 64).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.index(['member_id']);
  });
  await createTable(knex, 'console_sign_in_links', (t) => {
    t.string('token_hash', 64).primary();
    t.string('member_id', 40).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at').nullable();
    t.index(['member_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('console_sign_in_links');
  await knex.schema.dropTable('console_sessions');
  await knex.schema.dropTable('team_members');
}
