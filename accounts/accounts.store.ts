import type { Queryable } from '../store/db.js';

export interface DeveloperRow {
  id: string;
  name: string;
  default_agent_version: string | null;
  egress_allow: string | null;
  created_at: number;
}

export interface ApiKeyRow {
  id: string;
  developer_id: string;
  key_hash: string;
  last4: string;
  label: string | null;
  created_at: number;
  revoked_at: number | null;
}

export const accountsStore = {
  getDeveloper(db: Queryable, id: string): Promise<DeveloperRow | undefined> {
    return db<DeveloperRow>('developers').where({ id }).first();
  },
  async insertDeveloper(db: Queryable, row: DeveloperRow): Promise<void> {
    await db('developers').insert(row);
  },
  async updateDeveloper(db: Queryable, id: string, patch: Partial<DeveloperRow>): Promise<void> {
    await db('developers').where({ id }).update(patch);
  },
  async insertKey(db: Queryable, row: ApiKeyRow): Promise<void> {
    await db('api_keys').insert(row);
  },
  keyByHash(db: Queryable, keyHash: string): Promise<ApiKeyRow | undefined> {
    return db<ApiKeyRow>('api_keys').where({ key_hash: keyHash }).first();
  },
  keyById(db: Queryable, id: string): Promise<ApiKeyRow | undefined> {
    return db<ApiKeyRow>('api_keys').where({ id }).first();
  },
  listKeys(db: Queryable, developerId?: string): Promise<ApiKeyRow[]> {
    const q = db<ApiKeyRow>('api_keys').orderBy([{ column: 'created_at' }, { column: 'id' }]);
    return developerId ? q.where({ developer_id: developerId }) : q;
  },
  async revokeKey(db: Queryable, id: string, at: number): Promise<number> {
    return db('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at });
  },
};
