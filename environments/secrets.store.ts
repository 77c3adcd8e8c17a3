import type { Queryable } from '../store/db.js';

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
  count(db: Queryable, developerId: string, scope: string): Promise<number> {
    return db('secrets').where({ developer_id: developerId, scope }).count({ n: '*' }).first().then((r) => Number(r?.n ?? 0));
  },
  async deleteScope(db: Queryable, developerId: string, scope: string): Promise<void> {
    await db('secrets').where({ developer_id: developerId, scope }).delete();
  },
};
