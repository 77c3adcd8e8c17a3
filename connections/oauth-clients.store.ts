import type { Queryable } from '../store/db.js';
import type { Provider } from './providers.js';

export interface OAuthClientRow {
  developer_id: string;
  provider: Provider;
  client_id: string;
  client_secret_enc: string;
  created_at: number;
  updated_at: number;
}

export const oauthClientsStore = {
  list(db: Queryable, developerId: string): Promise<OAuthClientRow[]> {
    return db<OAuthClientRow>('oauth_clients').where({ developer_id: developerId });
  },
  get(db: Queryable, developerId: string, provider: Provider): Promise<OAuthClientRow | undefined> {
    return db<OAuthClientRow>('oauth_clients').where({ developer_id: developerId, provider }).first();
  },
  /** Insert or replace (a second PUT replaces), in the caller's transaction. */
  async upsert(db: Queryable, row: OAuthClientRow): Promise<void> {
    await db('oauth_clients')
      .insert(row)
      .onConflict(['developer_id', 'provider'])
      .merge({ client_id: row.client_id, client_secret_enc: row.client_secret_enc, updated_at: row.updated_at });
  },
};
