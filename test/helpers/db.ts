import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
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

/**
 * A database migrated once per test process, which every fresh database copies instead of
 * running each migration again: ~160 fresh databases per run, ~0.4 s of migrations each on
 * MySQL (~0.1 s copied) and ~0.1 s on SQLite (a file copy). MySQL copies each table as
 * SHOW CREATE TABLE gives it (foreign keys included) and the rows of those that have any
 * (knex's migration records); SQLite copies the closed file. Whatever the copy misses shows
 * as a migration left to run: migrateLatest still runs after it, and applies nothing.
 */
interface Template {
  copyInto(url: string): Promise<void>;
  drop(): Promise<void>;
}
let template: Promise<Template> | null = null;

function makeTemplate(): Promise<Template> {
  template ??= (async (): Promise<Template> => {
    const { url, drop } = freshDatabaseUrl();
    const target = parseDatabaseUrl(url)!;
    const db = await createDb(target);
    try {
      await migrateLatest(db);
      if (target.client !== 'mysql') {
        return {
          async copyInto(to: string) {
            const t = parseDatabaseUrl(to);
            if (!t || t.client === 'mysql') throw new Error(`not a SQLite URL: ${to}`);
            copyFileSync(target.filename, t.filename);
          },
          drop,
        };
      }
      const [rows] = (await db.raw('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ? AND table_type = ?', [target.database, 'BASE TABLE'])) as [Array<{ t: string }>];
      const ddl: string[] = [];
      const filled: string[] = [];
      for (const { t } of rows) {
        const [[created]] = (await db.raw('SHOW CREATE TABLE ??', [t])) as [[{ 'Create Table': string }]];
        // A `?` in a definition (a default, a comment) is text, not a binding of knex.raw.
        ddl.push(created['Create Table'].replace(/\?/g, '\\?'));
        if ((await db(t).first(db.raw('1 AS one'))) !== undefined) filled.push(t);
      }
      return {
        async copyInto(to: string) {
          const t = parseDatabaseUrl(to);
          if (!t || t.client !== 'mysql') throw new Error(`not a MySQL URL: ${to}`);
          const k = knexFactory({
            client: 'mysql2',
            connection: { host: t.host, port: t.port, user: t.user, password: t.password, multipleStatements: true },
            pool: { min: 0, max: 1 },
          });
          try {
            await k.raw('CREATE DATABASE ?? CHARACTER SET utf8mb4 COLLATE utf8mb4_bin', [t.database]);
            await k.raw(`USE ??; SET FOREIGN_KEY_CHECKS = 0; ${ddl.join(';\n')}; ${filled.map(() => 'INSERT INTO ?? SELECT * FROM ??.??').join('; ')}; SET FOREIGN_KEY_CHECKS = 1`, [
              t.database, ...filled.flatMap((name) => [name, target.database, name]),
            ]);
          } finally {
            await k.destroy();
          }
        },
        drop,
      };
    } finally {
      await db.destroy();
    }
  })();
  return template;
}

/** Gives a fresh database (a URL from freshDatabaseUrl, nothing created yet) every migration's tables, copied. */
export async function migratedFromTemplate(url: string): Promise<void> {
  await (await makeTemplate()).copyInto(url);
}

/** Drops the template database, if this process made one (the root hook, test/helpers/root-hooks.ts). */
export async function dropTemplate(): Promise<void> {
  const t = template;
  template = null;
  if (t) await (await t.catch(() => null))?.drop();
}

export async function freshDb(): Promise<FreshDb> {
  const { url, drop } = freshDatabaseUrl();
  const target = parseDatabaseUrl(url);
  if (!target) throw new Error(`bad test DATABASE_URL: ${url}`);
  await migratedFromTemplate(url);
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
