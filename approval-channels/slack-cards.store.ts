import type { Queryable } from '../store/db.js';

/**
 * A card and its outbox state (slack_cards, migrations/0035): `version` is what Slack
 * should show, `sent_version` what it shows. `pending`: Slack is behind and the card is due
 * at next_attempt_at. `done`: up to date. `failed`: the retries ran out. `cancelled`: the
 * channel was removed.
 */
export type SlackCardStatus = 'pending' | 'done' | 'failed' | 'cancelled';

export interface SlackCardRow {
  approval_id: string;
  developer_id: string;
  channel_id: string;
  ts: string | null;
  rendered_state: string | null;
  version: number;
  sent_version: number;
  status: SlackCardStatus;
  attempts: number;
  changed_at: number;
  next_attempt_at: number | null;
  locked_until: number | null;
  lock_token: string | null;
  last_error: string | null;
  created_at: number;
}

export interface SlackDeliveryRow {
  id: string;
  approval_id: string;
  developer_id: string;
  method: string;
  attempted_at: number;
  ok: boolean;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

const NUMERIC = ['version', 'sent_version', 'attempts', 'changed_at', 'next_attempt_at', 'locked_until', 'created_at'] as const;

function normalize(r: SlackCardRow): SlackCardRow {
  const out = { ...r };
  for (const k of NUMERIC) if (out[k] != null) (out as Record<string, unknown>)[k] = Number(out[k]);
  return out;
}

/** The only code that queries slack_cards and slack_deliveries. */
export const slackCardsStore = {
  async insert(db: Queryable, row: SlackCardRow): Promise<void> {
    await db('slack_cards').insert(row);
  },

  async get(db: Queryable, approvalId: string): Promise<SlackCardRow | null> {
    const r = await db<SlackCardRow>('slack_cards').where({ approval_id: approvalId }).first();
    return r ? normalize(r) : null;
  },

  /**
   * The approvals changed (decided, expired): Slack is behind again, due now, with a fresh
   * retry ladder. Cards of a removed channel (cancelled) stay so. Returns rows touched.
   */
  async bump(db: Queryable, approvalIds: readonly string[], nowMs: number): Promise<number> {
    if (approvalIds.length === 0) return 0;
    return db('slack_cards')
      .whereIn('approval_id', [...approvalIds])
      .whereNot('status', 'cancelled')
      .update({ version: db.raw('version + 1'), status: 'pending', attempts: 0, changed_at: nowMs, next_attempt_at: nowMs, last_error: null });
  },

  async dueCandidates(db: Queryable, nowMs: number, limit: number): Promise<string[]> {
    const rows = await db('slack_cards')
      .select('approval_id')
      .where('status', 'pending')
      .andWhere('next_attempt_at', '<=', nowMs)
      .andWhere((w) => w.whereNull('locked_until').orWhere('locked_until', '<=', nowMs))
      .orderBy([{ column: 'next_attempt_at' }, { column: 'approval_id' }])
      .limit(limit);
    return rows.map((r: { approval_id: string }) => r.approval_id);
  },

  /** Leases the free ones of `ids`: one conditional UPDATE, so one worker (any process) gets each. */
  async claim(db: Queryable, ids: readonly string[], nowMs: number, leaseUntilMs: number, token: string): Promise<SlackCardRow[]> {
    if (ids.length === 0) return [];
    const n = await db('slack_cards')
      .whereIn('approval_id', [...ids])
      .andWhere('status', 'pending')
      .andWhere((w) => w.whereNull('locked_until').orWhere('locked_until', '<=', nowMs))
      .update({ locked_until: leaseUntilMs, lock_token: token });
    if (n === 0) return [];
    const rows = await db<SlackCardRow>('slack_cards').whereIn('approval_id', [...ids]).andWhere('lock_token', token);
    return rows.map(normalize);
  },

  /**
   * Slack shows `sentVersion` now (posted or updated). The card is done unless a change came
   * in meanwhile (version moved on): then it stays pending and due at once.
   */
  async sent(db: Queryable, approvalId: string, token: string, patch: { ts: string; channel_id: string; rendered_state: string; sentVersion: number; nowMs: number }): Promise<number> {
    return db('slack_cards')
      .where({ approval_id: approvalId, lock_token: token })
      .update({
        ts: patch.ts,
        channel_id: patch.channel_id,
        rendered_state: patch.rendered_state,
        sent_version: patch.sentVersion,
        status: db.raw(`case when version > ? then 'pending' else 'done' end`, [patch.sentVersion]),
        attempts: db.raw(`case when version > ? then 0 else attempts + 1 end`, [patch.sentVersion]),
        next_attempt_at: db.raw(`case when version > ? then ? else null end`, [patch.sentVersion, patch.nowMs]),
        last_error: null,
        locked_until: null,
        lock_token: null,
      });
  },

  /**
   * The attempt failed: try again at `next` (null: the retries ran out, `failed`). A change
   * that came in meanwhile reset the ladder (bump), so it is not pushed back.
   */
  async failed(db: Queryable, approvalId: string, token: string, patch: { attempts: number; next: number | null; error: string; version: number; ts?: string | null }): Promise<number> {
    return db('slack_cards')
      .where({ approval_id: approvalId, lock_token: token })
      .update({
        status: patch.next === null ? db.raw(`case when version > ? then 'pending' else 'failed' end`, [patch.version]) : 'pending',
        attempts: db.raw(`case when version > ? then 0 else ? end`, [patch.version, patch.attempts]),
        next_attempt_at: patch.next === null
          ? db.raw(`case when version > ? then next_attempt_at else null end`, [patch.version])
          : db.raw(`case when version > ? then next_attempt_at else ? end`, [patch.version, patch.next]),
        last_error: patch.error.slice(0, 200),
        ...(patch.ts ? { ts: patch.ts } : {}),
        locked_until: null,
        lock_token: null,
      });
  },

  async releaseClaim(db: Queryable, approvalId: string, token: string): Promise<number> {
    return db('slack_cards').where({ approval_id: approvalId, lock_token: token }).update({ locked_until: null, lock_token: null });
  },

  /** The channel was removed: no further posts or updates for this developer. */
  async cancelForDeveloper(db: Queryable, developerId: string): Promise<number> {
    return db('slack_cards')
      .where({ developer_id: developerId })
      .whereIn('status', ['pending', 'done', 'failed'])
      .update({ status: 'cancelled', next_attempt_at: null, locked_until: null, lock_token: null });
  },

  async countPending(db: Queryable): Promise<number> {
    const row = await db('slack_cards').where('status', 'pending').count({ n: '*' }).first();
    return Number((row as { n?: number | string } | undefined)?.n ?? 0);
  },

  async logDelivery(db: Queryable, row: SlackDeliveryRow): Promise<void> {
    await db('slack_deliveries').insert(row);
  },

  async deliveries(db: Queryable, approvalId: string): Promise<SlackDeliveryRow[]> {
    const rows = await db<SlackDeliveryRow>('slack_deliveries').where({ approval_id: approvalId }).orderBy([{ column: 'attempted_at' }, { column: 'id' }]);
    return rows.map((r) => ({ ...r, ok: Boolean(r.ok), attempted_at: Number(r.attempted_at), duration_ms: Number(r.duration_ms), status_code: r.status_code == null ? null : Number(r.status_code) }));
  },
};
