import type { Knex } from 'knex';

/**
 * End user ids compared exactly on MySQL/MariaDB too (a fourth review). The tables' binary
 * collation pads with spaces when comparing (PAD SPACE): `'bob' = 'bob '` is true, so an
 * environment of end user "bob " was given bob's connections (stand-ins swapped for bob's real
 * tokens), and authorizing "bob " replaced bob's. The end_user_id columns take the binary
 * collation without padding (MariaDB `utf8mb4_nopad_bin`, MySQL 8 `utf8mb4_0900_bin`).
 * SQLite compares exactly already.
 */
const TABLES = ['environments', 'idempotency_keys', 'oauth_states', 'connections', 'browser_profiles', 'browser_leases', 'policy_rate_events'];

function isMysql(knex: Knex): boolean {
  return knex.client.config.client === 'mysql2';
}

async function collation(knex: Knex, names: string[]): Promise<string | null> {
  const [rows] = (await knex.raw('SELECT COLLATION_NAME AS c FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (?, ?)', names)) as [Array<{ c: string }>];
  for (const n of names) if (rows.some((r) => r.c === n)) return n;
  return null;
}

export async function up(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  const c = await collation(knex, ['utf8mb4_nopad_bin', 'utf8mb4_0900_bin']);
  if (c === null) throw new Error('this MySQL has no binary utf8mb4 collation without padding (MariaDB 10.2+ or MySQL 8 is needed)');
  for (const t of TABLES) await knex.raw(`ALTER TABLE ?? MODIFY ?? VARCHAR(200) CHARACTER SET utf8mb4 COLLATE ${c} NOT NULL`, [t, 'end_user_id']);
}

export async function down(knex: Knex): Promise<void> {
  if (!isMysql(knex)) return;
  for (const t of TABLES) await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [t, 'end_user_id']);
}
