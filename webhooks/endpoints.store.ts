import { isMysql, type Queryable } from '../store/db.js';

export interface WebhookEndpointRow {
  developer_id: string;
  url: string;
  secret_enc: string;
  secret_prefix: string;
  previous_secret_enc: string | null;
  previous_secret_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The only code that queries webhook_endpoints (one row per developer). */
export const endpointsStore = {
  async get(db: Queryable, developerId: string): Promise<WebhookEndpointRow | null> {
    const row = await db<WebhookEndpointRow>('webhook_endpoints').where({ developer_id: developerId }).first();
    return row ? normalize(row) : null;
  },
  /**
   * True when the developer has an endpoint; cheap enough for every enqueue. On MySQL it
   * is a locking read (LOCK IN SHARE MODE): a concurrent DELETE of the endpoint then
   * waits for the enqueuing transaction and its cancel step sees the new event, instead
   * of an event slipping in after "no further webhooks". SQLite serialises writers anyway.
   */
  async exists(db: Queryable, developerId: string): Promise<boolean> {
    const q = db('webhook_endpoints').where({ developer_id: developerId }).first('developer_id');
    const row = await (isMysql(db) ? q.forShare() : q);
    return Boolean(row);
  },
  async insert(db: Queryable, row: WebhookEndpointRow): Promise<void> {
    await db('webhook_endpoints').insert(row);
  },
  async update(db: Queryable, developerId: string, patch: Partial<Omit<WebhookEndpointRow, 'developer_id'>>): Promise<number> {
    return db('webhook_endpoints').where({ developer_id: developerId }).update(patch);
  },
  /** Updates only while the stored secret is still `secretEnc` (optimistic rotation). */
  async updateIfSecret(db: Queryable, developerId: string, secretEnc: string, patch: Partial<Omit<WebhookEndpointRow, 'developer_id'>>): Promise<number> {
    return db('webhook_endpoints').where({ developer_id: developerId, secret_enc: secretEnc }).update(patch);
  },
  async delete(db: Queryable, developerId: string): Promise<number> {
    return db('webhook_endpoints').where({ developer_id: developerId }).delete();
  },
};

function normalize(r: WebhookEndpointRow): WebhookEndpointRow {
  return {
    ...r,
    previous_secret_expires_at: r.previous_secret_expires_at == null ? null : Number(r.previous_secret_expires_at),
    created_at: Number(r.created_at),
    updated_at: Number(r.updated_at),
  };
}
