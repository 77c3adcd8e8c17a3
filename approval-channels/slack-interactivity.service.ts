import type { Clock } from '../lib/clock.js';
import { ServiceError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Db } from '../store/db.js';
import type { ApprovalCard, DecisionBody, DecisionCaller } from '../approvals/approvals.service.js';
import { ACTION_IDS, DENY_ACTION_ID, escapeMrkdwn } from './slack-card.js';
import type { SlackApi } from './slack-api.js';
import type { SlackTarget } from './slack-channel.service.js';
import { slackChannelStore } from './slack-channel.store.js';
import { SLACK_TOLERANCE_SECS, parseSlackTimestamp, slackSignatureDigest, verifySlackSignature } from './slack-signature.js';

/** Slack wants an answer within 3 seconds; the decision gets this long, the rest is margin. */
export const DECIDE_DEADLINE_MS = 2_000;
/** `approve:until` grants this long from the press. */
export const UNTIL_SECS = 3_600;

export interface InteractionInput {
  rawBody: Buffer;
  timestamp: string | undefined;
  signature: string | undefined;
}

/** What the route answers: 200 (Slack's acknowledgement, always once the request is Slack's), or a refusal. */
export type InteractionAnswer =
  | { status: 200; outcome: 'decided' | 'refused' | 'ignored' | 'pending' }
  | { status: 400 | 401; error: 'invalid_request' | 'invalid_signature'; message: string };

export interface SlackInteractivityDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  api: SlackApi;
  target: (developerId: string) => Promise<SlackTarget | null>;
  approval: (approvalId: string) => Promise<{ developerId: string; card: ApprovalCard; decidedBy: string | null } | null>;
  decide: (approvalId: string, caller: DecisionCaller, body: DecisionBody) => Promise<unknown>;
  /** The team member of this developer with this Slack user id, or null. */
  memberBySlackUser: (developerId: string, slackUserId: string) => Promise<{ id: string; name: string } | null>;
  /** Wall clock (Slack signs with its own clock; the service clock may be a test clock moved ahead). */
  wallNowMs?: () => number;
}

interface BlockActionsPayload {
  type?: unknown;
  user?: { id?: unknown };
  team?: { id?: unknown };
  channel?: { id?: unknown };
  response_url?: unknown;
  actions?: Array<{ action_id?: unknown; value?: unknown; block_id?: unknown }>;
}

const APPROVAL_ID = /^apr_[0-9a-f]{24}$/;
const refuse = (message: string): InteractionAnswer => ({ status: 401, error: 'invalid_signature', message });
const bad = (message: string): InteractionAnswer => ({ status: 400, error: 'invalid_request', message });

function parsePayload(rawBody: Buffer): BlockActionsPayload | null {
  try {
    const form = new URLSearchParams(rawBody.toString('utf8'));
    const all = form.getAll('payload');
    if (all.length !== 1) return null;
    const v = JSON.parse(all[0]!) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as BlockActionsPayload) : null;
  } catch {
    return null;
  }
}

/**
 * POST /v1/slack/interactivity (issue 27): a button press on a card.
 *
 * Order: the body names an approval (`actions[0].value`); the approval's developer's
 * channel gives the signing secret; the signature is checked with THAT secret (a developer's
 * own Slack app cannot sign presses for another developer's approvals), the timestamp within
 * 5 minutes, the signature unused (slack_used_signatures, recorded before anything else).
 * Any of these failing is 401 and nothing happens; an unknown approval or a developer
 * without a channel is the same 401 (nothing about it is revealed). Only then is the
 * Slack user mapped to a team member of that developer (team_members.slack_user_id), and
 * the decision made through approvals.decide as `decided_via: slack` with the member.
 * Refusals after verification (unmapped user, decided or expired, scope too wide) are 200
 * for Slack plus an ephemeral reply to the presser saying why, and change nothing.
 */
export function createSlackInteractivityService(deps: SlackInteractivityDeps) {
  const { db, clock, log, api } = deps;
  const wallNowMs = deps.wallNowMs ?? Date.now;

  /** The presser's reply: through response_url (no token), else chat.postEphemeral. Fire and forget. */
  function reply(target: SlackTarget, p: BlockActionsPayload, userId: string, text: string): void {
    const url = typeof p.response_url === 'string' ? p.response_url : null;
    const channel = typeof p.channel?.id === 'string' ? p.channel.id : target.channelId;
    const sent = url
      ? api.respond(url, text)
      : api.call(target.apiBaseUrl, 'chat.postEphemeral', target.botToken, { channel, user: userId, text });
    void sent.then((r) => {
      if (!r.ok) log.warn({ error: r.error, status: r.statusCode }, 'slack: the ephemeral reply was not delivered');
    }, (err: unknown) => log.warn({ err }, 'slack: the ephemeral reply failed'));
  }

  function decisionFor(actionId: string, a: ApprovalCard): unknown | null {
    if (actionId === DENY_ACTION_ID) return { decision: 'deny' };
    switch (actionId) {
      case ACTION_IDS.once: return { decision: 'approve', scope: { kind: 'once' } };
      case ACTION_IDS.permanent: return { decision: 'approve', scope: { kind: 'permanent' } };
      case ACTION_IDS.time_limited: return { decision: 'approve', scope: { kind: 'until', until: Math.floor(clock.nowMs() / 1000) + UNTIL_SECS } };
      // A request without a task (session) id has no such scope: the service says so (invalid_scope).
      case ACTION_IDS.task: return { decision: 'approve', scope: { kind: 'task', task_id: a.task_id ?? '' } };
      case ACTION_IDS.session: return { decision: 'approve', scope: { kind: 'session', session_id: a.session_id ?? '' } };
      default: return null;
    }
  }

  /** The presser's reason (our own words: service messages never carry agent text or secrets). */
  function why(err: unknown): string {
    if (err instanceof ServiceError) {
      return err.code === 'already_decided'
        ? 'Nothing changed: this request was already decided or has expired.'
        : `Nothing changed: ${escapeMrkdwn(err.message)}.`;
    }
    return 'Nothing changed: the gateway could not record the decision. Try again, or decide in the console.';
  }

  async function handle(input: InteractionInput): Promise<InteractionAnswer> {
    const p = parsePayload(input.rawBody);
    if (!p) return bad('the body must be application/x-www-form-urlencoded with one payload=<JSON object>, as Slack sends');
    const action = Array.isArray(p.actions) ? p.actions[0] : undefined;
    const approvalId = typeof action?.value === 'string' ? action.value : '';
    if (!APPROVAL_ID.test(approvalId)) return bad('the payload names no approval (actions[0].value)');

    // Whose approval: its developer's signing secret is the only one that may sign for it.
    const found = await deps.approval(approvalId);
    const target = found ? await deps.target(found.developerId) : null;
    if (!found || !target) return refuse('the request signature does not verify');
    const check = verifySlackSignature(input.rawBody, input.timestamp, input.signature, target.signingSecret, {
      nowSecs: [Math.floor(clock.nowMs() / 1000), Math.floor(wallNowMs() / 1000)],
      toleranceSecs: SLACK_TOLERANCE_SECS,
    });
    if (check !== 'ok') {
      return refuse({
        missing: 'X-Slack-Request-Timestamp and X-Slack-Signature are required',
        malformed: 'X-Slack-Signature or X-Slack-Request-Timestamp is malformed',
        stale: `X-Slack-Request-Timestamp is more than ${SLACK_TOLERANCE_SECS} seconds from now`,
        mismatch: 'the request signature does not verify',
      }[check]);
    }
    const t = parseSlackTimestamp(input.timestamp)!;
    if (!(await slackChannelStore.useSignature(db, slackSignatureDigest(found.developerId, t, input.rawBody), t, clock.nowMs()))) {
      return refuse('this request signature was already used');
    }

    // From here on the request is Slack's: it gets 200, and the presser a reason when nothing changed.
    if (p.type !== 'block_actions') return { status: 200, outcome: 'ignored' };
    const userId = typeof p.user?.id === 'string' ? p.user.id : '';
    const member = userId ? await deps.memberBySlackUser(found.developerId, userId) : null;
    if (!member) {
      reply(target, p, userId, 'Nothing changed: your Slack account is not linked to a team member of this gateway. Ask an admin to set your slack_user_id (PATCH /v1/team-members/{id}).');
      return { status: 200, outcome: 'refused' };
    }
    const actionId = typeof action?.action_id === 'string' ? action.action_id : '';
    const body = decisionFor(actionId, found.card);
    if (body === null) {
      reply(target, p, userId, 'Nothing changed: this button is not one the gateway knows.');
      return { status: 200, outcome: 'refused' };
    }
    const decided = deps.decide(approvalId, { via: 'slack', developerId: found.developerId, memberId: member.id }, { ok: true, value: body }).then(
      () => 'decided' as const,
      (err: unknown) => {
        if (!(err instanceof ServiceError)) log.error({ err, approval_id: approvalId }, 'slack: a decision failed');
        reply(target, p, userId, why(err));
        return 'refused' as const;
      },
    );
    // Slack gives 3 seconds: past the deadline it gets its 200 and the decision goes on.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'pending'>((resolve) => {
      timer = setTimeout(() => resolve('pending'), DECIDE_DEADLINE_MS);
    });
    const outcome = await Promise.race([decided, late]);
    clearTimeout(timer);
    return { status: 200, outcome };
  }

  /** Forgets used signatures too old to verify again (both clocks, plus a minute). */
  async function pruneUsedSignatures(): Promise<number> {
    const nowSecs = Math.min(Math.floor(clock.nowMs() / 1000), Math.floor(wallNowMs() / 1000));
    return slackChannelStore.pruneSignatures(db, nowSecs - SLACK_TOLERANCE_SECS - 60);
  }

  return { handle, pruneUsedSignatures };
}

export type SlackInteractivityService = ReturnType<typeof createSlackInteractivityService>;
