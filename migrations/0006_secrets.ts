import type { Knex } from 'knex';

/**
 * Room for the largest values the API accepts, on MySQL/MariaDB (SQLite's TEXT has no
 * length limit, so nothing changes there). A MySQL TEXT column holds 65 535 bytes:
 * - `secrets.value_enc`: a 64 KiB secret value (the limit of `secretRule`) grows by a
 *   third in its base64url envelope (~87 KiB), so it failed with a 500;
 * - `secrets.allowed_hosts`, `environments.egress_allow`, `developers.egress_allow`: up
 *   to 500 host patterns of up to 253 characters (`hostPatternsRule`) are ~128 KiB of JSON.
 * MEDIUMTEXT holds 16 MiB. The tables' utf8mb4_bin collation stays (MODIFY without a
 * charset takes the table's).
 */
const COLUMNS: Array<[table: string, column: string, nullable: boolean]> = [
  ['secrets', 'value_enc', false],
  ['secrets', 'allowed_hosts', false],
  ['environments', 'egress_allow', true],
  ['developers', 'egress_allow', true],
];

function isMysql(knex: Knex): boolean {
  return knex.client.config.client === 'mysql2';
}

export async function up(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  for (const [table, column, nullable] of COLUMNS) {
    await knex.raw(`ALTER TABLE ?? MODIFY ?? MEDIUMTEXT ${nullable ? 'NULL' : 'NOT NULL'}`, [table, column]);
  }
}

export async function down(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  for (const [table, column, nullable] of COLUMNS) {
    await knex.raw(`ALTER TABLE ?? MODIFY ?? TEXT ${nullable ? 'NULL' : 'NOT NULL'}`, [table, column]);
  }
}
