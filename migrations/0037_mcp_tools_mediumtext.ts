import type { Knex } from 'knex';

/**
 * mcp_servers.tools holds JSON of up to MAX_MAPPED_TOOLS (1,000) tool names of up to 128
 * characters with their categories, about 150 KB: past TEXT's 64 KiB on MySQL, where the
 * insert failed (a 500 for a valid registration; a fourth review). MEDIUMTEXT on MySQL;
 * SQLite's TEXT has no such limit.
 */
function isMysql(knex: Knex): boolean {
  return knex.client.config.client === 'mysql2';
}

export async function up(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  await knex.raw('ALTER TABLE ?? MODIFY ?? MEDIUMTEXT NOT NULL', ['mcp_servers', 'tools']);
}

export async function down(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  await knex.raw('ALTER TABLE ?? MODIFY ?? TEXT NOT NULL', ['mcp_servers', 'tools']);
}
