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
  if (d === null) return false;
  for (const raw of domains) {
    const dom = raw.toLowerCase().replace(/^\.+|\.+$/g, '');
    if (dom.length > 0 && (d === dom || d.endsWith(`.${dom}`))) return true;
  }
  return false;
}

// The decoder, beside the contract (PURE; it reads the classifier's and describe's helpers).
export { factsOf, factsNeedBody } from './request-facts.js';
