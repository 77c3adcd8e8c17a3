import { expect } from 'chai';
import {
  compilePolicy,
  evaluate,
  evaluateNaive,
  grantCovers,
  GrantIndex,
  type Decision,
  type EvaluateOptions,
  type GrantLike,
  type PolicyRequest,
} from '../../../policy-engine/evaluate.js';
import type { Rule } from '../../../policy-engine/rules.js';

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0);

function grant(over: Partial<GrantLike> & Pick<GrantLike, 'id'>): GrantLike {
  return {
    connector: 'gmail',
    category: 'send',
    scope: 'permanent',
    task_id: null,
    session_id: null,
    expires_at: null,
    ...over,
  };
}

/** Evaluates in all four forms (arrays, compiled, indexed, both) and insists they agree. */
function run(rules: Rule[], request: PolicyRequest, grants: GrantLike[] = [], opts: Partial<EvaluateOptions> = {}): Decision {
  const o: EvaluateOptions = { nowMs: NOW, ...opts };
  const naive = evaluateNaive(rules, request, grants, o);
  const compiled = compilePolicy(rules);
  const index = new GrantIndex(grants);
  for (const other of [
    evaluate(rules, request, grants, o),
    evaluate(compiled, request, grants, o),
    evaluate(rules, request, index, o),
    evaluate(compiled, request, index, o),
  ]) {
    expect(other).to.deep.equal(naive);
    expect(other.grant).to.equal(naive.grant); // the same record, not a copy
  }
  return naive;
}

interface Case {
  name: string;
  rules: Rule[];
  request: PolicyRequest;
  grants?: GrantLike[];
  opts?: Partial<EvaluateOptions>;
  expect: { decision: Decision['decision']; reason: Decision['reason']; matched_rules: number[]; max_scope?: string; grant?: string | null };
}

const SEND_GRANT = grant({ id: 'grt_send' });
const READ_GRANT = grant({ id: 'grt_read', category: 'read' });

const CASES: Case[] = [
  // 0. infrastructure secret
  {
    name: 'infrastructure secret skips even a deny rule',
    rules: [{ connector: 'secret:DB', effect: 'deny' }],
    request: { connector: 'secret:DB', category: 'write', infrastructure: true },
    expect: { decision: 'allow', reason: 'infrastructure_credential', matched_rules: [0], grant: null },
  },
  {
    name: 'infrastructure secret with no rule at all',
    rules: [],
    request: { connector: 'secret:DB', category: 'pay', infrastructure: true },
    expect: { decision: 'allow', reason: 'infrastructure_credential', matched_rules: [] },
  },
  {
    name: 'infrastructure flag on a connection connector is ignored',
    rules: [{ connector: 'gmail', effect: 'deny' }],
    request: { connector: 'gmail', category: 'read', infrastructure: true },
    expect: { decision: 'deny', reason: 'deny_rule', matched_rules: [0] },
  },
  {
    name: 'infrastructure false follows the policy',
    rules: [],
    request: { connector: 'secret:DB', category: 'write', infrastructure: false },
    expect: { decision: 'deny', reason: 'no_rule', matched_rules: [] },
  },
  // 1. deny rule
  {
    name: 'deny rule denies',
    rules: [{ connector: 'gmail', category: 'read', effect: 'deny' }],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'deny', reason: 'deny_rule', matched_rules: [0] },
  },
  {
    name: 'deny rule beats an earlier allow and ask',
    rules: [
      { effect: 'allow', category: 'read' },
      { effect: 'ask', max_scope: 'task' },
      { connector: 'gmail', effect: 'deny' },
    ],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'deny', reason: 'deny_rule', matched_rules: [0, 1, 2] },
  },
  {
    name: 'deny rule beats a covering grant',
    rules: [{ category: 'send', effect: 'deny' }],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    expect: { decision: 'deny', reason: 'deny_rule', matched_rules: [0], grant: null },
  },
  {
    name: 'a wildcard deny (no connector, no category) matches everything',
    rules: [{ effect: 'deny' }],
    request: { connector: 'secret:ANY', category: 'write' },
    expect: { decision: 'deny', reason: 'deny_rule', matched_rules: [0] },
  },
  // 2. ask rule
  {
    name: 'ask rule asks with its max_scope',
    rules: [{ connector: 'slack', category: 'send', effect: 'ask', max_scope: 'session' }],
    request: { connector: 'slack', category: 'send' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'session' },
  },
  {
    name: 'ask rule without max_scope asks with permanent',
    rules: [{ category: 'write', effect: 'ask' }],
    request: { connector: 'calendar', category: 'write' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'permanent' },
  },
  {
    name: 'several ask rules: the narrowest max_scope wins',
    rules: [
      { effect: 'ask' },
      { connector: 'gmail', effect: 'ask', max_scope: 'time_limited' },
      { category: 'send', effect: 'ask', max_scope: 'task' },
      { connector: 'gmail', category: 'send', effect: 'ask', max_scope: 'session' },
    ],
    request: { connector: 'gmail', category: 'send' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0, 1, 2, 3], max_scope: 'task' },
  },
  {
    name: 'ask rule with max_scope once',
    rules: [{ effect: 'ask', max_scope: 'once' }],
    request: { connector: 'gmail', category: 'delete' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'once' },
  },
  {
    name: 'ask rule with a covering grant allows by grant',
    rules: [{ connector: 'gmail', effect: 'ask', max_scope: 'task' }],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    expect: { decision: 'allow', reason: 'grant', matched_rules: [0], grant: 'grt_send' },
  },
  {
    name: 'ask rule on a read with a covering read grant allows by grant',
    rules: [{ category: 'read', effect: 'ask' }],
    request: { connector: 'gmail', category: 'read' },
    grants: [READ_GRANT],
    expect: { decision: 'allow', reason: 'grant', matched_rules: [0], grant: 'grt_read' },
  },
  {
    name: 'a matching ask beats any allow',
    rules: [
      { connector: 'gmail', category: 'read', effect: 'allow' },
      { connector: 'gmail', effect: 'ask', max_scope: 'session' },
    ],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0, 1], max_scope: 'session' },
  },
  {
    name: 'ask rule with a grant for another category still asks',
    rules: [{ effect: 'ask' }],
    request: { connector: 'gmail', category: 'delete' },
    grants: [SEND_GRANT],
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'permanent', grant: null },
  },
  // 3. allow rule
  {
    name: 'allow rule allows a read',
    rules: [{ connector: 'gmail', category: 'read', effect: 'allow' }],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'allow', reason: 'rule', matched_rules: [0], grant: null },
  },
  {
    name: 'a wildcard allow allows a write',
    rules: [{ effect: 'allow' }],
    request: { connector: 'secret:STRIPE', category: 'write' },
    expect: { decision: 'allow', reason: 'rule', matched_rules: [0] },
  },
  {
    name: 'allowed by rule reports no grant even when one would cover',
    rules: [{ category: 'read', effect: 'allow' }],
    request: { connector: 'gmail', category: 'read' },
    grants: [READ_GRANT],
    expect: { decision: 'allow', reason: 'rule', matched_rules: [0], grant: null },
  },
  // 4. high-risk
  {
    name: 'an allow rule without category does not allow a high-risk category',
    rules: [{ connector: 'gmail', effect: 'allow' }],
    request: { connector: 'gmail', category: 'send' },
    expect: { decision: 'ask', reason: 'high_risk', matched_rules: [0], max_scope: 'permanent' },
  },
  ...(['send', 'delete', 'pay', 'change_permission'] as const).map(
    (category): Case => ({
      name: `high-risk ${category} with no rule asks with permanent`,
      rules: [{ connector: 'other', effect: 'deny' }],
      request: { connector: 'secret:X', category },
      expect: { decision: 'ask', reason: 'high_risk', matched_rules: [], max_scope: 'permanent' },
    }),
  ),
  {
    name: 'high-risk with a covering grant allows by grant',
    rules: [],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    expect: { decision: 'allow', reason: 'grant', matched_rules: [], grant: 'grt_send' },
  },
  {
    name: 'high-risk with an allow rule and a covering grant allows by grant',
    rules: [{ effect: 'allow' }],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    expect: { decision: 'allow', reason: 'grant', matched_rules: [0], grant: 'grt_send' },
  },
  // 5. no rule
  {
    name: 'a read with no rule is denied',
    rules: [],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'deny', reason: 'no_rule', matched_rules: [] },
  },
  {
    name: 'a write with only non-matching rules is denied',
    rules: [
      { connector: 'slack', effect: 'allow' },
      { connector: 'gmail', category: 'read', effect: 'allow' },
    ],
    request: { connector: 'gmail', category: 'write' },
    expect: { decision: 'deny', reason: 'no_rule', matched_rules: [] },
  },
  {
    name: 'a read with no rule is denied even with a covering grant (grants answer only asks)',
    rules: [],
    request: { connector: 'gmail', category: 'read' },
    grants: [READ_GRANT],
    expect: { decision: 'deny', reason: 'no_rule', matched_rules: [], grant: null },
  },
  // matched_rules
  {
    name: 'matched_rules lists every matching rule in order and skips the others',
    rules: [
      { connector: 'slack', effect: 'deny' },
      { category: 'read', effect: 'allow' },
      { connector: 'gmail', category: 'write', effect: 'deny' },
      { connector: 'gmail', effect: 'allow' },
      { effect: 'ask', max_scope: 'task' },
      { connector: 'gmail', category: 'read', effect: 'allow' },
    ],
    request: { connector: 'gmail', category: 'read' },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [1, 3, 4, 5], max_scope: 'task' },
  },
  {
    name: 'a secret connector matches only its own name',
    rules: [{ connector: 'secret:A', effect: 'allow' }, { connector: 'secret:AB', effect: 'deny' }],
    request: { connector: 'secret:A', category: 'write' },
    expect: { decision: 'allow', reason: 'rule', matched_rules: [0] },
  },
  // ignoreGrants option
  {
    name: 'ignoreGrants: ask rule with a covering grant still asks',
    rules: [{ effect: 'ask', max_scope: 'session' }],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    opts: { ignoreGrants: true },
    expect: { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'session', grant: null },
  },
  {
    name: 'ignoreGrants: high-risk with a covering grant asks high_risk',
    rules: [],
    request: { connector: 'gmail', category: 'send' },
    grants: [SEND_GRANT],
    opts: { ignoreGrants: true },
    expect: { decision: 'ask', reason: 'high_risk', matched_rules: [], max_scope: 'permanent', grant: null },
  },
];

describe('policy-engine evaluate: decision rules and reasons', () => {
  for (const c of CASES) {
    it(c.name, () => {
      const d = run(c.rules, c.request, c.grants, c.opts);
      expect(d.decision).to.equal(c.expect.decision);
      expect(d.reason).to.equal(c.expect.reason);
      expect(d.matched_rules).to.deep.equal(c.expect.matched_rules);
      if (c.expect.max_scope !== undefined) expect(d.max_scope).to.equal(c.expect.max_scope);
      else expect(d).not.to.have.property('max_scope');
      if (c.expect.grant !== undefined) expect(d.grant?.id ?? null).to.equal(c.expect.grant);
      if (d.reason !== 'grant') expect(d.grant).to.equal(null);
    });
  }

  it('covers every reason', () => {
    const reasons = new Set(CASES.map((c) => c.expect.reason));
    expect([...reasons].sort()).to.deep.equal(
      ['ask_rule', 'deny_rule', 'grant', 'high_risk', 'infrastructure_credential', 'no_rule', 'rule'],
    );
  });

  it('returns a fresh matched_rules array each time (the compiled table is not exposed)', () => {
    const compiled = compilePolicy([{ effect: 'allow' }]);
    const a = evaluate(compiled, { connector: 'gmail', category: 'read' }, [], { nowMs: NOW });
    a.matched_rules.push(99);
    const b = evaluate(compiled, { connector: 'gmail', category: 'read' }, [], { nowMs: NOW });
    expect(b.matched_rules).to.deep.equal([0]);
  });

  it('compiled policy copes with a connector no rule names and with __proto__', () => {
    const rules: Rule[] = [{ connector: 'gmail', effect: 'deny' }, { effect: 'allow' }];
    for (const connector of ['slack', '__proto__', 'constructor', '']) {
      expect(run(rules, { connector, category: 'read' }).reason).to.equal('rule');
    }
    expect(run(rules, { connector: 'gmail', category: 'read' }).reason).to.equal('deny_rule');
  });

  it('a category outside the six is never allowed by an allow rule (fail closed)', () => {
    const d = run([{ effect: 'allow' }], { connector: 'gmail', category: 'teleport' as never });
    expect(d.decision).to.equal('ask');
    expect(d.reason).to.equal('high_risk');
  });
});

describe('policy-engine evaluate: grant coverage', () => {
  const req = (over: Partial<PolicyRequest> = {}): PolicyRequest => ({ connector: 'gmail', category: 'send', ...over });
  const rows: Array<{ name: string; g: GrantLike; r: PolicyRequest; covers: boolean }> = [
    { name: 'permanent covers', g: grant({ id: 'g' }), r: req(), covers: true },
    { name: 'another connector does not', g: grant({ id: 'g', connector: 'slack' }), r: req(), covers: false },
    { name: 'another category does not', g: grant({ id: 'g', category: 'delete' }), r: req(), covers: false },
    { name: 'task grant, same task id', g: grant({ id: 'g', scope: 'task', task_id: 't1' }), r: req({ task_id: 't1' }), covers: true },
    { name: 'task grant, other task id', g: grant({ id: 'g', scope: 'task', task_id: 't1' }), r: req({ task_id: 't2' }), covers: false },
    { name: 'task grant, request without task id', g: grant({ id: 'g', scope: 'task', task_id: 't1' }), r: req(), covers: false },
    { name: 'task grant, session id equal is not enough', g: grant({ id: 'g', scope: 'task', task_id: 't1', session_id: 's1' }), r: req({ session_id: 's1' }), covers: false },
    { name: 'task grant without a task id never covers', g: grant({ id: 'g', scope: 'task', task_id: null }), r: req({ task_id: '' }), covers: false },
    { name: 'session grant, same session id', g: grant({ id: 'g', scope: 'session', session_id: 's1' }), r: req({ session_id: 's1' }), covers: true },
    { name: 'session grant, other session id', g: grant({ id: 'g', scope: 'session', session_id: 's1' }), r: req({ session_id: 's2' }), covers: false },
    { name: 'session grant, request without session id', g: grant({ id: 'g', scope: 'session', session_id: 's1' }), r: req({ task_id: 's1' }), covers: false },
    { name: 'time_limited, expires in the future', g: grant({ id: 'g', scope: 'time_limited', expires_at: NOW + 1 }), r: req(), covers: true },
    { name: 'time_limited, expires now', g: grant({ id: 'g', scope: 'time_limited', expires_at: NOW }), r: req(), covers: false },
    { name: 'time_limited, expired', g: grant({ id: 'g', scope: 'time_limited', expires_at: NOW - 1000 }), r: req(), covers: false },
    { name: 'time_limited without expires_at never covers', g: grant({ id: 'g', scope: 'time_limited', expires_at: null }), r: req(), covers: false },
    { name: 'any grant with a passed expires_at stops covering', g: grant({ id: 'g', scope: 'session', session_id: 's1', expires_at: NOW - 1 }), r: req({ session_id: 's1' }), covers: false },
    { name: 'an unknown scope never covers', g: grant({ id: 'g', scope: 'once' as never }), r: req(), covers: false },
  ];
  for (const row of rows) {
    it(row.name, () => {
      expect(grantCovers(row.g, row.r, NOW)).to.equal(row.covers);
      const d = run([], row.r, [row.g]);
      expect(d.reason).to.equal(row.covers ? 'grant' : 'high_risk');
    });
  }

  it('uses the narrowest covering grant, then the first given', () => {
    const perm = grant({ id: 'perm' });
    const perm2 = grant({ id: 'perm2' });
    const tl = grant({ id: 'tl', scope: 'time_limited', expires_at: NOW + 60_000 });
    const sess = grant({ id: 'sess', scope: 'session', session_id: 's1' });
    const task = grant({ id: 'task', scope: 'task', task_id: 't1' });
    const task2 = grant({ id: 'task2', scope: 'task', task_id: 't1' });
    const all = [perm, perm2, tl, sess, task, task2];
    expect(run([], req({ task_id: 't1', session_id: 's1' }), all).grant?.id).to.equal('task');
    expect(run([], req({ session_id: 's1' }), all).grant?.id).to.equal('sess');
    expect(run([], req(), all).grant?.id).to.equal('tl');
    expect(run([], req(), [perm2, perm]).grant?.id).to.equal('perm2');
    expect(run([], req({ task_id: 't1' }), [task2, task]).grant?.id).to.equal('task2');
  });

  it('an expired time-limited grant makes way for a permanent one', () => {
    const expired = grant({ id: 'old', scope: 'time_limited', expires_at: NOW - 1 });
    expect(run([], req(), [expired, grant({ id: 'perm' })]).grant?.id).to.equal('perm');
  });
});
