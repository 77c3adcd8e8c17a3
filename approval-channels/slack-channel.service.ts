import { EventEmitter } from 'node:events';
import type { Knex } from 'knex';
import type { Db, Queryable, Tx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import type { ApprovalChange } from '../approvals/approvals.service.js';
import { slackChannelStore } from './slack-channel.store.js';
import { slackCardsStore } from './slack-cards.store.js';

/** Slack's Web API (docs/slack-approvals.md); `api_base_url` replaces it for tests and Slack-compatible servers. */
export const DEFAULT_SLACK_API_BASE_URL = 'https://slack.com/api';

export interface SlackChannelInput {
  bot_token: string;
  signing_secret: string;
  channel_id: string;
  api_base_url?: string;
}

/** GET /v1/approval-channels/slack: never a secret. */
export interface SlackChannelRecord {
  type: 'slack';
  channel_id: string;
  api_base_url: string;
  created_at: string;
  updated_at: string;
}

/** What the delivery worker and the interactivity endpoint need, opened. Never logged. */
export interface SlackTarget {
  developerId: string;
  botToken: string;
  signingSecret: string;
  channelId: string;
  apiBaseUrl: string;
}

/** AAD of a sealed Slack secret: it opens only for this developer and this field. */
export function slackSecretContext(developerId: string, field: 'bot_token' | 'signing_secret'): string {
  return `slack:${developerId}:${field}`;
}

/** The outermost transaction of `trx`, as webhooks/outbox.ts finds it: its commit is the one that counts. */
function outermost(trx: Queryable): Knex.Transaction | null {
  const t = trx as Partial<Knex.Transaction>;
  if (!t.isTransaction) return null;
  let top = trx as Knex.Transaction;
  while (top.parentTransaction) top = top.parentTransaction;
  return top;
}

/**
 * "A card is due": emitted after the commit that made it due, so this process's delivery
 * worker sends at once (the sweep job finds what other processes committed). Only a hint:
 * the row is the truth. Process-wide, as webhooks/notifier.ts.
 */
const signal = new EventEmitter();
signal.setMaxListeners(0);
export function onSlackCardDue(listener: () => void): () => void {
  signal.on('due', listener);
  return () => signal.off('due', listener);
}
function announceAfterCommit(trx: Queryable): void {
  const tx = outermost(trx);
  if (!tx) signal.emit('due');
  else tx.executionPromise?.then(() => signal.emit('due'), () => {});
}

/**
 * A developer's Slack approval channel (issue 27): the configuration (secrets sealed with
 * the keyring, never returned), and the hook approvals call inside the transaction of every
 * change, which makes the card due (slack_cards: the outbox).
 */
export function createSlackChannelService(deps: { db: Db; clock: Clock; keyring: Keyring }) {
  const { db, clock, keyring } = deps;

  const toRecord = (r: { channel_id: string; api_base_url: string; created_at: number; updated_at: number }): SlackChannelRecord => ({
    type: 'slack', channel_id: r.channel_id, api_base_url: r.api_base_url, created_at: iso(r.created_at)!, updated_at: iso(r.updated_at)!,
  });

  async function set(developerId: string, input: SlackChannelInput): Promise<SlackChannelRecord> {
    const now = clock.nowMs();
    const row = {
      developer_id: developerId,
      bot_token_enc: keyring.encrypt(input.bot_token, slackSecretContext(developerId, 'bot_token')),
      signing_secret_enc: keyring.encrypt(input.signing_secret, slackSecretContext(developerId, 'signing_secret')),
      channel_id: input.channel_id,
      api_base_url: (input.api_base_url ?? DEFAULT_SLACK_API_BASE_URL).replace(/\/+$/, ''),
      created_at: now,
      updated_at: now,
    };
    await slackChannelStore.upsert(db, row);
    const stored = await slackChannelStore.get(db, developerId);
    return toRecord(stored ?? row);
  }

  async function get(developerId: string): Promise<SlackChannelRecord | null> {
    const r = await slackChannelStore.get(db, developerId);
    return r ? toRecord(r) : null;
  }

  /** Idempotent. Cards not yet brought up to date are cancelled: no further Slack calls. */
  async function remove(developerId: string): Promise<void> {
    await db.transaction(async (trx) => {
      await slackChannelStore.remove(trx, developerId);
      await slackCardsStore.cancelForDeveloper(trx, developerId);
    });
  }

  /** The channel with its secrets opened, or null when none is set. Throws when a secret does not open. */
  async function target(developerId: string): Promise<SlackTarget | null> {
    const r = await slackChannelStore.get(db, developerId);
    if (!r) return null;
    return {
      developerId,
      botToken: keyring.decryptString(r.bot_token_enc, slackSecretContext(developerId, 'bot_token')),
      signingSecret: keyring.decryptString(r.signing_secret_enc, slackSecretContext(developerId, 'signing_secret')),
      channelId: r.channel_id,
      apiBaseUrl: r.api_base_url,
    };
  }

  /**
   * approvals' onApprovalChange, inside the change's transaction: a requested approval of a
   * developer with a channel gets its card row (due now); a decision or expiry makes an
   * existing card due again (the update renders the approval as it is at send time).
   */
  async function onApprovalChange(trx: Tx, change: ApprovalChange): Promise<void> {
    const now = clock.nowMs();
    if (change.kind === 'requested') {
      const channelId = await slackChannelStore.exists(trx, change.approval.developer_id);
      if (channelId === null) return;
      await slackCardsStore.insert(trx, {
        approval_id: change.approval.id, developer_id: change.approval.developer_id, channel_id: channelId,
        ts: null, rendered_state: null, version: 1, sent_version: 0, status: 'pending', attempts: 0,
        changed_at: now, next_attempt_at: now, locked_until: null, lock_token: null, last_error: null, created_at: now,
      });
      announceAfterCommit(trx);
      return;
    }
    const ids = 'approvalIds' in change ? change.approvalIds : [change.approval.id];
    if ((await slackCardsStore.bump(trx, ids, now)) > 0) announceAfterCommit(trx);
  }

  return { set, get, remove, target, onApprovalChange };
}

export type SlackChannelService = ReturnType<typeof createSlackChannelService>;
