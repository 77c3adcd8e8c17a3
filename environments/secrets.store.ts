import type { Queryable } from '../store/db.js';
import { isMysql } from '../store/db.js';

export interface SecretRow {
  id: string;
  developer_id: string;
  environment_id: string | null;
  scope: string;
  name: string;
  value_enc: string;
  placeholder: string;
  allowed_hosts: string;
  infrastructure: boolean | number;
  /** JSON array of places (lib/credential-slots.ts), or null: the Authorization header only. */
  inject: string | null;
  allow_minting: boolean | number;
  created_at: number;
  updated_at: number;
}

/** '*' is the developer-level scope; otherwise the environment id. */
export const DEVELOPER_SCOPE = '*';

export const secretsStore = {
  async insert(db: Queryable, row: SecretRow): Promise<void> {
    await db('secrets').insert(row);
  },
  list(db: Queryable, developerId: string, scope: string): Promise<SecretRow[]> {
    return db<SecretRow>('secrets').where({ developer_id: developerId, scope }).orderBy('name');
  },
  get(db: Queryable, developerId: string, scope: string, name: string): Promise<SecretRow | undefined> {
    return db<SecretRow>('secrets').where({ developer_id: developerId, scope, name }).first();
  },
  /** Replaces value, hosts and flag in place: id, placeholder and created_at stay. */
  async update(db: Queryable, id: string, patch: Pick<SecretRow, 'value_enc' | 'allowed_hosts' | 'infrastructure' | 'inject' | 'allow_minting' | 'updated_at'>): Promise<void> {
    await db('secrets').where({ id }).update(patch);
  },
  /** Rows deleted (0 or 1). */
  remove(db: Queryable, developerId: string, scope: string, name: string): Promise<number> {
    return db('secrets').where({ developer_id: developerId, scope, name }).delete();
  },
  count(db: Queryable, developerId: string, scope: string): Promise<number> {
    return db('secrets').where({ developer_id: developerId, scope }).count({ n: '*' }).first().then((r) => Number(r?.n ?? 0));
  },
  async deleteScope(db: Queryable, developerId: string, scope: string): Promise<void> {
    await db('secrets').where({ developer_id: developerId, scope }).delete();
  },
  /** An environment's own secrets and its developer's, in one query (the unique index covers it). */
  forEnvironment(db: Queryable, developerId: string, environmentId: string): Promise<SecretRow[]> {
    return db<SecretRow>('secrets')
      .where({ developer_id: developerId })
      .whereIn('scope', [environmentId, DEVELOPER_SCOPE])
      .orderBy('name');
  },
  /**
   * Serializes developer-level secret writes (count + insert) on MySQL by locking the
   * developer's row for the rest of the transaction; without it two concurrent PUTs could
   * both count 99 and store 101. The `developers` table belongs to accounts/: this only
   * takes the row lock and reads no column. SQLite needs nothing: its single connection
   * runs one transaction at a time.
   */
  async lockDeveloper(db: Queryable, developerId: string): Promise<boolean> {
    const q = db('developers').select('id').where({ id: developerId });
    const row = await (isMysql(db) ? q.forUpdate() : q).first();
    return Boolean(row);
  },
};
