/**
 * Conditions on rules (issue 26, item 1; docs/policies-approvals.md "Conditions"). PURE.
 *
 * A rule with `when` matches only when its connector, its category and every condition
 * hold. A condition that cannot be read for a request (no decodable amount, an amount in
 * another currency, recipients or a channel the decoder could not read one way, a count
 * the caller did not supply) is given the riskier reading:
 *  - on a `deny` or `ask` rule it holds (the rule applies: refuse or ask);
 *  - on an `allow` rule it does not (the rule does not let the request through).
 * So a request that hides what it does is never treated better than any reading of it.
 */
import type { Effect } from './categories.js';
import { domainSet, domainWithin, recipientDomains, type Money, type RequestFacts } from './facts.js';

export const COUNT_WINDOWS = ['hour', 'day'] as const;
export type CountWindow = (typeof COUNT_WINDOWS)[number];
export const COUNT_SCOPES = ['environment', 'end_user'] as const;
export type CountScope = (typeof COUNT_SCOPES)[number];

/** Window lengths on the service clock (rolling windows). */
export const WINDOW_MS: Readonly<Record<CountWindow, number>> = Object.freeze({ hour: 3_600_000, day: 86_400_000 });
/** The longest window: count events older than this are never read again. */
export const MAX_WINDOW_MS = WINDOW_MS.day;

export interface CountOver {
  /** The condition holds once `max` requests were already forwarded in the window. */
  readonly max: number;
  readonly per: CountWindow;
  /** Omitted: `environment`. */
  readonly scope?: CountScope;
}

export interface Conditions {
  /** The decoded amount, in this currency, is greater than `minor_units`. */
  readonly amount_over?: Money;
  /** Some recipient's domain is not one of these (nor a subdomain of one). */
  readonly recipients_outside?: readonly string[];
  /** The Slack channel is not one of these (compared as sent). */
  readonly channels_outside?: readonly string[];
  /** `max` requests of the rule's connector and category were already forwarded in the window. */
  readonly count_over?: CountOver;
}

/** What is known of a request when its conditions are checked. */
export interface ConditionInput {
  readonly facts?: RequestFacts | null;
  /** Requests already forwarded in the window of this rule's count_over; undefined: unknown. */
  readonly count?: number;
}

/** true / false when the condition could be read; null when it could not. */
function amountOver(c: Money, facts: RequestFacts | null | undefined): boolean | null {
  const a = facts?.amount;
  if (!a || a.currency !== c.currency || !Number.isSafeInteger(a.minor_units) || a.minor_units < 0) return null;
  return a.minor_units > c.minor_units;
}

function recipientsOutside(domains: readonly string[], facts: RequestFacts | null | undefined): boolean | null {
  const rs = facts?.recipients;
  if (!Array.isArray(rs)) return null;
  // Each distinct domain once, against the rule's domains as a set (facts.ts): linear in both.
  const ds = recipientDomains(rs);
  if (ds === null) return true;
  const set = domainSet(domains);
  for (const d of ds) if (!domainWithin(d, set)) return true;
  return false;
}

function channelOutside(channels: readonly string[], facts: RequestFacts | null | undefined): boolean | null {
  const ch = facts?.channel;
  if (typeof ch !== 'string' || ch === '') return null;
  return !channels.includes(ch);
}

function countOver(c: CountOver, count: number | undefined): boolean | null {
  if (typeof count !== 'number' || !Number.isFinite(count) || count < 0) return null;
  return count >= c.max;
}

/**
 * Whether every condition of `when` holds for a rule of this effect. Unreadable conditions
 * take the riskier reading (module comment): held for deny/ask, not held for allow.
 */
export function conditionsHold(when: Conditions, effect: Effect, input: ConditionInput): boolean {
  const unknown = effect !== 'allow';
  const checks: Array<boolean | null> = [];
  if (when.amount_over !== undefined) checks.push(amountOver(when.amount_over, input.facts));
  if (when.recipients_outside !== undefined) checks.push(recipientsOutside(when.recipients_outside, input.facts));
  if (when.channels_outside !== undefined) checks.push(channelOutside(when.channels_outside, input.facts));
  if (when.count_over !== undefined) checks.push(countOver(when.count_over, input.count));
  for (const c of checks) if (!(c ?? unknown)) return false;
  return true;
}

/** Whether the conditions read the request's decoded fields (so the body must be buffered). */
export function conditionsNeedFacts(when: Conditions): boolean {
  return when.amount_over !== undefined || when.recipients_outside !== undefined || when.channels_outside !== undefined;
}
