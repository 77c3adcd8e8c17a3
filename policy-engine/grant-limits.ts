/**
 * Spending mandates on grants (issue 26, item 2): the limits a person approves with, and
 * whether one more request stays within them. PURE.
 *
 * A grant with limits covers a request only when every limit it has holds for it:
 *  - an amount limit (`per_request_minor_units`, `total_minor_units`) needs the request's
 *    decoded amount, in the grant's `currency`: a request in another currency, or with no
 *    decodable amount, is not covered (it asks again);
 *  - `per_request_minor_units`: the amount is at most this;
 *  - `total_minor_units`: what was used plus this amount is at most this;
 *  - `max_uses`: what was used plus one is at most this;
 *  - `recipients_within`: every recipient's domain is one of these (or a subdomain); no
 *    decodable recipients, or none at all, is not covered.
 * The store consumes `used` atomically when a request is forwarded (the check here is
 * against the cached `used`; the atomic consume is the final word, across nodes).
 */
import { domainSet, domainWithin, recipientDomains, type RequestFacts } from './facts.js';

export interface GrantLimits {
  readonly per_request_minor_units?: number;
  readonly total_minor_units?: number;
  /** Lower-case ISO 4217; required with an amount limit. */
  readonly currency?: string;
  readonly max_uses?: number;
  readonly recipients_within?: readonly string[];
}

export interface GrantUse {
  readonly minor_units: number;
  readonly uses: number;
}

export const NO_USE: GrantUse = Object.freeze({ minor_units: 0, uses: 0 });

/** True when the limits name an amount (so the request's amount must be read). */
export function limitsAmount(limits: GrantLimits): boolean {
  return limits.per_request_minor_units !== undefined || limits.total_minor_units !== undefined;
}

/** Whether one more request with these facts stays within the limits, given what was used. */
export function withinLimits(limits: GrantLimits, used: GrantUse | null | undefined, facts: RequestFacts | null | undefined): boolean {
  const u = used ?? NO_USE;
  if (limitsAmount(limits)) {
    const amount = facts?.amount;
    if (!amount || limits.currency === undefined || amount.currency !== limits.currency) return false;
    if (!Number.isSafeInteger(amount.minor_units) || amount.minor_units < 0) return false;
    if (limits.per_request_minor_units !== undefined && amount.minor_units > limits.per_request_minor_units) return false;
    if (limits.total_minor_units !== undefined && u.minor_units + amount.minor_units > limits.total_minor_units) return false;
  }
  if (limits.max_uses !== undefined && u.uses + 1 > limits.max_uses) return false;
  if (limits.recipients_within !== undefined) {
    const rs = facts?.recipients;
    if (!rs || rs.length === 0) return false;
    const ds = recipientDomains(rs);
    if (ds === null) return false;
    const set = domainSet(limits.recipients_within);
    for (const d of ds) if (!domainWithin(d, set)) return false;
  }
  return true;
}

/** What a forwarded request consumes of a grant with these limits (amount only when the limits count one). */
export function useOf(limits: GrantLimits, facts: RequestFacts | null | undefined): GrantUse {
  return { minor_units: limitsAmount(limits) ? facts?.amount?.minor_units ?? 0 : 0, uses: 1 };
}
