import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { createDb, parseDatabaseUrl, type Db } from '../../store/db.js';
import { migrateLatest } from '../../store/migrate.js';

/**
 * The engine the suite runs against: MySQL/MariaDB when DATABASE_URL names one,
 * SQLite otherwise. Each call makes a fresh, empty, migrated database of its own
 * (a temp file, or a new MySQL database that cleanup() drops).
 */
export function testDatabaseUrlBase(): string {
  return process.env.DATABASE_URL ?? '';
}

export function usingMysql(): boolean {
  return /^(mysql|mariadb):\/\//.test(testDatabaseUrlBase());
}

export interface FreshDb {
  url: string;
  db: Db;
  cleanup(): Promise<void>;
}

/** A fresh database URL (nothing created yet for SQLite; MySQL creates it on connect). */
export function freshDatabaseUrl(): { url: string; drop(): Promise<void> } {
  const base = testDatabaseUrlBase();
  if (usingMysql()) {
    const u = new URL(base.replace(/^mariadb:/, 'mysql:'));
    const name = `${(u.pathname.replace(/^\//, '') || 'gw_test').slice(0, 30)}_${randomBytes(5).toString('hex')}`;
    u.pathname = `/${name}`;
    const url = u.toString();
    return {
      url,
      async drop() {
        const t = parseDatabaseUrl(url);
        if (!t || t.client !== 'mysql') return;
        const k = knexFactory({ client: 'mysql2', connection: { host: t.host, port: t.port, user: t.user, password: t.password }, pool: { min: 0, max: 1 } });
        try {
          await k.raw('DROP DATABASE IF EXISTS ??', [t.database]);
        } finally {
          await k.destroy();
        }
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gw-db-'));
  return {
    url: `sqlite:${join(dir, 'gateway.sqlite')}`,
    async drop() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function freshDb(): Promise<FreshDb> {
  const { url, drop } = freshDatabaseUrl();
  const target = parseDatabaseUrl(url);
  if (!target) throw new Error(`bad test DATABASE_URL: ${url}`);
  const db = await createDb(target);
  await migrateLatest(db);
  return {
    url,
    db,
    async cleanup() {
      await db.destroy();
      await drop();
    },
  };
}
