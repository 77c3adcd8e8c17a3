import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import knexFactory, { type Knex } from 'knex';

export type Db = Knex;
export type Tx = Knex.Transaction;
/** Anything a query can run on: the pool or an open transaction. */
export type Queryable = Knex | Knex.Transaction;

export type DbTarget =
  | { client: 'sqlite'; filename: string }
  | { client: 'mysql'; host: string; port: number; user: string; password: string; database: string };

/**
 * Parses DATABASE_URL: `sqlite:<path>` (relative to the working directory, or absolute;
 * `sqlite::memory:` for an in-memory store) or `mysql://user:pass@host:port/db`.
 * Returns null when the URL is neither, so config can name the variable in its error.
 */
export function parseDatabaseUrl(url: string): DbTarget | null {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (!path) return null;
    return { client: 'sqlite', filename: path === ':memory:' ? path : resolve(path) };
  }
  if (/^(mysql|mariadb):\/\//.test(url)) {
    let u: URL;
    try {
      u = new URL(url.replace(/^mariadb:/, 'mysql:'));
    } catch {
      return null;
    }
    const database = decodeURIComponent(u.pathname.replace(/^\//, ''));
    if (!u.hostname || !database || !/^[A-Za-z0-9_$-]+$/.test(database)) return null;
    return {
      client: 'mysql',
      host: u.hostname,
      port: u.port ? Number(u.port) : 3306,
      user: decodeURIComponent(u.username || 'root'),
      password: decodeURIComponent(u.password),
      database,
    };
  }
  return null;
}

export async function createDb(target: DbTarget): Promise<Db> {
  if (target.client === 'sqlite') {
    if (target.filename !== ':memory:') mkdirSync(dirname(target.filename), { recursive: true });
    return knexFactory({
      client: 'better-sqlite3',
      connection: { filename: target.filename },
      useNullAsDefault: true,
      pool: {
        // One connection: better-sqlite3 is synchronous, and SQLite serialises writers
        // anyway. Transactions therefore queue instead of failing with SQLITE_BUSY.
        min: 1,
        max: 1,
        afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
          conn.pragma('journal_mode = WAL');
          conn.pragma('foreign_keys = ON');
          conn.pragma('busy_timeout = 5000');
          conn.pragma('synchronous = NORMAL');
          done(null, conn);
        },
      },
    });
  }
  // The database is created when missing, so a fresh MariaDB works with one URL.
  const bootstrap = knexFactory({
    client: 'mysql2',
    connection: { host: target.host, port: target.port, user: target.user, password: target.password },
    pool: { min: 0, max: 1 },
  });
  try {
    await bootstrap.raw(
      'CREATE DATABASE IF NOT EXISTS ?? CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
      [target.database],
    );
  } finally {
    await bootstrap.destroy();
  }
  return knexFactory({
    client: 'mysql2',
    connection: {
      host: target.host,
      port: target.port,
      user: target.user,
      password: target.password,
      database: target.database,
      charset: 'utf8mb4',
      timezone: 'Z',
      supportBigNumbers: true,
      bigNumberStrings: false,
    },
    pool: { min: 0, max: 20 },
  });
}

export function isMysql(db: Queryable): boolean {
  return (db.client.config.client as string) === 'mysql2';
}

/** True when the error is a unique-constraint violation on either engine. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ER_DUP_ENTRY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Runs fn in a transaction; everything it wrote is rolled back when it throws. */
export function withTx<T>(db: Db, fn: (trx: Tx) => Promise<T>): Promise<T> {
  return db.transaction(fn);
}

/** JSON columns are TEXT on both engines; these keep the conversion in one place. */
export function toJson(value: unknown): string {
  return JSON.stringify(value ?? null);
}
export function fromJson<T>(value: unknown): T {
  if (value == null) return null as T;
  if (typeof value === 'string') return JSON.parse(value) as T;
  return value as T;
}
