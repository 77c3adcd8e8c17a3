/**
 * Action categories, scopes and effects of the policy model (service.md "Action
 * categories", "Policy rule"; decisions.md "Approvals and grants").
 *
 * PURE: no imports. Everything here is a constant or a total function over it.
 */

/** The six categories. Every request that uses a credential is put in exactly one. */
export const CATEGORIES = ['read', 'write', 'send', 'delete', 'pay', 'change_permission'] as const;
export type Category = (typeof CATEGORIES)[number];

/** Categories that an allow rule never lets through (they ask unless a grant covers them). */
export const HIGH_RISK: ReadonlySet<Category> = new Set<Category>(['send', 'delete', 'pay', 'change_permission']);

/** Rule effects. */
export const EFFECTS = ['allow', 'deny', 'ask'] as const;
export type Effect = (typeof EFFECTS)[number];

/** Approval scopes, narrowest to widest. `once` leaves no grant. */
export const SCOPES = ['once', 'task', 'session', 'time_limited', 'permanent'] as const;
export type Scope = (typeof SCOPES)[number];

/** Scopes a stored grant can have (every scope but `once`). */
export const GRANT_SCOPES = ['task', 'session', 'time_limited', 'permanent'] as const;
export type GrantScope = (typeof GRANT_SCOPES)[number];

/**
 * Danger order, least to most dangerous. Used where one request does several things
 * (a Google batch, a Calendar delete that also mails the guests) and must be put in one
 * category: it takes the most dangerous. Why this order:
 *  - change_permission: hands lasting access to someone else; the harm continues and
 *    multiplies after the request (every later read by the new party).
 *  - pay: moves money; often reversible only by a human dispute.
 *  - delete: destroys the user's data; nothing in the request's response can undo it.
 *  - send: irreversible communication, but destroys nothing and grants nothing.
 *  - write: changes data in a way the user can usually see and undo.
 *  - read: changes nothing.
 */
export const DANGER_ORDER: readonly Category[] = ['read', 'write', 'send', 'delete', 'pay', 'change_permission'];

const CATEGORY_SET: ReadonlySet<string> = new Set(CATEGORIES);
const EFFECT_SET: ReadonlySet<string> = new Set(EFFECTS);
const SCOPE_WIDTH: ReadonlyMap<string, number> = new Map(SCOPES.map((s, i) => [s, i]));
const GRANT_SCOPE_SET: ReadonlySet<string> = new Set(GRANT_SCOPES);
const DANGER_RANK: ReadonlyMap<string, number> = new Map(DANGER_ORDER.map((c, i) => [c, i]));

export function isCategory(value: unknown): value is Category {
  return typeof value === 'string' && CATEGORY_SET.has(value);
}

export function isEffect(value: unknown): value is Effect {
  return typeof value === 'string' && EFFECT_SET.has(value);
}

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && SCOPE_WIDTH.has(value);
}

export function isGrantScope(value: unknown): value is GrantScope {
  return typeof value === 'string' && GRANT_SCOPE_SET.has(value);
}

/**
 * True for send, delete, pay, change_permission. A string that is not one of the six
 * categories is treated as high-risk: an unknown kind of action must never be let
 * through by an allow rule (fail closed).
 */
export function isHighRisk(category: string): boolean {
  return HIGH_RISK.has(category as Category) || !CATEGORY_SET.has(category);
}

/** 0 for `once` … 4 for `permanent`. Throws on a value that is not a scope. */
export function scopeWidth(scope: Scope): number {
  const w = SCOPE_WIDTH.get(scope);
  if (w === undefined) throw new TypeError(`not a scope: ${String(scope)}`);
  return w;
}

/** True when `a` is strictly wider than `b` (the `scope_too_wide` test). */
export function isWiderThan(a: Scope, b: Scope): boolean {
  return scopeWidth(a) > scopeWidth(b);
}

/** The narrowest of the given scopes. */
export function narrowest(first: Scope, ...rest: Scope[]): Scope {
  let best = first;
  let bestWidth = scopeWidth(first);
  for (const s of rest) {
    const w = scopeWidth(s);
    if (w < bestWidth) {
      best = s;
      bestWidth = w;
    }
  }
  return best;
}

/** Position in DANGER_ORDER (read 0 … change_permission 5). Throws on a non-category. */
export function dangerRank(category: Category): number {
  const r = DANGER_RANK.get(category);
  if (r === undefined) throw new TypeError(`not a category: ${String(category)}`);
  return r;
}

/** The more dangerous of two categories; `a` on a tie. */
export function moreDangerous(a: Category, b: Category): Category {
  return dangerRank(b) > dangerRank(a) ? b : a;
}
