/**
 * Property tests for rule conditions (issue 26, items 1 and 5): a condition never turns a
 * deny into an allow, an undecodable request never satisfies an allow condition (it is
 * never treated better than any decoded reading of it), and the compiled and naive forms
 * of evaluate() keep agreeing with conditions, decoded facts, counts and grant limits.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { CATEGORIES, GRANT_SCOPES, HIGH_RISK, SCOPES, scopeWidth, type Category } from '../../../policy-engine/categories.js';
import { conditionsNeedFacts, type Conditions } from '../../../policy-engine/conditions.js';
import { compilePolicy, evaluate, evaluateNaive, GrantIndex, type Decision, type GrantLike, type PolicyRequest } from '../../../policy-engine/evaluate.js';
import type { RequestFacts } from '../../../policy-engine/facts.js';
import { validateRules, type Rule } from '../../../policy-engine/rules.js';

const NOW = 1_800_000_000_000;
const RUNS = { numRuns: 2000 };
const CONNECTORS = ['gmail', 'slack', 'secret:A'];

const money = fc.record({ currency: fc.constantFrom('usd', 'eur'), minor_units: fc.integer({ min: 0, max: 2000 }) });
const conditions: fc.Arbitrary<Conditions> = fc.record(
  {
    amount_over: money,
    recipients_outside: fc.subarray(['acme.com', 'x.io'], { minLength: 1 }),
    channels_outside: fc.subarray(['C1', 'C2'], { minLength: 1 }),
    count_over: fc.record({ max: fc.integer({ min: 0, max: 5 }), per: fc.constantFrom('hour', 'day' as const), scope: fc.constantFrom('environment', 'end_user' as const) }),
  },
  { requiredKeys: [] },
);

/** Valid rules, about half with conditions. */
const rule: fc.Arbitrary<Rule> = fc
  .record(
    {
      connector: fc.constantFrom(...CONNECTORS),
      category: fc.constantFrom(...CATEGORIES),
      effect: fc.constantFrom('allow', 'deny', 'ask' as const),
      max_scope: fc.constantFrom(...SCOPES),
      when: conditions,
    },
    { requiredKeys: ['effect'] },
  )
  .map((r) => {
    const out: { connector?: string; category?: Category; effect: Rule['effect']; max_scope?: Rule['max_scope']; when?: Conditions } = { ...r };
    if (out.effect !== 'ask') delete out.max_scope;
    if (out.effect === 'allow' && out.category !== undefined && HIGH_RISK.has(out.category)) delete out.category;
    return out as Rule;
  });
const rules = fc.array(rule, { maxLength: 10 });

const addresses = fc.array(fc.constantFrom('a@acme.com', 'b@eu.acme.com', 'c@x.io', 'e@evil.io', 'nodomain'), { maxLength: 3 });
const facts: fc.Arbitrary<RequestFacts> = fc.record(
  {
    amount: fc.option(money, { nil: null }),
    recipients: fc.option(addresses, { nil: null }),
    channel: fc.option(fc.constantFrom('C1', 'C2', 'C3'), { nil: null }),
  },
  { requiredKeys: [] },
);
const counts = fc.array(fc.option(fc.integer({ min: 0, max: 7 }), { nil: undefined }), { minLength: 10, maxLength: 10 })
  .map((xs) => new Map(xs.flatMap((n, i) => (n === undefined ? [] : [[i, n] as [number, number]]))));

const request: fc.Arbitrary<PolicyRequest> = fc.record(
  {
    connector: fc.constantFrom(...CONNECTORS),
    category: fc.constantFrom(...CATEGORIES),
    task_id: fc.constantFrom('t1', null),
    session_id: fc.constantFrom('s1', null),
    infrastructure: fc.boolean(),
    facts,
    counts,
  },
  { requiredKeys: ['connector', 'category'] },
);

const grants: fc.Arbitrary<GrantLike[]> = fc
  .array(
    fc.record({
      connector: fc.constantFrom(...CONNECTORS),
      category: fc.constantFrom(...CATEGORIES),
      scope: fc.constantFrom(...GRANT_SCOPES),
      task_id: fc.constantFrom('t1', null),
      session_id: fc.constantFrom('s1', null),
      expires_at: fc.oneof(fc.constant(null), fc.integer({ min: NOW - 5, max: NOW + 5 })),
      limits: fc.option(
        fc.record({ currency: fc.constant('usd'), per_request_minor_units: fc.integer({ min: 0, max: 2000 }) }, { requiredKeys: ['currency'] }),
        { nil: null },
      ),
    }),
    { maxLength: 6 },
  )
  .map((gs) => gs.map((g, i) => ({ ...g, id: `grt_${i}` })));

/** Permissiveness: deny < ask (narrower max_scope is less) < allow. */
function permissiveness(d: Decision): number {
  if (d.decision === 'deny') return 0;
  if (d.decision === 'ask') return 1 + scopeWidth(d.max_scope!);
  return 10;
}

/** The same request with nothing decodable and no counts: what an agent hiding everything gets. */
const undecodable = (req: PolicyRequest): PolicyRequest => ({ ...req, facts: { amount: null, recipients: null, channel: null }, counts: new Map() });

describe('policy-engine conditions: properties (issue 26)', () => {
  it('generated rules with conditions pass validateRules unchanged', () => {
    fc.assert(fc.property(rules, (rs) => {
      const out = validateRules(rs);
      expect(out.ok).to.equal(true);
      if (out.ok) expect(out.rules).to.deep.equal(rs);
    }), RUNS);
  });

  it('compiled, array and naive evaluation agree with conditions, facts, counts and grant limits', () => {
    fc.assert(
      fc.property(rules, request, grants, fc.boolean(), (rs, req, gs, ignoreGrants) => {
        const opts = { nowMs: NOW, ignoreGrants };
        const naive = evaluateNaive(rs, req, gs, opts);
        const fast = evaluate(compilePolicy(rs), req, new GrantIndex(gs), opts);
        const arrays = evaluate(rs, req, gs, opts);
        expect(fast).to.deep.equal(naive);
        expect(arrays).to.deep.equal(naive);
        expect(fast.grant).to.equal(naive.grant);
      }),
      RUNS,
    );
  });

  it('the undecodable reading: every deny/ask condition holds, no allow condition does', () => {
    fc.assert(
      fc.property(rules, request, grants, (rs, req, gs) => {
        const known = evaluateNaive(rs, req, gs, { nowMs: NOW });
        const hidden = evaluateNaive(rs, undecodable(req), gs, { nowMs: NOW });
        for (const i of known.matched_rules) if (rs[i]!.effect !== 'allow') expect(hidden.matched_rules).to.include(i);
        for (const i of hidden.matched_rules) if (rs[i]!.effect === 'allow') expect(known.matched_rules).to.include(i);
        // So: denied by a rule when decoded, denied by a rule when hidden; allowed by a rule
        // when hidden, allowed by a rule when decoded.
        if (known.reason === 'deny_rule') expect(hidden.reason).to.equal('deny_rule');
        if (hidden.reason === 'rule') expect(known.reason).to.equal('rule');
        // A high-risk request is never treated better hidden than decoded. (A read or write
        // can be: an ask rule whose condition holds asks where, without a matching allow
        // rule, the decoded request falls to no_rule. That is the ask rule doing its job.)
        if (HIGH_RISK.has(req.category) && !req.infrastructure) expect(permissiveness(hidden)).to.be.at.most(permissiveness(known));
      }),
      RUNS,
    );
  });

  it('an undecodable request never satisfies an allow condition', () => {
    fc.assert(
      fc.property(rules, request, (rs, req) => {
        const d = evaluate(compilePolicy(rs), undecodable(req), [], { nowMs: NOW });
        // `when: {}` names no condition: it is an unconditional rule (a CI run found the case).
        const conditional = (i: number): boolean => rs[i]!.when !== undefined && Object.keys(rs[i]!.when!).length > 0;
        for (const i of d.matched_rules) {
          if (rs[i]!.effect === 'allow') expect(conditional(i), `rule ${i} matched an undecodable request by its conditions`).to.equal(false);
        }
        // And so an allow by rule comes from an unconditional allow rule only.
        if (d.reason === 'rule') expect(d.matched_rules.some((i) => rs[i]!.effect === 'allow' && !conditional(i))).to.equal(true);
      }),
      RUNS,
    );
  });

  it('a condition never turns a deny into an allow: conditions on allow rules only narrow them', () => {
    fc.assert(
      fc.property(rules, request, grants, fc.array(conditions, { minLength: 10, maxLength: 10 }), (rs, req, gs, extra) => {
        // Every allow rule gets (more) conditions: the decision can only get stricter.
        const narrowed = rs.map((r, i) => (r.effect === 'allow' ? { ...r, when: { ...extra[i], ...r.when } } : r));
        const before = evaluateNaive(rs, req, gs, { nowMs: NOW });
        const after = evaluateNaive(narrowed, req, gs, { nowMs: NOW });
        expect(permissiveness(after)).to.be.at.most(permissiveness(before));
        if (before.decision === 'deny') expect(after.decision).to.equal('deny');
      }),
      RUNS,
    );
  });

  it('a deny rule whose conditions hold always denies, whatever the other rules\' conditions say', () => {
    fc.assert(
      fc.property(rules, request, grants, (rs, req, gs) => {
        const d = evaluate(compilePolicy(rs), req, new GrantIndex(gs), { nowMs: NOW });
        const denyMatched = d.matched_rules.some((i) => rs[i]!.effect === 'deny');
        if (req.infrastructure === true && req.connector.startsWith('secret:')) return;
        expect(d.decision === 'deny').to.equal(denyMatched || d.reason === 'no_rule');
        if (denyMatched) expect(d.reason).to.equal('deny_rule');
      }),
      RUNS,
    );
  });

  it('no conditions and no facts let a high-risk category through by rule', () => {
    fc.assert(
      fc.property(rules, request, (rs, req) => {
        fc.pre(HIGH_RISK.has(req.category));
        const d = evaluate(compilePolicy(rs), req, [], { nowMs: NOW });
        expect(d.reason).to.not.equal('rule');
      }),
      RUNS,
    );
  });

  it('facts are read only where a condition needs them (the fast path of a policy without conditions is untouched)', () => {
    fc.assert(
      fc.property(rules, request, (rs, req) => {
        const bare = rs.map(({ when, ...r }) => r as Rule);
        const p = compilePolicy(bare);
        expect(p.hasConditions).to.equal(false);
        // Facts and counts make no difference to a policy without conditions.
        expect(evaluate(p, req, [], { nowMs: NOW })).to.deep.equal(evaluate(p, undecodable(req), [], { nowMs: NOW }));
        expect(compilePolicy(rs).needsFacts).to.equal(rs.some((r) => r.when !== undefined && conditionsNeedFacts(r.when)));
      }),
      RUNS,
    );
  });
});
