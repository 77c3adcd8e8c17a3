import type { Db } from './db.js';

/**
 * One dedicated MySQL connection that runs a whole transaction script in ONE round trip
 * (`START TRANSACTION; ...; COMMIT` as one multi-statement query). For the audit writer's
 * appends, where each answer of the gateway waits for a commit and five round trips of
 * ~0.25 ms each made the commit the gateway's bottleneck (docs/performance.md).
 *
 * Multi-statements are enabled on this connection only, never on the knex pool, and only
 * statements built here with `?` placeholders run on it. Values are escaped client-side by
 * mysql2 (sqlstring), which assumes backslash escapes: the session's sql_mode has
 * NO_BACKSLASH_ESCAPES removed when the connection opens, so no server setting can turn an
 * escaped value into SQL; STRICT_ALL_TABLES is added, so a NULL written to a NOT NULL
 * column is an error that stops the script (the audit append's head guard relies on it).
 *
 * The server stops a multi-statement at its first error, leaving the transaction open:
 * run() then rolls back (or drops the connection if that fails too) before rethrowing, so
 * the next script starts clean. A connection that failed is replaced on the next call.
 */
interface Mysql2Connection {
  query(sql: string, values?: unknown[]): Promise<unknown>;
  destroy(): void;
  on(event: 'error', fn: (err: Error) => void): void;
}

export class MysqlScriptRunner {
  #conn: Promise<Mysql2Connection> | null = null;
  #busy: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: Db) {}

  #connect(): Promise<Mysql2Connection> {
    if (!this.#conn) {
      const cfg = this.db.client.config.connection as Record<string, unknown>;
      this.#conn = (async () => {
        const mysql = (await import('mysql2/promise')).default;
        const conn = (await mysql.createConnection({
          host: cfg.host as string, port: cfg.port as number, user: cfg.user as string, password: cfg.password as string,
          database: cfg.database as string, charset: 'utf8mb4', timezone: 'Z', supportBigNumbers: true, bigNumberStrings: false,
          multipleStatements: true,
        })) as unknown as Mysql2Connection;
        conn.on('error', () => this.#drop());
        await conn.query("SET SESSION sql_mode = CONCAT(REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', ''), ',STRICT_ALL_TABLES')");
        return conn;
      })();
      this.#conn.catch(() => this.#drop());
    }
    return this.#conn;
  }

  #drop(): void {
    const c = this.#conn;
    this.#conn = null;
    void c?.then((conn) => conn.destroy(), () => {});
  }

  /**
   * Runs `START TRANSACTION; <statements>; COMMIT` in one round trip, one script at a time:
   * `build` is called when this script's turn comes (after the previous one committed or
   * failed), so it can build on what the previous one wrote.
   */
  run<T>(build: () => Promise<{ statements: string[]; values: unknown[]; result: T }>): Promise<T> {
    const next = this.#busy.then(async () => {
      const b = await build();
      await this.#runNow(b.statements, b.values);
      return b.result;
    });
    this.#busy = next.catch(() => {});
    return next;
  }

  async #runNow(statements: string[], values: unknown[]): Promise<void> {
    const conn = await this.#connect();
    try {
      await conn.query(['START TRANSACTION', ...statements, 'COMMIT'].join(';\n'), values);
    } catch (err) {
      try {
        await conn.query('ROLLBACK');
      } catch {
        this.#drop();
      }
      throw err;
    }
  }

  close(): void {
    this.#drop();
  }
}
