/**
 * The decision body (service.md "Decision (request body)", Errors; decisions.md
 * "Approvals and grants"). Hand-written rather than joi: every malformed decision is
 * 400 `invalid_decision` (never 422), and two rules have codes of their own
 * (`missing_scope`). Checks that need the approval (`invalid_scope`: ids, `until` in the
 * future) and `scope_too_wide` run in the service, after these.
 */
import { ServiceError } from '../lib/errors.js';
import type { GrantLimits, Scope } from '../policy-engine/index.js';

export type DecisionScope =
  | { kind: 'once' }
  | { kind: 'task'; task_id: string }
  | { kind: 'session'; session_id: string }
  | { kind: 'until'; until: number }
  | { kind: 'permanent' };

/** `limits` is present only when the body gave some (issue 26, item 2: spending mandates). */
export type ParsedDecision = { decision: 'deny' } | { decision: 'approve'; scope: DecisionScope; limits?: GrantLimits };

/** The extra field each kind carries (beside `kind`). */
const SCOPE_FIELDS: Record<DecisionScope['kind'], string | null> = {
  once: null,
  task: 'task_id',
  session: 'session_id',
  until: 'until',
  permanent: null,
};

/** The decision kind is written `until`; everywhere else it is `time_limited`. */
export function scopeOf(s: DecisionScope): Scope {
  return s.kind === 'until' ? 'time_limited' : s.kind;
}

/**
 * Latest accepted `until`: 9999-12-31T23:59:59Z, the last instant an RFC 3339 timestamp
 * (the grant's expires_at) can show.
 */
export const MAX_UNTIL_SECS = 253402300799;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

const invalid = (message: string) => new ServiceError('invalid_decision', message);
const missing = (message: string) => new ServiceError('missing_scope', message);

/** Bounds of `limits` (docs/policies-approvals.md, Spending mandates). */
export const MAX_RECIPIENT_DOMAINS = 50;
const LIMIT_FIELDS = new Set(['per_request_minor_units', 'total_minor_units', 'currency', 'max_uses', 'recipients_within']);
/** A DNS name: labels of letters, digits and hyphens; no wildcard, no address, no trailing dot. */
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

function positiveInt(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw invalid(`limits.${name} must be a positive integer`);
  return v;
}

/**
 * The `limits` of an approve (issue 26, item 2), or throws `invalid_decision`: not an
 * object; an unknown field; an amount or max_uses that is not a positive integer; currency
 * missing with an amount limit, given without one, or not three letters;
 * recipients_within not a non-empty list of at most 50 domain names; no limit at all.
 * The currency is lower-cased (facts carry it so); everything else is kept as given.
 */
export function parseLimits(v: unknown): GrantLimits {
  if (!isPlainObject(v)) throw invalid('limits must be an object {per_request_minor_units?, total_minor_units?, currency?, max_uses?, recipients_within?}');
  for (const k of Object.keys(v)) if (!LIMIT_FIELDS.has(k)) throw invalid(`limits has no field ${k}`);
  const out: { -readonly [K in keyof GrantLimits]: GrantLimits[K] } = {};
  if (v.per_request_minor_units !== undefined) out.per_request_minor_units = positiveInt(v.per_request_minor_units, 'per_request_minor_units');
  if (v.total_minor_units !== undefined) out.total_minor_units = positiveInt(v.total_minor_units, 'total_minor_units');
  const amount = out.per_request_minor_units !== undefined || out.total_minor_units !== undefined;
  if (v.currency !== undefined) {
    if (typeof v.currency !== 'string' || !/^[A-Za-z]{3}$/.test(v.currency)) throw invalid('limits.currency must be a three-letter ISO 4217 code');
    if (!amount) throw invalid('limits.currency goes with an amount limit (per_request_minor_units or total_minor_units)');
    out.currency = v.currency.toLowerCase();
  } else if (amount) throw invalid('limits.currency is required with an amount limit');
  if (v.max_uses !== undefined) out.max_uses = positiveInt(v.max_uses, 'max_uses');
  if (v.recipients_within !== undefined) {
    const r = v.recipients_within;
    if (!Array.isArray(r) || r.length === 0 || r.length > MAX_RECIPIENT_DOMAINS) {
      throw invalid(`limits.recipients_within must be a list of 1 to ${MAX_RECIPIENT_DOMAINS} domain names`);
    }
    for (const d of r) if (typeof d !== 'string' || !DOMAIN.test(d)) throw invalid(`limits.recipients_within: ${JSON.stringify(d)} is not a domain name (like acme.com)`);
    out.recipients_within = [...(r as string[])];
  }
  if (Object.keys(out).length === 0) throw invalid('limits names no limit; leave it out for a grant without limits');
  return out;
}

/**
 * Parses a JSON value into a decision or throws the 400 of the spec:
 * - `invalid_decision`: not an object; a field other than decision, scope and limits;
 *   decision missing or not approve/deny; deny with a scope or limits; scope not an
 *   object; kind missing or unknown; a field the kind does not have; task_id/session_id
 *   not a string; until missing or not an integer; limits on a `once` approval; limits
 *   that parseLimits refuses;
 * - `missing_scope`: approve without a scope (absent or null); a task or session scope
 *   whose id is missing, null or empty.
 * `scope: null` counts as no scope and `limits: null` as no limits (on deny too). Whether
 * the limits cover the request being approved needs the approval: the service checks it.
 */
export function parseDecision(body: unknown): ParsedDecision {
  if (!isPlainObject(body)) throw invalid('the body must be an object {decision, scope?}');
  for (const k of Object.keys(body)) {
    if (k !== 'decision' && k !== 'scope' && k !== 'limits') throw invalid(`unknown field ${k}; a decision is {decision, scope?, limits?}`);
  }
  const { decision } = body;
  if (decision !== 'approve' && decision !== 'deny') throw invalid('decision must be approve or deny');
  const scope = body.scope;
  const hasScope = scope !== undefined && scope !== null;
  const hasLimits = body.limits !== undefined && body.limits !== null;
  if (decision === 'deny') {
    if (hasScope) throw invalid('a deny carries no scope');
    if (hasLimits) throw invalid('a deny carries no limits');
    return { decision: 'deny' };
  }
  if (!hasScope) throw missing('approve needs a scope');
  const parsed = parseApprove(scope);
  if (!hasLimits) return parsed;
  // A `once` approval stores no grant, so there is nothing for limits to bound.
  if (parsed.scope.kind === 'once') throw invalid('limits bound a grant, and a once approval stores none: approve with a wider scope, or leave limits out');
  return { ...parsed, limits: parseLimits(body.limits) };
}

function parseApprove(scope: unknown): { decision: 'approve'; scope: DecisionScope } {
  if (!isPlainObject(scope)) throw invalid('scope must be an object {kind, ...}');
  const kind = scope.kind;
  if (typeof kind !== 'string' || !Object.hasOwn(SCOPE_FIELDS, kind)) {
    throw invalid('scope.kind must be one of once, task, session, until, permanent');
  }
  const k = kind as DecisionScope['kind'];
  const extra = SCOPE_FIELDS[k];
  for (const f of Object.keys(scope)) {
    if (f !== 'kind' && f !== extra) throw invalid(`scope of kind ${k} has no field ${f}`);
  }
  switch (k) {
    case 'once':
    case 'permanent':
      return { decision: 'approve', scope: { kind: k } };
    case 'task':
    case 'session': {
      const field = extra as 'task_id' | 'session_id';
      const id = scope[field];
      if (id === undefined || id === null || id === '') throw missing(`a ${k} scope needs a non-empty ${field}`);
      if (typeof id !== 'string') throw invalid(`scope.${field} must be a string`);
      return k === 'task'
        ? { decision: 'approve', scope: { kind: 'task', task_id: id } }
        : { decision: 'approve', scope: { kind: 'session', session_id: id } };
    }
    case 'until': {
      const until = scope.until;
      if (typeof until !== 'number' || !Number.isSafeInteger(until)) throw invalid('scope.until must be an integer (Unix seconds)');
      return { decision: 'approve', scope: { kind: 'until', until } };
    }
  }
}
