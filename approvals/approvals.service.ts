import type { Db } from '../store/db.js';
import { withTx, type Tx } from '../store/db.js';
import type { Clock, ServiceClock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import {
  isScope, isWiderThan, limitsAmount, NO_USE, useOf, withinLimits,
  type Category, type GrantLike, type GrantLimits, type GrantUse, type RequestDetails, type RequestFacts, type Scope,
} from '../policy-engine/index.js';
import { enqueueEvent } from '../webhooks/outbox.js';
import { checkSignature, DEFAULT_TOLERANCE_SECS, parseSignatureHeader } from '../webhooks/signing.js';
import { signatureDigest, usedSignaturesStore } from './used-signatures.store.js';
import { approvalsStore, type ApprovalOutcomeRow, type ApprovalRow, type ApprovalStatus, type DecidedVia } from './approvals.store.js';
import { grantsStore, type GrantRow, type GrantScopeValue } from './grants.store.js';
import { MAX_UNTIL_SECS, parseDecision, scopeOf } from './decision.js';

/** service.md "Approval request": default lifetime ten minutes. */
export const APPROVAL_LIFETIME_MS = 10 * 60 * 1000;
/** Server-side tolerance for signed decision callbacks (decisions.md: 300 seconds). */
export const CALLBACK_TOLERANCE_SECS = DEFAULT_TOLERANCE_SECS;
/** How often waiters look at the store for decisions made by other processes. */
export const DEFAULT_WAIT_POLL_MS = 1000;
/** Task and session ids (agent request headers) longer than this are refused by requestApproval. */
export const MAX_TAG_LENGTH = 255;

/** The approval record of the API (decisions.md: the spec's fields plus created_at, grant_id). */
export interface Approval {
  id: string;
  environment_id: string;
  connector: string;
  category: string;
  summary: string;
  task_id: string | null;
  session_id: string | null;
  max_scope: string;
  status: ApprovalStatus;
  scope: string | null;
  decided_via: DecidedVia | null;
  decided_at: string | null;
  expires_at: string;
  created_at: string;
  grant_id: string | null;
  /** Present only on an MCP tool call (issue 28): the tool(s) it calls. */
  tool?: string;
}

/** The grant record of the API (decisions.md, Approvals and grants). */
export interface Grant {
  id: string;
  environment_id: string;
  connector: string;
  category: string;
  scope: GrantScopeValue;
  task_id: string | null;
  session_id: string | null;
  expires_at: string | null;
  approval_id: string;
  created_at: string;
  /** The decision's `limits` as given (currency lower-cased), or null (issue 26, item 2). */
  limits: GrantLimits | null;
  /** What forwarded requests spent, the approved request first; counted only with limits. */
  used: { minor_units: number; uses: number };
  /** Present only on a grant of an MCP tool call (issue 28): it covers only calls of this tool (these tools). */
  tool?: string;
}

/** A grant as the policy engine reads it (expires_at in ms), with its API record. */
export interface EngineGrant extends GrantLike {
  readonly record: Grant;
  /** A grant covers only requests within these (policy-engine withinLimits); null: no limits. */
  readonly limits: GrantLimits | null;
  readonly used: GrantUse;
}

export interface RequestApprovalInput {
  developerId: string;
  environmentId: string;
  connector: string;
  category: Category;
  method: string;
  host: string;
  /** The request path; a query string or fragment is not shown in the summary. */
  path: string;
  task_id?: string | null;
  session_id?: string | null;
  max_scope: Scope;
  /**
   * What the request would do, decoded for the console's card (policy-engine
   * describeRequest). Kept off the API record and the webhook, which carry the spec's
   * fields; the caller builds it from the agent's request, never from a swapped one.
   */
  details?: RequestDetails | null;
  /**
   * What the request would do, as the policy reads it (policy-engine factsOf): a decision's
   * limits must cover it (docs/policies-approvals.md, Spending mandates). Absent or null:
   * nothing could be read, and no amount or recipient limit covers it.
   */
  facts?: RequestFacts | null;
  /** The MCP tool(s) the request calls (issue 28): named in the summary; the grant covers only them. */
  tool?: string | null;
}

/** An approval as the console's card shows it: the API record, the decoded details and facts. */
export interface ApprovalCard extends Approval {
  details: RequestDetails | null;
  facts: RequestFacts | null;
}

export interface DecisionOutcome {
  status: 'approved' | 'denied' | 'expired';
  scope: string | null;
  grant_id: string | null;
}

/** The body as the transport read it: the parsed JSON, or why it could not be read. */
export type DecisionBody = { ok: true; value: unknown } | { ok: false; error: ServiceError };

export type DecisionCaller =
  | { via: 'api_key' | 'console' | 'slack'; developerId: string; memberId?: string }
  | { via: 'signature'; rawBody: Buffer; signature: string | undefined };

/** A pending approval past its expiry reads as expired even before the sweep marks it. */
export function effectiveStatus(row: Pick<ApprovalRow, 'status' | 'expires_at'>, nowMs: number): ApprovalStatus {
  return row.status === 'pending' && Number(row.expires_at) <= nowMs ? 'expired' : row.status;
}

export function toApproval(r: ApprovalRow, nowMs: number): Approval {
  return {
    id: r.id,
    environment_id: r.environment_id,
    connector: r.connector,
    category: r.category,
    summary: r.summary,
    task_id: r.task_id ?? null,
    session_id: r.session_id ?? null,
    max_scope: r.max_scope,
    status: effectiveStatus(r, nowMs),
    scope: r.scope ?? null,
    decided_via: r.decided_via ?? null,
    decided_at: iso(r.decided_at),
    expires_at: iso(r.expires_at)!,
    created_at: iso(r.created_at)!,
    grant_id: r.grant_id ?? null,
    ...(r.tool != null ? { tool: r.tool } : {}),
  };
}

/** Stored details that cannot be read are shown as such, never as a card with nothing to warn of. */
const UNREADABLE_DETAILS: RequestDetails = { kind: 'unknown', fields: [], unreadable: 'the stored details could not be read' };

function parseDetails(raw: string | null | undefined): RequestDetails | null {
  if (!raw) return null;
  try {
    const v = JSON.parse(raw) as RequestDetails;
    return v && typeof v === 'object' && Array.isArray(v.fields) ? v : UNREADABLE_DETAILS;
  } catch {
    return UNREADABLE_DETAILS;
  }
}

/**
 * Stored limits that cannot be read cover nothing (fail closed): never read as "no limits".
 * `max_uses: 0` is what no request is within.
 */
const UNREADABLE_LIMITS: GrantLimits = Object.freeze({ max_uses: 0 });

function parseLimitsColumn(raw: string | null | undefined): GrantLimits | null {
  if (raw === null || raw === undefined) return null;
  try {
    const v = JSON.parse(raw) as GrantLimits;
    return v && typeof v === 'object' && !Array.isArray(v) ? v : UNREADABLE_LIMITS;
  } catch {
    return UNREADABLE_LIMITS;
  }
}

/** Facts as stored on an approval; unreadable reads as nothing known (no limit covers it). */
function parseFacts(raw: string | null | undefined): RequestFacts | null {
  if (!raw) return null;
  try {
    const v = JSON.parse(raw) as RequestFacts;
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** Facts kept on an approval stay under a MySQL TEXT (64 KiB): a longer recipient list is dropped (unreadable). */
const MAX_FACTS_CHARS = 60_000;

function factsColumn(facts: RequestFacts | null | undefined): string | null {
  if (!facts) return null;
  const json = JSON.stringify(facts);
  return json.length <= MAX_FACTS_CHARS ? json : JSON.stringify({ ...facts, recipients: null });
}

function usedOf(r: GrantRow): GrantUse {
  return { minor_units: Number(r.used_minor_units ?? 0), uses: Number(r.uses ?? 0) };
}

/**
 * Why limits do not cover a request (the 400 of a decision whose limits leave out the very
 * request being approved), or null when they do.
 */
export function outsideLimits(limits: GrantLimits, facts: RequestFacts | null | undefined): string | null {
  if (withinLimits(limits, NO_USE, facts)) return null;
  if (limitsAmount(limits)) {
    const a = facts?.amount;
    if (!a) return 'the amount of the request being approved could not be read, so amount limits would not cover it: approve it without amount limits';
    if (a.currency !== limits.currency) return `the request being approved is in ${a.currency.toUpperCase()}, not ${String(limits.currency).toUpperCase()}`;
    if (limits.per_request_minor_units !== undefined && a.minor_units > limits.per_request_minor_units) {
      return `the request being approved (${a.minor_units} minor units) is over per_request_minor_units (${limits.per_request_minor_units})`;
    }
    if (limits.total_minor_units !== undefined && a.minor_units > limits.total_minor_units) {
      return `the request being approved (${a.minor_units} minor units) is over total_minor_units (${limits.total_minor_units})`;
    }
  }
  if (limits.recipients_within !== undefined) {
    const rs = facts?.recipients;
    if (!rs || rs.length === 0) return 'the recipients of the request being approved could not be read, so recipients_within would not cover it';
    return 'a recipient of the request being approved is outside recipients_within';
  }
  return 'the limits do not cover the request being approved';
}

export function toGrant(r: GrantRow): Grant {
  return {
    id: r.id,
    environment_id: r.environment_id,
    connector: r.connector,
    category: r.category,
    scope: r.scope,
    task_id: r.task_id ?? null,
    session_id: r.session_id ?? null,
    expires_at: iso(r.expires_at),
    approval_id: r.approval_id,
    created_at: iso(r.created_at)!,
    limits: parseLimitsColumn(r.limits),
    used: usedOf(r),
    ...(r.tool != null ? { tool: r.tool } : {}),
  };
}

function toEngineGrant(r: GrantRow): EngineGrant {
  const record = toGrant(r);
  return {
    id: r.id,
    connector: r.connector,
    category: r.category as Category,
    scope: r.scope,
    task_id: r.task_id ?? null,
    session_id: r.session_id ?? null,
    expires_at: r.expires_at == null ? null : Number(r.expires_at),
    limits: record.limits,
    used: record.used,
    tool: r.tool ?? null,
    record,
  };
}

/**
 * `<METHOD> <host> <path>` on one line (service.md). The query string is left out: it can
 * carry tokens, and the summary goes to the end user and into webhooks. Control
 * characters become spaces so the summary stays one line.
 */
export function summaryOf(method: string, host: string, path: string, tool?: string | null): string {
  const bare = path.replace(/[?#].*$/s, '') || '/';
  // eslint-disable-next-line no-control-regex
  const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, ' ');
  // An MCP tool call names its tool(s) (issue 28): `POST mcp.example.com /mcp tools/call delete_repository`.
  const call = tool ? ` tools/call ${oneLine(tool.length > 300 ? `${tool.slice(0, 300)}…` : tool)}` : '';
  return `${oneLine(method.toUpperCase())} ${oneLine(host)} ${oneLine(bare)}${call}`;
}

function outcomeOf(r: Pick<ApprovalRow, 'status' | 'scope' | 'grant_id'>): DecisionOutcome {
  return { status: r.status as DecisionOutcome['status'], scope: r.scope ?? null, grant_id: r.grant_id ?? null };
}

const EXPIRED: DecisionOutcome = Object.freeze({ status: 'expired', scope: null, grant_id: null }) as DecisionOutcome;

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The wait was aborted', 'AbortError');
}

export interface ApprovalsDeps {
  db: Db;
  clock: Clock & Partial<Pick<ServiceClock, 'onAdvance'>>;
  log: Logger;
  /** Public base of decision_url; bin knows it once the API listens. */
  baseUrl: () => string;
  /** The developer's webhook secrets in force: [current, previous within 24 h]; [] when none. */
  signingSecrets: (developerId: string) => Promise<string[]>;
  /** Called after every grant write (decision, revocation) so policy caches drop the environment. */
  onGrantsChanged?: (developerId: string, environmentId: string) => void;
  /** Store polling interval of waitForDecision for decisions made by other processes. */
  waitPollMs?: number;
  /**
   * This process's node id (hosts/nodes.service.ts): recorded as `held_by` on the approvals
   * it requests, since its proxy holds those requests. Null or absent: none recorded.
   */
  nodeId?: string | null;
  /**
   * Called after the commit of a decision on an approval another node holds, so that node
   * releases its request at once instead of at its next poll (docs/deploy.md). Fire and
   * forget: its failure never fails the decision; the holder's poll is the fallback.
   */
  onDecidedElsewhere?: (approvalId: string, holderNodeId: string) => Promise<unknown> | void;
  /** Wall clock for the signature tolerance (tests inject it). */
  wallNowMs?: () => number;
  /**
   * Called inside the transaction of every change of an approval (requested, decided,
   * expired), so an approval channel's outbox row (approval-channels/, Slack cards) commits
   * exactly when the change does, as enqueueEvent's does (issue 27). Its failure fails the change.
   */
  onApprovalChange?: (trx: Tx, change: ApprovalChange) => Promise<void>;
}

/** What onApprovalChange hears: the row as written, or the ids a sweep expired. */
export type ApprovalChange =
  | { kind: 'requested' | 'decided'; approval: ApprovalRow }
  | { kind: 'expired'; approvalIds: string[] };

/**
 * Approval requests, decisions and grants (service.md "Approval request" states, "Decision
 * endpoint", "Grants").
 *
 * Waiting for a decision (the gateway holds the agent's request meanwhile): a decision
 * made in this process reaches waiters in-process at once (announce); one
 * made by another process sharing the database is found by a shared poll of the store
 * (one query for all waited ids every waitPollMs), and at once when that process pokes
 * this one (onDecidedElsewhere there, recheck here: docs/deploy.md). Expiry reaches waiters by a timer at
 * expires_at, by the sweep (expireDue), and on every test-clock advance.
 */
export function createApprovalsService(deps: ApprovalsDeps) {
  const { db, clock, log } = deps;
  const wallNowMs = deps.wallNowMs ?? Date.now;
  const pollMs = deps.waitPollMs ?? DEFAULT_WAIT_POLL_MS;

  const grantsChanged = (developerId: string, environmentId: string): void => {
    try {
      deps.onGrantsChanged?.(developerId, environmentId);
    } catch (err) {
      log.error({ err }, 'grant change listener failed');
    }
  };

  async function requestApproval(input: RequestApprovalInput): Promise<Approval> {
    if (!isScope(input.max_scope)) throw new TypeError(`max_scope is not a scope: ${String(input.max_scope)}`);
    const tag = (v: string | null | undefined, name: string): string | null => {
      if (v === undefined || v === null || v === '') return null;
      if (v.length > MAX_TAG_LENGTH) throw new TypeError(`${name} is longer than ${MAX_TAG_LENGTH} characters`);
      return v;
    };
    const now = clock.nowMs();
    const row: ApprovalRow = {
      id: newId('apr'),
      developer_id: input.developerId,
      environment_id: input.environmentId,
      connector: input.connector,
      category: input.category,
      method: input.method.toUpperCase(),
      host: input.host,
      path: input.path,
      summary: summaryOf(input.method, input.host, input.path, input.tool),
      tool: input.tool ?? null,
      details: input.details ? JSON.stringify(input.details) : null,
      facts: factsColumn(input.facts),
      task_id: tag(input.task_id, 'task_id'),
      session_id: tag(input.session_id, 'session_id'),
      max_scope: input.max_scope,
      status: 'pending',
      scope: null,
      decided_via: null,
      decided_at: null,
      grant_id: null,
      expires_at: now + APPROVAL_LIFETIME_MS,
      created_at: now,
      held_by: deps.nodeId ?? null,
    };
    await withTx(db, async (trx) => {
      await approvalsStore.insert(trx, row);
      await deps.onApprovalChange?.(trx, { kind: 'requested', approval: row });
      // Same transaction: the event exists exactly when the approval does.
      await enqueueEvent(trx, {
        developerId: row.developer_id,
        type: 'approval.requested',
        environmentId: row.environment_id,
        data: {
          approval_id: row.id,
          env_id: row.environment_id,
          connector: row.connector,
          category: row.category,
          summary: row.summary,
          max_scope: row.max_scope,
          // Integer Unix seconds (decisions.md); rounded down, so a receiver never thinks
          // it has longer than it has.
          expires_at: Math.floor(row.expires_at / 1000),
          decision_url: `${deps.baseUrl().replace(/\/+$/, '')}/v1/approvals/${row.id}/decision`,
        },
        createdAtMs: now,
      });
    });
    return toApproval(row, now);
  }

  async function get(developerId: string, id: string): Promise<Approval> {
    const row = await approvalsStore.get(db, developerId, id);
    if (!row) throw notFound();
    return toApproval(row, clock.nowMs());
  }

  async function list(developerId: string, opts: { status?: ApprovalStatus; environmentId?: string; limit: number; after: string | null }): Promise<Approval[]> {
    const now = clock.nowMs();
    const rows = await approvalsStore.list(db, developerId, { ...opts, nowMs: now });
    return rows.map((r) => toApproval(r, now));
  }

  /** list() with each approval's decoded details (the console's cards). */
  async function listCards(developerId: string, opts: { status?: ApprovalStatus; environmentId?: string; limit: number; after: string | null }): Promise<ApprovalCard[]> {
    const now = clock.nowMs();
    const rows = await approvalsStore.list(db, developerId, { ...opts, nowMs: now });
    return rows.map((r) => ({ ...toApproval(r, now), details: parseDetails(r.details), facts: parseFacts(r.facts) }));
  }

  /**
   * Decides an approval. Order of checks (decisions.md): 404 → 401 invalid_signature
   * (signed callbacks, before anything about the approval's state is revealed) → 409
   * already_decided → 400 body checks → 403 scope_too_wide. The write is one conditional
   * UPDATE, so of concurrent decisions exactly one wins and the others get 409; the grant
   * is stored in the same transaction.
   */
  async function decide(id: string, caller: DecisionCaller, body: DecisionBody): Promise<Approval> {
    // 404
    const row = caller.via === 'signature' ? await approvalsStore.getById(db, id) : await approvalsStore.get(db, caller.developerId, id);
    if (!row) throw notFound();

    // 401
    if (caller.via === 'signature') {
      const secrets = await deps.signingSecrets(row.developer_id);
      const result = secrets.length === 0
        ? (caller.signature ? 'mismatch' : 'missing')
        : checkSignature(caller.rawBody, caller.signature, secrets, {
            nowSecs: [Math.floor(clock.nowMs() / 1000), Math.floor(wallNowMs() / 1000)],
            toleranceSecs: CALLBACK_TOLERANCE_SECS,
          });
      if (result !== 'ok') {
        const why = {
          missing: 'a decision needs an API key (Authorization: Bearer) or a Service-Signature header',
          malformed: 'the Service-Signature header is malformed',
          stale: `the Service-Signature timestamp is more than ${CALLBACK_TOLERANCE_SECS} seconds from now`,
          mismatch: 'the Service-Signature does not match the body',
        }[result];
        throw new ServiceError('invalid_signature', why);
      }
      // A signature decides once (issue 9, hole 6): replayed to this or any other approval,
      // verbatim or with v1 values added or stripped, it is refused. Recorded before anything
      // else happens, whatever the decision's outcome, so a captured callback is worthless.
      const tSecs = parseSignatureHeader(caller.signature)!.t;
      if (!(await usedSignaturesStore.use(db, signatureDigest(row.developer_id, tSecs, caller.rawBody), tSecs, clock.nowMs()))) {
        throw new ServiceError('invalid_signature', 'this Service-Signature was already used: every signed decision needs a fresh signature');
      }
    }

    // 409
    const alreadyDecided = () => new ServiceError('already_decided', 'this approval request was already decided or has expired');
    if (effectiveStatus(row, clock.nowMs()) !== 'pending') throw alreadyDecided();

    // 400
    if (!body.ok) throw body.error;
    const decision = parseDecision(body.value);
    let scope: Scope | null = null;
    let grant: GrantRow | null = null;
    if (decision.decision === 'approve') {
      const s = decision.scope;
      if (s.kind === 'task') {
        if (row.task_id === null) throw new ServiceError('invalid_scope', 'the request carried no task id, so a task scope cannot be used');
        if (s.task_id !== row.task_id) throw new ServiceError('invalid_scope', 'task_id does not match the request\'s own');
      } else if (s.kind === 'session') {
        if (row.session_id === null) throw new ServiceError('invalid_scope', 'the request carried no session id, so a session scope cannot be used');
        if (s.session_id !== row.session_id) throw new ServiceError('invalid_scope', 'session_id does not match the request\'s own');
      } else if (s.kind === 'until') {
        if (s.until * 1000 <= clock.nowMs()) throw new ServiceError('invalid_scope', 'until must be in the future');
        if (s.until > MAX_UNTIL_SECS) throw new ServiceError('invalid_scope', `until must be at most ${MAX_UNTIL_SECS} (9999-12-31T23:59:59Z)`);
      }
      scope = scopeOf(s);
      // Spending mandates (issue 26, item 2): the approved request is the grant's first use,
      // so limits that leave it out are refused rather than stored as a grant already
      // outside them (docs/policies-approvals.md, Spending mandates).
      const limits = decision.limits ?? null;
      const facts = limits ? parseFacts(row.facts) : null;
      if (limits) {
        // An egress approval (category `connect`, environments/egress.service.ts) lets a host
        // through, and its grant is never spent: a grant with limits would cover nothing there.
        if (row.category === 'connect') throw new ServiceError('invalid_decision', 'limits bound the requests a grant lets through, and a connect (egress) grant spends none: approve it without limits');
        const why = outsideLimits(limits, facts);
        if (why !== null) throw new ServiceError('invalid_decision', `limits must cover the request being approved: ${why}`);
      }
      // 403
      if (isWiderThan(scope, row.max_scope as Scope)) {
        throw new ServiceError('scope_too_wide', `scope ${scope} is wider than this request's max_scope ${row.max_scope}`);
      }
      if (scope !== 'once') {
        grant = {
          id: newId('grt'),
          developer_id: row.developer_id,
          environment_id: row.environment_id,
          connector: row.connector,
          category: row.category,
          scope,
          task_id: s.kind === 'task' ? s.task_id : null,
          session_id: s.kind === 'session' ? s.session_id : null,
          expires_at: s.kind === 'until' ? s.until * 1000 : null,
          approval_id: row.id,
          created_at: 0,
          revoked_at: null,
          limits: limits ? JSON.stringify(limits) : null,
          // An MCP tool call's grant covers only its tool(s) (issue 28).
          tool: row.tool ?? null,
          // The approved request is the first use, counted as the grant is born: were it
          // counted only when forwarded, a request sent between the grant's commit and that
          // forward could spend what it needs and the total would be passed.
          used_minor_units: limits ? useOf(limits, facts).minor_units : 0,
          uses: limits ? 1 : 0,
        };
      }
    }

    const via: DecidedVia = caller.via;
    const decided = await withTx(db, async (trx) => {
      const now = clock.nowMs();
      const patch = {
        status: (decision.decision === 'approve' ? 'approved' : 'denied') as ApprovalStatus,
        scope,
        decided_via: via,
        decided_at: now,
        grant_id: grant?.id ?? null,
        decided_by: caller.via === 'console' || caller.via === 'slack' ? caller.memberId ?? null : null,
      };
      const n = await approvalsStore.decide(trx, row.id, now, patch);
      if (n !== 1) throw alreadyDecided();
      await deps.onApprovalChange?.(trx, { kind: 'decided', approval: { ...row, ...patch } });
      if (grant) {
        grant.created_at = now;
        await grantsStore.insert(trx, grant);
      }
      return { ...row, ...patch };
    });
    if (grant) grantsChanged(row.developer_id, row.environment_id);
    announce(row.id, outcomeOf(decided));
    // Held by another node's proxy: tell it now (a poke of a few ms) rather than at its poll.
    if (row.held_by && row.held_by !== deps.nodeId) tellHolder(row.id, row.held_by);
    return toApproval(decided, clock.nowMs());
  }

  function tellHolder(id: string, holder: string): void {
    try {
      void Promise.resolve(deps.onDecidedElsewhere?.(id, holder)).catch((err) => log.warn({ err, approval_id: id }, 'telling the holding node failed; its poll will'));
    } catch (err) {
      log.warn({ err, approval_id: id }, 'telling the holding node failed; its poll will');
    }
  }

  /** Marks these expired (if still pending and due), with onApprovalChange in the same transaction. */
  function expireIds(ids: string[], now: number): Promise<number> {
    if (!deps.onApprovalChange) return approvalsStore.expire(db, ids, now);
    return withTx(db, async (trx) => {
      const n = await approvalsStore.expire(trx, ids, now);
      if (n > 0) await deps.onApprovalChange!(trx, { kind: 'expired', approvalIds: ids });
      return n;
    });
  }

  /**
   * An approval by id alone with what its card shows (approval channels: a Slack card is
   * rendered from the row as it is at send time, and a button press names only the id).
   */
  async function cardById(id: string): Promise<{ developerId: string; card: ApprovalCard; decidedBy: string | null } | null> {
    const r = await approvalsStore.getById(db, id);
    if (!r) return null;
    return { developerId: r.developer_id, card: { ...toApproval(r, clock.nowMs()), details: parseDetails(r.details), facts: parseFacts(r.facts) }, decidedBy: r.decided_by ?? null };
  }

  /**
   * Marks pending approvals past expires_at `expired` (the sweep job). Returns how many.
   * Reads already show them expired; this makes the stored status agree and wakes waiters.
   */
  async function expireDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const now = clock.nowMs();
      const ids = await approvalsStore.duePending(db, now, 500);
      if (ids.length === 0) break;
      const n = await expireIds(ids, now);
      total += n;
      // Whoever marked them (this sweep or another process's), they are expired now: a
      // decision cannot win after expires_at.
      for (const id of ids) announce(id, EXPIRED);
      // A full batch of which none changed means another sweeper holds them: stop rather
      // than re-read the same rows.
      if (ids.length < 500 || n === 0) break;
    }
    return total;
  }

  /**
   * Forgets used signatures that can no longer verify: `t` older than the tolerance before
   * both the service clock and the wall clock (a decision is accepted within the tolerance of
   * either), plus a minute. Keeps the replay cache bounded; the expire-approvals job runs it.
   */
  async function pruneUsedSignatures(): Promise<number> {
    const nowSecs = Math.min(Math.floor(clock.nowMs() / 1000), Math.floor(wallNowMs() / 1000));
    return usedSignaturesStore.prune(db, nowSecs - CALLBACK_TOLERANCE_SECS - 60);
  }

  // ---- waiting -------------------------------------------------------------------------

  /**
   * One wait for one approval. A class rather than a closure per callback: the gateway may
   * hold 10,000 requests at once, and per wait this is one object (the abort listener is
   * the object itself, the expiry timer gets it as an argument) instead of eight closures.
   */
  class Waiter {
    settled = false;
    expiring = false;
    timer: NodeJS.Timeout | null = null;
    /** expires_at the timer is armed for (a poll that finds it unchanged leaves the timer). */
    armedFor = -1;

    constructor(
      readonly id: string,
      private readonly resolve: (o: DecisionOutcome) => void,
      private readonly reject: (err: unknown) => void,
      private readonly signal: AbortSignal | undefined,
    ) {}

    /** The AbortSignal's listener (EventTarget calls handleEvent on a listener object). */
    handleEvent(): void {
      this.fail(abortError(this.signal!));
    }

    #cleanup(): void {
      this.settled = true;
      const set = waiting.get(this.id);
      if (set) {
        set.delete(this);
        if (set.size === 0) waiting.delete(this.id);
      }
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.signal?.removeEventListener('abort', this);
    }

    finish(o: DecisionOutcome): void {
      if (this.settled) return;
      this.#cleanup();
      this.resolve(o);
    }

    fail(err: unknown): void {
      if (this.settled) return;
      this.#cleanup();
      this.reject(err);
    }

    /** Re-examines a row of this approval; settles the wait when it is over. */
    examine(row: ApprovalOutcomeRow | undefined): void {
      if (this.settled) return;
      if (!row) return this.fail(new Error(`no such approval: ${this.id}`));
      if (row.status !== 'pending') return this.finish(outcomeOf(row));
      const expiresAt = Number(row.expires_at);
      if (expiresAt <= clock.nowMs()) return this.expireNow();
      if (!this.timer || this.armedFor !== expiresAt) this.arm(expiresAt);
    }

    expireNow(): void {
      if (this.expiring || this.settled) return;
      this.expiring = true;
      expireOne(this.id)
        .catch((err) => log.warn({ err, approval_id: this.id }, 'expiring an approval failed; the sweep will'))
        .finally(() => {
          this.expiring = false;
        });
    }

    arm(expiresAt: number): void {
      if (this.timer) clearTimeout(this.timer);
      this.armedFor = expiresAt;
      const ms = Math.min(Math.max(expiresAt - clock.nowMs(), 0) + 5, 2 ** 31 - 1);
      this.timer = setTimeout(onExpiryTimer, ms, this);
      this.timer.unref();
    }
  }

  /** A waiter's expiry timer: at expires_at (service clock) the approval is expired. */
  function onExpiryTimer(w: Waiter): void {
    w.timer = null;
    if (w.settled) return;
    if (clock.nowMs() >= w.armedFor) w.expireNow();
    else w.arm(w.armedFor);
  }

  /** Approval id → the waits for it (usually one). */
  const waiting = new Map<string, Set<Waiter>>();
  let pollTimer: NodeJS.Timeout | null = null;
  let polling = false;
  let closed = false;

  function announce(id: string, outcome: DecisionOutcome): void {
    const set = waiting.get(id);
    if (set) for (const w of [...set]) w.finish(outcome);
  }

  /** One query per 500 waited ids; settles the decided, expires the overdue. */
  async function pollOnce(): Promise<void> {
    if (polling || waiting.size === 0) return;
    polling = true;
    try {
      const ids = [...waiting.keys()];
      for (let i = 0; i < ids.length; i += 500) {
        const chunk = ids.slice(i, i + 500);
        const rows = new Map((await approvalsStore.outcomes(db, chunk)).map((r) => [r.id, r]));
        // Map lookups per id, not a scan of every waiter per chunk: with 10,000 held
        // requests that scan was quadratic (docs/performance.md).
        for (const id of chunk) {
          const set = waiting.get(id);
          if (set) for (const w of [...set]) w.examine(rows.get(id));
        }
      }
    } catch (err) {
      log.warn({ err }, 'approval wait poll failed; retrying at the next tick');
    } finally {
      polling = false;
    }
  }

  function ensurePolling(): void {
    if (pollTimer || closed) return;
    pollTimer = setInterval(() => {
      if (waiting.size === 0) {
        clearInterval(pollTimer!);
        pollTimer = null;
        return;
      }
      void pollOnce();
    }, pollMs);
    pollTimer.unref();
  }

  /** Expires one overdue approval (if still pending) and tells everyone what it is now. */
  async function expireOne(id: string): Promise<void> {
    const now = clock.nowMs();
    const n = await expireIds([id], now);
    if (n === 1) {
      announce(id, EXPIRED);
      return;
    }
    const [row] = await approvalsStore.outcomes(db, [id]);
    if (row && row.status !== 'pending') announce(id, outcomeOf(row));
    else if (row && Number(row.expires_at) <= clock.nowMs()) announce(id, EXPIRED);
  }

  /**
   * Another node decided `id` and says so (hosts/rpc.ts, POST /approvals/decided): the row
   * is read again and the waits for it here settle. An id nobody here waits on costs
   * nothing, not even a read, so a poke (authenticated, but never trusted for the outcome)
   * can do no more than the poll would. Never throws.
   */
  async function recheck(id: string): Promise<void> {
    if (!waiting.has(id)) return;
    try {
      const [row] = await approvalsStore.outcomes(db, [id]);
      if (!row) return;
      const set = waiting.get(id);
      if (set) for (const w of [...set]) w.examine(row);
    } catch (err) {
      log.warn({ err, approval_id: id }, 'rereading a decided approval failed; the poll will');
    }
  }

  const unsubscribeAdvance = clock.onAdvance?.(() => {
    // Time jumped (test clock): overdue waits end now, not at their wall-clock timer.
    void pollOnce();
  });

  /**
   * Resolves once the approval is approved, denied or expired (also when the test clock
   * moves past expires_at). Rejects with the signal's reason when aborted, and with an
   * Error when the approval does not exist.
   */
  function waitForDecision(id: string, signal?: AbortSignal): Promise<DecisionOutcome> {
    return new Promise<DecisionOutcome>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      if (closed) return reject(new Error('the approvals service is closed'));
      const waiter = new Waiter(id, resolve, reject, signal);
      signal?.addEventListener('abort', waiter, { once: true });
      let set = waiting.get(id);
      if (!set) waiting.set(id, (set = new Set()));
      set.add(waiter);
      ensurePolling();
      approvalsStore.outcomes(db, [id]).then(
        (rows) => waiter.examine(rows[0]),
        (err) => waiter.fail(err),
      );
    });
  }

  // ---- grants --------------------------------------------------------------------------

  async function listGrants(developerId: string, opts: { environmentId?: string; limit: number; after: string | null }): Promise<Grant[]> {
    const rows = await grantsStore.list(db, developerId, { ...opts, nowMs: clock.nowMs() });
    return rows.map(toGrant);
  }

  /** Idempotent; 404 only for an id never issued to this developer. Takes effect at once. */
  async function revokeGrant(developerId: string, id: string): Promise<void> {
    const row = await grantsStore.get(db, developerId, id);
    if (!row) throw notFound();
    if (row.revoked_at == null) await grantsStore.revoke(db, developerId, id, clock.nowMs());
    grantsChanged(developerId, row.environment_id);
  }

  /**
   * Spends one use of a grant with limits for a request about to be forwarded (issue 26,
   * item 2): the gateway calls it right before forwarding a request a grant with limits
   * allowed. The limits are read from the store, the request's own checks (currency,
   * per-request amount, recipients) made against them, and the total and uses spent with
   * one conditional UPDATE, so across nodes exactly as many requests pass as fit. False: the
   * request is not covered after all (the gateway asks again). A grant without limits
   * spends nothing (true). Policy caches of the environment are dropped either way, so the
   * next decision sees the new `used`.
   */
  async function consumeGrant(developerId: string, grantId: string, facts: RequestFacts | null | undefined): Promise<boolean> {
    const row = await grantsStore.get(db, developerId, grantId);
    if (!row) return false;
    const limits = parseLimitsColumn(row.limits);
    if (limits === null) return true;
    try {
      if (!withinLimits(limits, NO_USE, facts)) return false;
      const use = useOf(limits, facts);
      const n = await grantsStore.consume(db, developerId, grantId, {
        minor_units: use.minor_units,
        ...(limits.total_minor_units !== undefined ? { total_minor_units: limits.total_minor_units } : {}),
        ...(limits.max_uses !== undefined ? { max_uses: limits.max_uses } : {}),
      }, clock.nowMs());
      return n === 1;
    } finally {
      grantsChanged(developerId, row.environment_id);
    }
  }

  /** An environment's grants in effect, in the form the policy engine indexes. */
  async function grantsInEffect(developerId: string, environmentId: string): Promise<EngineGrant[]> {
    const rows = await grantsStore.inEffectFor(db, developerId, environmentId, clock.nowMs());
    return rows.map(toEngineGrant);
  }

  function close(): void {
    closed = true;
    unsubscribeAdvance?.();
    if (pollTimer) clearInterval(pollTimer);
    pollTimer = null;
    const err = new Error('the approvals service is closing');
    for (const set of [...waiting.values()]) for (const w of [...set]) w.fail(err);
  }

  return {
    requestApproval, get, list, listCards, cardById, decide, expireDue, pruneUsedSignatures, waitForDecision, recheck,
    listGrants, revokeGrant, grantsInEffect, consumeGrant, close,
  };
}

export type ApprovalsService = ReturnType<typeof createApprovalsService>;
