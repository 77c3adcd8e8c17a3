import { randomBytes } from 'node:crypto';
import { claimLoop } from '../lib/claim-loop.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import type { Db } from '../store/db.js';
import type { ApprovalCard } from '../approvals/approvals.service.js';
import { renderSlackCard } from './slack-card.js';
import type { SlackApi, SlackCallResult } from './slack-api.js';
import { onSlackCardDue, type SlackTarget } from './slack-channel.service.js';
import { slackCardsStore, type SlackCardRow } from './slack-cards.store.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * Retries of a card after a failed call. Shorter at first than webhooks/retry.ts's ladder
 * (5 s, then 5 minutes): a card matters while its approval is pending (ten minutes) and
 * right after it is decided, so a Slack hiccup of a minute must not leave a stale card for
 * five. Then it backs off, and gives up 24 hours after the change it was to show.
 */
export const CARD_RETRY_DELAYS_MS: readonly number[] = Object.freeze([2 * SECOND, 10 * SECOND, 30 * SECOND, MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR]);
export const CARD_RETRY_WINDOW_MS = 24 * HOUR;

/** When to try again after the `attemptsDone`-th failure, or null when that was the last. */
export function nextCardAttemptAt(changedAtMs: number, attemptsDone: number, failedAtMs: number, retryAfterSecs: number | null = null): number | null {
  const last = changedAtMs + CARD_RETRY_WINDOW_MS;
  if (failedAtMs >= last) return null;
  const delay = CARD_RETRY_DELAYS_MS[attemptsDone - 1] ?? 4 * HOUR;
  const wanted = Math.max(failedAtMs + delay, retryAfterSecs !== null ? failedAtMs + retryAfterSecs * SECOND : 0);
  return Math.min(wanted, last);
}

export interface SlackDeliveryDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  api: SlackApi;
  /** The channel with its secrets, read at send time; null when removed. */
  target: (developerId: string) => Promise<SlackTarget | null>;
  /** The approval as it is now (approvals.cardById). */
  approval: (approvalId: string) => Promise<{ developerId: string; card: ApprovalCard; decidedBy: string | null } | null>;
  /** The environment's end user, null when it is gone. */
  endUserOf: (developerId: string, environmentId: string) => Promise<string | null>;
  /** A team member's name, null when gone. */
  memberName: (developerId: string, memberId: string) => Promise<string | null>;
}

const MAX_IN_FLIGHT = 16;
const LEASE_MS = 45_000;

/**
 * Brings Slack up to date with each card (slack_cards): the delivery worker.
 *
 * Work comes only from the table, never from memory: a claim is one conditional UPDATE
 * leasing due cards (`locked_until`, `lock_token`), so two workers (in any process) never
 * send the same card at once, and a card whose worker died is taken again when its lease
 * passes. It runs when this process commits a change (onSlackCardDue), after each send (a
 * change that came in during the send is due again), and on the sweep job
 * (jobs/deliver-slack-cards.job.ts), which finds retries and other processes' changes.
 *
 * A send renders the approval's current row (slack-card.ts): chat.postMessage while the
 * card has no ts, chat.update after. Sending the current state is idempotent, so a send
 * repeated after a lost answer does no harm but for a post, which at worst leaves a second
 * card (the first one's ts was never learnt); both are then correct until the next change.
 * Every call is a slack_deliveries row; the token is never logged.
 */
export function createSlackDeliveryService(deps: SlackDeliveryDeps) {
  const { db, clock, log, api } = deps;
  const inFlight = new Map<string, Promise<void>>();
  const shutdown = new AbortController();
  let started = false;
  let closed = false;
  let unsubscribe: (() => void) | null = null;

  async function claimAndStart(): Promise<void> {
    for (let round = 0; round < 20 && !closed; round++) {
      const free = MAX_IN_FLIGHT - inFlight.size;
      if (free <= 0) return;
      const now = clock.nowMs();
      const ids = await slackCardsStore.dueCandidates(db, now, free);
      if (ids.length === 0) return;
      const token = randomBytes(16).toString('hex');
      const claimed = await slackCardsStore.claim(db, ids, now, now + LEASE_MS, token);
      for (const card of claimed) {
        const run = deliver(card, token)
          .catch((err: unknown) => log.error({ err, approval_id: card.approval_id }, 'slack: card bookkeeping failed; the lease will expire and the card be retried'))
          .finally(() => {
            inFlight.delete(card.approval_id);
            if (!closed) void pump();
          });
        inFlight.set(card.approval_id, run);
      }
      if (claimed.length === 0 || ids.length < free) return;
    }
  }

  // A retry due within 10 minutes gets a timer of this process's; the sweep job covers the
  // rest, and a pass that failed.
  const loop = claimLoop({
    pass: claimAndStart,
    onError: (err) => log.error({ err }, 'slack: claiming due cards failed; the sweep will try again'),
    clock,
    maxLocalWakeMs: 10 * MINUTE,
  });
  const pump = loop.pump;

  async function record(card: SlackCardRow, method: string, attemptedAt: number, r: SlackCallResult): Promise<void> {
    await slackCardsStore.logDelivery(db, {
      id: newId('dlv'), approval_id: card.approval_id, developer_id: card.developer_id, method, attempted_at: attemptedAt,
      ok: r.ok, status_code: r.statusCode, error: r.error, duration_ms: r.durationMs,
    });
  }

  async function fail(card: SlackCardRow, token: string, error: string, retryAfterSecs: number | null = null): Promise<void> {
    const attempts = card.attempts + 1;
    const next = nextCardAttemptAt(card.changed_at, attempts, clock.nowMs(), retryAfterSecs);
    await slackCardsStore.failed(db, card.approval_id, token, { attempts, next, error, version: card.version });
    if (next !== null) loop.wakeAt(next);
    else log.warn({ approval_id: card.approval_id, error }, 'slack: the card could not be brought up to date within 24 hours; giving up');
  }

  async function deliver(card: SlackCardRow, token: string): Promise<void> {
    if (shutdown.signal.aborted) {
      await slackCardsStore.releaseClaim(db, card.approval_id, token);
      return;
    }
    let target: SlackTarget | null;
    try {
      target = await deps.target(card.developer_id);
    } catch (err) {
      log.error({ err, developer_id: card.developer_id }, 'slack: the channel\'s secrets could not be opened');
      return fail(card, token, 'channel_unreadable');
    }
    if (!target) {
      await slackCardsStore.cancelForDeveloper(db, card.developer_id);
      return;
    }
    const found = await deps.approval(card.approval_id);
    if (!found || found.developerId !== card.developer_id) return fail(card, token, 'approval_not_found');
    const a = found.card;
    const [endUser, decidedBy] = await Promise.all([
      deps.endUserOf(card.developer_id, a.environment_id).catch(() => null),
      found.decidedBy ? deps.memberName(card.developer_id, found.decidedBy).catch(() => null) : Promise.resolve(null),
    ]);
    const rendered = renderSlackCard({ ...a, details: a.details }, { endUser, decidedBy });
    // The card stays in the channel it was posted to, even if the channel setting changed since.
    const channel = card.ts ? card.channel_id : target.channelId;
    const method = card.ts ? 'chat.update' : 'chat.postMessage';
    const args: Record<string, unknown> = card.ts
      ? { channel, ts: card.ts, text: rendered.text, blocks: rendered.blocks }
      : { channel, text: rendered.text, blocks: rendered.blocks, unfurl_links: false, unfurl_media: false };
    const attemptedAt = clock.nowMs();
    const r = await api.call(target.apiBaseUrl, method, target.botToken, args, shutdown.signal);
    await record(card, method, attemptedAt, r);
    const ts = r.ok ? (r.ts ?? card.ts) : null;
    if (!r.ok || !ts) return fail(card, token, r.ok ? 'no_ts_in_answer' : (r.error ?? 'slack_error'), r.retryAfterSecs);
    // A post goes to the channel set now, and later updates go where it went.
    await slackCardsStore.sent(db, card.approval_id, token, { ts, channel_id: channel, rendered_state: a.status, sentVersion: card.version, nowMs: clock.nowMs() });
  }

  return {
    start(): void {
      if (started || closed) return;
      started = true;
      loop.start();
      unsubscribe = onSlackCardDue(() => void pump());
      void pump();
    },
    /** The sweep job: claims what is due and waits for those sends (the test clock's runDue). */
    async sweep(): Promise<void> {
      await pump();
      await Promise.allSettled([...inFlight.values()]);
    },
    nudge(): Promise<void> {
      return pump();
    },
    queueDepth(): Promise<number> {
      return slackCardsStore.countPending(db);
    },
    /** The card of an approval and its delivery log (tests, operators). */
    async card(approvalId: string) {
      return { card: await slackCardsStore.get(db, approvalId), deliveries: await slackCardsStore.deliveries(db, approvalId) };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      unsubscribe?.();
      const stopped = loop.stop();
      shutdown.abort(new Error('slack delivery stopped'));
      await stopped;
      await Promise.allSettled([...inFlight.values()]);
    },
  };
}

export type SlackDeliveryService = ReturnType<typeof createSlackDeliveryService>;
