/**
 * The decision body (service.md "Decision (request body)", Errors; decisions.md
 * "Approvals and grants"). Hand-written rather than joi: every malformed decision is
 * 400 `invalid_decision` (never 422), and two rules have codes of their own
 * (`missing_scope`). Checks that need the approval (`invalid_scope`: ids, `until` in the
 * future) and `scope_too_wide` run in the service, after these.
 */
import { ServiceError } from '../lib/errors.js';
import type { Scope } from '../policy-engine/index.js';

export type DecisionScope =
  | { kind: 'once' }
  | { kind: 'task'; task_id: string }
  | { kind: 'session'; session_id: string }
  | { kind: 'until'; until: number }
  | { kind: 'permanent' };

export type ParsedDecision = { decision: 'deny' } | { decision: 'approve'; scope: DecisionScope };

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

/**
 * Parses a JSON value into a decision or throws the 400 of the spec:
 * - `invalid_decision`: not an object; a field other than decision and scope; decision
 *   missing or not approve/deny; deny with a scope; scope not an object; kind missing or
 *   unknown; a field the kind does not have; task_id/session_id not a string; until
 *   missing or not an integer;
 * - `missing_scope`: approve without a scope (absent or null); a task or session scope
 *   whose id is missing, null or empty.
 * `scope: null` counts as no scope (on deny too).
 */
export function parseDecision(body: unknown): ParsedDecision {
  if (!isPlainObject(body)) throw invalid('the body must be an object {decision, scope?}');
  for (const k of Object.keys(body)) {
    if (k !== 'decision' && k !== 'scope') throw invalid(`unknown field ${k}; a decision is {decision, scope?}`);
  }
  const { decision } = body;
  if (decision !== 'approve' && decision !== 'deny') throw invalid('decision must be approve or deny');
  const scope = body.scope;
  const hasScope = scope !== undefined && scope !== null;
  if (decision === 'deny') {
    if (hasScope) throw invalid('a deny carries no scope');
    return { decision: 'deny' };
  }
  if (!hasScope) throw missing('approve needs a scope');
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
