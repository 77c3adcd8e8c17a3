/**
 * Spending mandates in the decision body (issue 26, item 2; approvals/decision.ts
 * parseLimits): what `limits` accepts, the 400s it gives, and whether limits cover the
 * request being approved (approvals.service outsideLimits).
 */
import { expect } from 'chai';
import { parseDecision } from '../../../approvals/decision.js';
import { outsideLimits } from '../../../approvals/approvals.service.js';
import { ServiceError } from '../../../lib/errors.js';

function codeOf(body: unknown): string {
  try {
    parseDecision(body);
    return 'ok';
  } catch (err) {
    if (err instanceof ServiceError) return err.code;
    throw err;
  }
}

const approve = (limits: unknown, scope: unknown = { kind: 'permanent' }) => ({ decision: 'approve', scope, limits });

describe('parseDecision: limits (spending mandates)', () => {
  const ok: Array<[unknown, unknown]> = [
    [{ per_request_minor_units: 5000, total_minor_units: 8000, currency: 'USD' }, { per_request_minor_units: 5000, total_minor_units: 8000, currency: 'usd' }],
    [{ total_minor_units: 1, currency: 'eur' }, { total_minor_units: 1, currency: 'eur' }],
    [{ max_uses: 3 }, { max_uses: 3 }],
    [{ recipients_within: ['acme.com', 'EU.Partner.io'] }, { recipients_within: ['acme.com', 'EU.Partner.io'] }],
    [{ max_uses: 1, recipients_within: ['x.org'] }, { max_uses: 1, recipients_within: ['x.org'] }],
  ];
  for (const [limits, want] of ok) {
    it(`accepts ${JSON.stringify(limits)}`, () => {
      expect(parseDecision(approve(limits))).to.deep.equal({ decision: 'approve', scope: { kind: 'permanent' }, limits: want });
    });
  }

  it('every scope but once takes limits; null or absent is no limits (the result as before)', () => {
    for (const scope of [{ kind: 'task', task_id: 't' }, { kind: 'session', session_id: 's' }, { kind: 'until', until: 1900000000 }, { kind: 'permanent' }]) {
      expect(parseDecision(approve({ max_uses: 2 }, scope))).to.deep.include({ limits: { max_uses: 2 } });
      expect(parseDecision({ decision: 'approve', scope })).to.not.have.property('limits');
      expect(parseDecision(approve(null, scope))).to.not.have.property('limits');
    }
    expect(parseDecision({ decision: 'deny', limits: null })).to.deep.equal({ decision: 'deny' });
  });

  const errors: Array<[unknown, string, string]> = [
    [{ decision: 'deny', limits: { max_uses: 1 } }, 'invalid_decision', 'a deny with limits'],
    [approve({ max_uses: 1 }, { kind: 'once' }), 'invalid_decision', 'limits on once (a once approval stores no grant)'],
    [{ decision: 'approve', limits: { max_uses: 1 } }, 'missing_scope', 'limits without a scope: the scope is missing first'],
    [approve('5000'), 'invalid_decision', 'limits not an object'],
    [approve([]), 'invalid_decision', 'limits an array'],
    [approve({}), 'invalid_decision', 'no limit at all'],
    [approve({ max_uses: 1, per_request: 5 }), 'invalid_decision', 'an unknown field'],
    [approve({ per_request_minor_units: -1, currency: 'usd' }), 'invalid_decision', 'a negative amount'],
    [approve({ per_request_minor_units: 0, currency: 'usd' }), 'invalid_decision', 'a zero amount'],
    [approve({ total_minor_units: 10.5, currency: 'usd' }), 'invalid_decision', 'a fractional amount'],
    [approve({ total_minor_units: '100', currency: 'usd' }), 'invalid_decision', 'an amount as a string'],
    [approve({ total_minor_units: 2 ** 53, currency: 'usd' }), 'invalid_decision', 'an amount past the safe integers'],
    [approve({ per_request_minor_units: 100 }), 'invalid_decision', 'an amount limit without its currency'],
    [approve({ total_minor_units: 100, currency: 'dollars' }), 'invalid_decision', 'a currency that is not three letters'],
    [approve({ total_minor_units: 100, currency: 3 }), 'invalid_decision', 'a currency that is not a string'],
    [approve({ currency: 'usd', max_uses: 1 }), 'invalid_decision', 'a currency without an amount limit'],
    [approve({ max_uses: 0 }), 'invalid_decision', 'max_uses 0'],
    [approve({ max_uses: 1.5 }), 'invalid_decision', 'a fractional max_uses'],
    [approve({ recipients_within: [] }), 'invalid_decision', 'no recipient domain'],
    [approve({ recipients_within: 'acme.com' }), 'invalid_decision', 'recipients_within not a list'],
    [approve({ recipients_within: ['bob@acme.com'] }), 'invalid_decision', 'an address, not a domain'],
    [approve({ recipients_within: ['*.acme.com'] }), 'invalid_decision', 'a wildcard'],
    [approve({ recipients_within: [''] }), 'invalid_decision', 'an empty domain'],
    [approve({ recipients_within: [5] }), 'invalid_decision', 'a domain that is not a string'],
    [approve({ recipients_within: Array.from({ length: 51 }, (_, i) => `d${i}.com`) }), 'invalid_decision', 'more than 50 domains'],
  ];
  for (const [body, code, what] of errors) {
    it(`${code}: ${what}`, () => {
      expect(codeOf(body)).to.equal(code);
    });
  }
});

describe('outsideLimits: the limits must cover the request being approved', () => {
  const usd = (minor: number) => ({ amount: { currency: 'usd', minor_units: minor } });
  const limits = { per_request_minor_units: 5000, total_minor_units: 8000, currency: 'usd' };
  it('a request within them: null', () => {
    expect(outsideLimits(limits, usd(3000))).to.equal(null);
    expect(outsideLimits(limits, usd(5000))).to.equal(null);
    expect(outsideLimits({ max_uses: 1 }, null)).to.equal(null);
    expect(outsideLimits({ recipients_within: ['acme.com'] }, { recipients: ['a@acme.com', 'b@eu.acme.com'] })).to.equal(null);
  });
  it('over the per-request limit, another currency, no readable amount, a recipient outside: a reason', () => {
    expect(outsideLimits(limits, usd(6000))).to.match(/per_request_minor_units/);
    expect(outsideLimits({ total_minor_units: 1000, currency: 'usd' }, usd(1001))).to.match(/total_minor_units/);
    expect(outsideLimits(limits, { amount: { currency: 'eur', minor_units: 100 } })).to.match(/EUR, not USD/);
    expect(outsideLimits(limits, null)).to.match(/could not be read/);
    expect(outsideLimits(limits, { amount: null })).to.match(/could not be read/);
    expect(outsideLimits({ recipients_within: ['acme.com'] }, { recipients: ['a@acme.com', 'x@acme.com.evil.io'] })).to.match(/outside/);
    expect(outsideLimits({ recipients_within: ['acme.com'] }, { recipients: null })).to.match(/could not be read/);
    expect(outsideLimits({ recipients_within: ['acme.com'] }, { recipients: [] })).to.match(/could not be read/);
  });
});
