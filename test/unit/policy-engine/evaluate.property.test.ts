/**
 * Property tests for evaluate() (ARCHITECTURE.md "Tests": fast-check for the policy engine).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { CATEGORIES, GRANT_SCOPES, HIGH_RISK, SCOPES, scopeWidth, type Category } from '../../../policy-engine/categories.js';
import {
  compilePolicy,
  evaluate,
  evaluateNaive,
  grantCovers,
  GrantIndex,
  type Decision,
  type GrantLike,
  type PolicyRequest,
} from '../../../policy-engine/evaluate.js';
import { validateRules, type Rule } from '../../../policy-engine/rules.js';

const NOW = 1_800_000_000_000;
const CONNECTORS = ['gmail', 'calendar', 'slack', 'secret:A', 'secret:B'];
const RUNS = { numRuns: 2000 };

const connector = fc.constantFrom(...CONNECTORS);
const category = fc.constantFrom(...CATEGORIES);
const scope = fc.constantFrom(...SCOPES);

/** Valid rules (what validateRules lets through). */
const validRule: fc.Arbitrary<Rule> = fc
  .record(
    {
      connector,
      category,
      effect: fc.constantFrom('allow', 'deny', 'ask' as const),
      max_scope: scope,
    },
    { requiredKeys: ['effect'] },
  )
  .map((r) => {
    const out: { connector?: string; category?: Category; effect: Rule['effect']; max_scope?: Rule['max_scope'] } = { ...r };
    if (out.effect !== 'ask') delete out.max_scope;
    if (out.effect === 'allow' && out.category !== undefined && HIGH_RISK.has(out.category)) delete out.category;
    return out as Rule;
  });

/** Any rule of the right shape, including ones validation would refuse (allow on send...). */
const rawRule: fc.Arbitrary<Rule> = fc.record(
  { connector, category, effect: fc.constantFrom('allow', 'deny', 'ask' as const), max_scope: scope },
  { requiredKeys: ['effect'] },
);

const rules = fc.array(validRule, { maxLength: 12 });

const request: fc.Arbitrary<PolicyRequest> = fc.record(
  {
    connector,
    category,
    task_id: fc.constantFrom('t1', 't2', null),
    session_id: fc.constantFrom('s1', 's2', null),
    infrastructure: fc.boolean(),
  },
  { requiredKeys: ['connector', 'category'] },
);

const grantArb: fc.Arbitrary<Omit<GrantLike, 'id'>> = fc.record({
  connector,
  category,
  scope: fc.constantFrom(...GRANT_SCOPES),
  task_id: fc.constantFrom('t1', 't2', null),
  session_id: fc.constantFrom('s1', 's2', null),
  expires_at: fc.oneof(fc.constant(null), fc.integer({ min: NOW - 5, max: NOW + 5 })),
});
const grants: fc.Arbitrary<GrantLike[]> = fc
  .array(grantArb, { maxLength: 10 })
  .map((gs) => gs.map((g, i) => ({ ...g, id: `grt_${i}` })));

/** Permissiveness: deny < ask (narrower max_scope is less) < allow. */
function permissiveness(d: Decision): number {
  if (d.decision === 'deny') return 0;
  if (d.decision === 'ask') return 1 + scopeWidth(d.max_scope!);
  return 10;
}

function ruleMatches(r: Rule, req: PolicyRequest): boolean {
  return (r.connector === undefined || r.connector === req.connector) && (r.category === undefined || r.category === req.category);
}

function infra(req: PolicyRequest): boolean {
  return req.infrastructure === true && req.connector.startsWith('secret:');
}

const ev = (rs: readonly Rule[], req: PolicyRequest, gs: GrantLike[]): Decision => evaluateNaive(rs, req, gs, { nowMs: NOW });

describe('policy-engine evaluate: properties', () => {
  it('generated valid rules pass validateRules', () => {
    fc.assert(fc.property(rules, (rs) => validateRules(rs).ok), RUNS);
  });

  it('compiled and naive evaluation always agree (same grant record too)', () => {
    fc.assert(
      fc.property(fc.array(rawRule, { maxLength: 12 }), request, grants, fc.boolean(), (rs, req, gs, ignoreGrants) => {
        const opts = { nowMs: NOW, ignoreGrants };
        const naive = evaluateNaive(rs, req, gs, opts);
        const fast = evaluate(compilePolicy(rs), req, new GrantIndex(gs), opts);
        expect(fast).to.deep.equal(naive);
        expect(fast.grant).to.equal(naive.grant);
      }),
      RUNS,
    );
  });

  it('a matching deny rule always wins (unless the credential is infrastructure)', () => {
    fc.assert(
      fc.property(rules, request, grants, fc.nat(), (rs, req, gs, at) => {
        const deny: Rule = { connector: req.connector, category: req.category, effect: 'deny' };
        const withDeny = [...rs.slice(0, at % (rs.length + 1)), deny, ...rs.slice(at % (rs.length + 1))];
        const d = ev(withDeny, req, gs);
        if (infra(req)) expect(d.reason).to.equal('infrastructure_credential');
        else expect([d.decision, d.reason, d.grant]).to.deep.equal(['deny', 'deny_rule', null]);
      }),
      RUNS,
    );
  });

  it('no allow rule ever lets a high-risk category through without a grant', () => {
    fc.assert(
      fc.property(fc.array(rawRule, { maxLength: 12 }), request, grants, (rs, req, gs) => {
        fc.pre(HIGH_RISK.has(req.category) && !infra(req));
        const bare = ev(rs, req, []);
        expect(bare.decision).not.to.equal('allow');
        const d = ev(rs, req, gs);
        if (d.decision === 'allow') {
          expect(d.reason).to.equal('grant');
          expect(grantCovers(d.grant!, req, NOW)).to.equal(true);
        }
      }),
      RUNS,
    );
  });

  it('every allow is explained: by rule (not high-risk), by a covering grant, or infrastructure', () => {
    fc.assert(
      fc.property(rules, request, grants, (rs, req, gs) => {
        const d = ev(rs, req, gs);
        if (d.decision !== 'allow') return;
        if (d.reason === 'rule') {
          expect(HIGH_RISK.has(req.category)).to.equal(false);
          expect(rs.some((r) => r.effect === 'allow' && ruleMatches(r, req))).to.equal(true);
        } else if (d.reason === 'grant') {
          expect(grantCovers(d.grant!, req, NOW)).to.equal(true);
        } else {
          expect(d.reason).to.equal('infrastructure_credential');
        }
      }),
      RUNS,
    );
  });

  it('adding a deny rule never makes a request more permitted', () => {
    fc.assert(
      fc.property(rules, validRule, fc.nat(), request, grants, (rs, extra, at, req, gs) => {
        const deny: Rule = { ...extra, effect: 'deny' };
        delete (deny as { max_scope?: unknown }).max_scope;
        const i = at % (rs.length + 1);
        const before = ev(rs, req, gs);
        const after = ev([...rs.slice(0, i), deny, ...rs.slice(i)], req, gs);
        expect(permissiveness(after)).to.be.at.most(permissiveness(before));
      }),
      RUNS,
    );
  });

  /*
   * The brief also asked for "adding an ask rule never makes a request more permitted".
   * Under the spec's order that is false in exactly one place: a read or write with no
   * matching rule is denied `no_rule`, and an ask rule that matches it turns the deny into
   * an ask (or, with a covering grant, an allow). That is what an ask rule is for, so the
   * property is tested with that one exception, and the exception itself is pinned below.
   */
  it('adding an ask rule never makes a request more permitted, except a `no_rule` deny it opens to asking', () => {
    fc.assert(
      fc.property(rules, validRule, fc.nat(), request, grants, (rs, extra, at, req, gs) => {
        const ask: Rule = { ...extra, effect: 'ask' };
        const i = at % (rs.length + 1);
        const before = ev(rs, req, gs);
        const after = ev([...rs.slice(0, i), ask, ...rs.slice(i)], req, gs);
        if (before.reason === 'no_rule') {
          expect(after.reason).to.be.oneOf(['no_rule', 'ask_rule', 'grant']);
          return;
        }
        expect(permissiveness(after)).to.be.at.most(permissiveness(before));
      }),
      RUNS,
    );
  });

  it('the one exception: an ask rule opens a `no_rule` read to asking', () => {
    const req: PolicyRequest = { connector: 'gmail', category: 'read' };
    expect(ev([], req, []).decision).to.equal('deny');
    expect(ev([{ effect: 'ask' }], req, []).decision).to.equal('ask');
  });

  it('adding an ask rule never turns anything into an allow when there are no grants', () => {
    fc.assert(
      fc.property(rules, validRule, fc.nat(), request, (rs, extra, at, req) => {
        const ask: Rule = { ...extra, effect: 'ask' };
        const i = at % (rs.length + 1);
        const before = ev(rs, req, []);
        const after = ev([...rs.slice(0, i), ask, ...rs.slice(i)], req, []);
        if (after.decision === 'allow') expect(before.decision).to.equal('allow');
      }),
      RUNS,
    );
  });

  it('removing a grant never makes a request more permitted', () => {
    fc.assert(
      fc.property(rules, request, grants, fc.nat(), (rs, req, gs, at) => {
        fc.pre(gs.length > 0);
        const i = at % gs.length;
        const before = ev(rs, req, gs);
        const after = ev(rs, req, [...gs.slice(0, i), ...gs.slice(i + 1)]);
        expect(permissiveness(after)).to.be.at.most(permissiveness(before));
      }),
      RUNS,
    );
  });

  it('matched_rules is exactly the indexes of rules matching connector and category, in order', () => {
    fc.assert(
      fc.property(rules, request, grants, (rs, req, gs) => {
        const want = rs.flatMap((r, i) => (ruleMatches(r, req) ? [i] : []));
        expect(ev(rs, req, gs).matched_rules).to.deep.equal(want);
      }),
      RUNS,
    );
  });

  it('max_scope is present exactly when the decision is ask', () => {
    fc.assert(
      fc.property(rules, request, grants, (rs, req, gs) => {
        const d = ev(rs, req, gs);
        expect('max_scope' in d).to.equal(d.decision === 'ask');
      }),
      RUNS,
    );
  });
});
