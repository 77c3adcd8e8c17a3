import { expect } from 'chai';
import { factsForPolicy, simulateRecords, SIMULATE_MAX_EXAMPLES, type SimulatedRecord } from '../../../policies/simulate.js';
import type { Rule } from '../../../policy-engine/index.js';

/** policies/simulate.ts simulateRecords: the pure part of POST /v1/policy/simulate (issue 26, item 4). */
describe('policy simulation (policies/simulate)', () => {
  let n = 0;
  const rec = (over: Partial<SimulatedRecord>): SimulatedRecord => ({
    id: `aud_${String(++n).padStart(24, '0')}`, method: 'GET', host: 'api.example.com', path: '/x', connector: 'secret:K', category: 'read',
    decision: 'allow', reason: 'rule', facts: null, ...over,
  });
  const NOW = Date.UTC(2026, 0, 1);
  const CURRENT: Rule[] = [{ category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }];

  /** Newest first, as the audit domain answers. */
  const newestFirst = (rs: SimulatedRecord[]) => [...rs].reverse();

  it('counts the transitions of a stricter draft exactly; unchanged pairs are not listed', () => {
    const rs = [rec({}), rec({ method: 'POST', category: 'write' }), rec({}), rec({ method: 'POST', category: 'write' }), rec({ method: 'POST', category: 'write' })];
    const out = simulateRecords([{ category: 'read', effect: 'allow' }, { category: 'write', effect: 'ask' }], newestFirst(rs), NOW);
    expect(out.evaluated).to.equal(5);
    expect(out.changed).to.equal(3);
    expect(out.transitions).to.deep.equal({ 'allow->ask': 3 });
    expect(out.examples.map((e) => e.audit_id)).to.deep.equal([rs[4]!.id, rs[3]!.id, rs[1]!.id]);
    expect(out.examples[0]).to.deep.equal({
      audit_id: rs[4]!.id, method: 'POST', host: 'api.example.com', path: '/x', connector: 'secret:K', category: 'write', was: 'allow', would_be: 'ask', matched_rules: [1],
    });
  });

  it('a draft rule naming an MCP tool (issue 28) changes only the entries that called that tool', () => {
    const rs = [
      rec({ connector: 'mcp:gh', category: 'delete', decision: 'ask', reason: 'high_risk', tool: 'delete_repository' }),
      rec({ connector: 'mcp:gh', category: 'delete', decision: 'ask', reason: 'high_risk', tool: 'delete_branch' }),
      rec({ connector: 'mcp:gh', category: 'delete', decision: 'ask', reason: 'high_risk' }),
    ];
    const out = simulateRecords([{ connector: 'mcp:gh', tool: 'delete_repository', effect: 'deny' }], newestFirst(rs), NOW);
    expect(out).to.include({ evaluated: 3, changed: 1 });
    expect(out.transitions).to.deep.equal({ 'ask->deny': 1 });
    expect(out.examples.map((e) => e.audit_id)).to.deep.equal([rs[0]!.id]);
  });

  it('the current rules change nothing; `[]` denies reads and writes and asks for high-risk', () => {
    const rs = [rec({}), rec({ category: 'write' }), rec({ category: 'pay', decision: 'ask', reason: 'high_risk' })];
    expect(simulateRecords(CURRENT, rs, NOW)).to.deep.equal({ evaluated: 3, changed: 0, transitions: {}, examples: [] });
    expect(simulateRecords([], rs, NOW).transitions).to.deep.equal({ 'allow->deny': 2 });
  });

  it('skips entries that never reached the policy, and does not count them', () => {
    const rs = [rec({ connector: null, category: null, reason: 'no_credential' }), rec({ connector: 'secret:K', category: null }), rec({ connector: null }),
      rec({ category: 'teleport' }), rec({ decision: 'maybe' as never }), rec({})];
    expect(simulateRecords([], rs, NOW)).to.include({ evaluated: 1, changed: 1 });
  });

  it('ignores grants: a request a grant let through shows as ask when the draft asks', () => {
    const rs = [rec({ category: 'pay', decision: 'allow', reason: 'grant' })];
    expect(simulateRecords([{ category: 'pay', effect: 'ask' }], rs, NOW).transitions).to.deep.equal({ 'allow->ask': 1 });
  });

  it('an entry allowed as an infrastructure secret stays so under any draft (but not on a connection connector)', () => {
    const rs = [rec({ category: 'pay', reason: 'infrastructure_credential' }), rec({ connector: 'gmail', category: 'send', reason: 'infrastructure_credential' })];
    const out = simulateRecords([{ effect: 'deny' }], rs, NOW);
    expect(out.transitions).to.deep.equal({ 'allow->deny': 1 });
    expect(out.examples[0]!.connector).to.equal('gmail');
  });

  it('at most 50 examples, the newest changed ones, newest first', () => {
    const rs = Array.from({ length: 130 }, (_, i) => rec({ category: i % 2 ? 'write' : 'read' }));
    const out = simulateRecords([{ category: 'read', effect: 'allow' }], newestFirst(rs), NOW);
    expect(out.changed).to.equal(65);
    expect(out.examples).to.have.length(SIMULATE_MAX_EXAMPLES);
    const changedNewestFirst = newestFirst(rs).filter((r) => r.category === 'write').map((r) => r.id);
    expect(out.examples.map((e) => e.audit_id)).to.deep.equal(changedNewestFirst.slice(0, 50));
  });

  describe('conditions on recorded facts', () => {
    const pay = (facts: SimulatedRecord['facts']) => rec({ category: 'pay', decision: 'ask', reason: 'high_risk', facts });
    const denyOver: Rule[] = [{ category: 'pay', effect: 'deny', when: { amount_over: { currency: 'usd', minor_units: 1000 } } } as Rule];

    it('read the amount; no amount, or one in another currency, takes the riskier reading', () => {
      const rs = [pay({ amount: { currency: 'usd', minor_units: 5000 } }), pay({ amount: { currency: 'usd', minor_units: 10 } }), pay(null), pay({ amount: null }), pay({ amount: { currency: 'eur', minor_units: 5000 } })];
      const out = simulateRecords(denyOver, newestFirst(rs), NOW);
      expect(out.transitions).to.deep.equal({ 'ask->deny': 4 });
      expect(out.examples.map((e) => e.audit_id)).to.not.include(rs[1]!.id);
    });

    it('a recipient list cut short when stored is unknown (riskier), never the first recipients alone', () => {
      const denyOutside: Rule[] = [{ connector: 'gmail', category: 'send', effect: 'deny', when: { recipients_outside: ['acme.com'] } } as Rule];
      const send = (facts: SimulatedRecord['facts']) => rec({ connector: 'gmail', category: 'send', decision: 'ask', reason: 'high_risk', facts });
      const rs = [send({ recipients: ['a@acme.com'] }), send({ recipients: ['a@acme.com', 'b@evil.io'] }), send({ recipients: ['a@acme.com'], recipients_total: 5000 }), send({ recipients: ['[redacted]'] })];
      const out = simulateRecords(denyOutside, newestFirst(rs), NOW);
      expect(out.changed).to.equal(3);
      expect(out.examples.map((e) => e.audit_id)).to.not.include(rs[0]!.id);
    });

    it('count_over is not replayed: unknown, it holds on ask and deny rules and not on allow rules', () => {
      const rs = [rec({ category: 'write' })];
      const ask: Rule[] = [{ category: 'write', effect: 'ask', when: { count_over: { max: 1000, per: 'day' } } } as Rule, { category: 'write', effect: 'allow' }];
      expect(simulateRecords(ask, rs, NOW).transitions).to.deep.equal({ 'allow->ask': 1 });
      const allow: Rule[] = [{ category: 'write', effect: 'allow', when: { count_over: { max: 0, per: 'day' } } } as Rule];
      expect(simulateRecords(allow, rs, NOW).transitions).to.deep.equal({ 'allow->deny': 1 });
    });
  });

  it('factsForPolicy: as stored, a list cut short as null', () => {
    expect(factsForPolicy(null)).to.equal(null);
    expect(factsForPolicy({ amount: { currency: 'usd', minor_units: 1 }, recipients: ['a@b.c'], channel: 'C1' })).to.deep.equal({ amount: { currency: 'usd', minor_units: 1 }, recipients: ['a@b.c'], channel: 'C1' });
    expect(factsForPolicy({ recipients: ['a@b.c'], recipients_total: 60 })).to.deep.equal({ recipients: null });
  });
});
