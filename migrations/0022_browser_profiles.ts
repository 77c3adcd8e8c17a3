import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Browser profiles (issue 14, item 1): a signed-in browser state per end user and name.
 * `live_key` is SHA-256(end_user_id, name) while the profile is not deleted, NULL after:
 * the unique index makes the name unique per end user among live profiles on both engines
 * (as environments' live_end_user_id does). `state_enc` is the Playwright storageState,
 * envelope-encrypted; deleting a profile erases it.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'browser_profiles', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.string('name', 200).notNullable();
    t.string('live_key', 64).nullable();
    t.integer('version').notNullable().defaultTo(0);
    t.text('state_enc', 'longtext').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('deleted_at').nullable();
    t.unique(['developer_id', 'live_key']);
    t.index(['developer_id', 'created_at', 'id']);
    t.index(['developer_id', 'end_user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('browser_profiles');
}
