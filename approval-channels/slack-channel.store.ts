import type { Queryable } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';

/** A developer's Slack approval channel (slack_channels, migrations/0035). Secrets sealed. */
export interface SlackChannelRow {
  developer_id: string;
  bot_token_enc: string;
  signing_secret_enc: string;
  channel_id: string;
  api_base_url: string;
  created_at: number;
  updated_at: number;
}

/** The only code that queries slack_channels and slack_used_signatures. */
export const slackChannelStore = {
  async get(db: Queryable, developerId: string): Promise<SlackChannelRow | undefined> {
    const r = await db<SlackChannelRow>('slack_channels').where({ developer_id: developerId }).first();
    return r ? { ...r, created_at: Number(r.created_at), updated_at: Number(r.updated_at) } : undefined;
  },

  async exists(db: Queryable, developerId: string): Promise<string | null> {
    const r = await db('slack_channels').where({ developer_id: developerId }).first('channel_id');
    return r ? String(r.channel_id) : null;
  },

  /** Insert or replace; created_at is kept on a replace. */
  async upsert(db: Queryable, row: SlackChannelRow): Promise<void> {
    const n = await db('slack_channels').where({ developer_id: row.developer_id }).update({
      bot_token_enc: row.bot_token_enc, signing_secret_enc: row.signing_secret_enc, channel_id: row.channel_id,
      api_base_url: row.api_base_url, updated_at: row.updated_at,
    });
    if (n > 0) return;
    try {
      await db('slack_channels').insert(row);
    } catch (err) {
      // Two first PUTs at once: the other one inserted; this one replaces it.
      if (!isUniqueViolation(err)) throw err;
      await db('slack_channels').where({ developer_id: row.developer_id }).update({
        bot_token_enc: row.bot_token_enc, signing_secret_enc: row.signing_secret_enc, channel_id: row.channel_id,
        api_base_url: row.api_base_url, updated_at: row.updated_at,
      });
    }
  },

  async remove(db: Queryable, developerId: string): Promise<number> {
    return db('slack_channels').where({ developer_id: developerId }).delete();
  },

  /**
   * Records an interactivity signature as used; false when it already was. One INSERT on
   * the primary key, so of two concurrent uses (in any process) exactly one gets true.
   */
  async useSignature(db: Queryable, digest: string, tSecs: number, now: number): Promise<boolean> {
    try {
      await db('slack_used_signatures').insert({ digest, t_secs: tSecs, created_at: now });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  },

  pruneSignatures(db: Queryable, beforeSecs: number): Promise<number> {
    return db('slack_used_signatures').where('t_secs', '<', beforeSecs).delete();
  },
};
