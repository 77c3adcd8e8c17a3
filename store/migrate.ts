import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Knex } from 'knex';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

/**
 * Every file in migrations/ named NNNN_<what>.ts (under tsx) or .js (compiled, dist/), in
 * name order; the name knex records has no extension, so a store migrated by either runs
 * the other without re-applying anything. Loading them ourselves (instead of knex's
 * directory loader) keeps TypeScript ESM working under tsx.
 */
class DirectoryMigrationSource implements Knex.MigrationSource<string> {
  async getMigrations(): Promise<string[]> {
    return readdirSync(MIGRATIONS_DIR)
      .filter((f) => /^\d{4}_[a-z0-9_]+\.(ts|js)$/.test(f))
      .sort();
  }
  getMigrationName(migration: string): string {
    return migration.replace(/\.(ts|js)$/, '');
  }
  async getMigration(migration: string): Promise<Knex.Migration> {
    return import(pathToFileURL(join(MIGRATIONS_DIR, migration)).href) as Promise<Knex.Migration>;
  }
}

export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = await db.migrate.latest({ migrationSource: new DirectoryMigrationSource() });
  return applied as string[];
}

/** Migrations this code has that the store has not applied (readiness: "migrations are current"). */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  const [, pending] = (await db.migrate.list({ migrationSource: new DirectoryMigrationSource() })) as [unknown[], Array<string | { file?: string; name?: string }>];
  return pending.map((p) => (typeof p === 'string' ? p : String(p.file ?? p.name)));
}
