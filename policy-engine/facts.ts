/**
 * What a request would do, as the policy reads it (issue 26): the decoded amount of a
 * payment, the recipients of a mail or an invitation, the channel of a chat message. PURE.
 *
 * A field that is absent or null could not be read for this request (no decoder for the
 * API, a body not buffered, a compressed or ambiguous body, several values where the
 * provider may act on any): conditions and grant limits then take the riskier reading
 * (docs/policies-approvals.md). Values are normalised: currency lower-case ISO 4217,
 * amounts in the currency's minor units (integers), addresses lower-case `local@domain`,
 * a Slack channel id as sent.
 *
 * factsOf(), the decoder, is added beside this contract (issue 26, item 1).
 */
export interface Money {
  readonly currency: string;
  readonly minor_units: number;
}

export interface RequestFacts {
  readonly amount?: Money | null;
  readonly recipients?: readonly string[] | null;
  readonly channel?: string | null;
}

/** The domain of an address (`local@domain`), lower-case; null when it has none. */
export function domainOf(address: string): string | null {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return null;
  return address.slice(at + 1).toLowerCase().replace(/\.$/, '');
}

/**
 * An address is within a domain list when its domain is one of them or a subdomain of one
 * (`x@eu.acme.com` is within `acme.com`); `acme.com.evil.io` and `notacme.com` are not.
 */
export function addressWithin(address: string, domains: readonly string[]): boolean {
  const d = domainOf(address);
  return d !== null && domainWithin(d, domainSet(domains));
}

/**
 * A list's domains, normalised once (lower case, no leading or trailing dots), as a set: a
 * list is a rule's or a grant's, compiled once, and a request may name thousands of
 * recipients against 100 rules of 100 domains (a fourth review: comparing each pair froze
 * the service for seconds a request, every tenant's requests waiting).
 */
const DOMAIN_SETS = new WeakMap<readonly string[], ReadonlySet<string>>();
export function domainSet(domains: readonly string[]): ReadonlySet<string> {
  let set = DOMAIN_SETS.get(domains);
  if (set === undefined) {
    set = new Set(domains.map((raw) => raw.toLowerCase().replace(/^\.+|\.+$/g, '')).filter((dom) => dom.length > 0));
    DOMAIN_SETS.set(domains, set);
  }
  return set;
}

/** Whether a (lower-case) domain is one of the set's or under one: itself or a parent is in the set. */
export function domainWithin(domain: string, set: ReadonlySet<string>): boolean {
  let rest = domain;
  for (;;) {
    if (set.has(rest)) return true;
    const dot = rest.indexOf('.');
    if (dot < 0) return false;
    rest = rest.slice(dot + 1);
  }
}

/** The distinct domains of a request's recipients (null: one has none), read once per request whatever the rules. */
const RECIPIENT_DOMAINS = new WeakMap<readonly string[], readonly string[] | null>();
export function recipientDomains(recipients: readonly string[]): readonly string[] | null {
  let out = RECIPIENT_DOMAINS.get(recipients);
  if (out === undefined) {
    const set = new Set<string>();
    let ok = true;
    for (const r of recipients) {
      const d = typeof r === 'string' ? domainOf(r) : null;
      if (d === null) {
        ok = false;
        break;
      }
      set.add(d);
    }
    out = ok ? [...set] : null;
    RECIPIENT_DOMAINS.set(recipients, out);
  }
  return out;
}

// The decoder, beside the contract (PURE; it reads the classifier's and describe's helpers).
export { factsOf, factsNeedBody } from './request-facts.js';
