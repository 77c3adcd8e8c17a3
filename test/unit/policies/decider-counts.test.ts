/**
 * The decider with count_over rules (issue 26, item 1) over a fake counter: counts are read
 * for the rules that match, the decision carries `settle`, and settle decides again with
 * the counts it is given under its lock (another node may have counted meanwhile).
 */
import { expect } from 'chai';
import { ServiceClock } from '../../../lib/clock.js';
import { createPolicyDecider, type EffectivePolicy } from '../../../policies/decider.js';
import type { RateCounter } from '../../../policies/rate-counts.js';
import type { GrantLike, Rule } from '../../../policy-engine/index.js';

function setup(rules: Rule[], counts: { read: number; locked: number }) {
  const recorded: string[] = [];
  const counter = {
    read: async (_t: unknown, _rules: readonly Rule[], idx: readonly number[]) => new Map(idx.map((i) => [i, counts.read])),
    settle: async (_t: unknown, _rules: readonly Rule[], idx: readonly number[], connector: string, category: string, recheck: (c: ReadonlyMap<number, number>) => { decision: string }, approved: boolean) => {
      const d = recheck(new Map(idx.map((i) => [i, counts.locked])));
      if (d.decision === 'deny' || (d.decision === 'ask' && !approved)) return d;
      recorded.push(`${connector}/${category}`);
      return null;
    },
  } as unknown as RateCounter;
  const decider = createPolicyDecider<GrantLike>({
    clock: new ServiceClock(() => 1_000_000),
    loadPolicy: async (): Promise<EffectivePolicy> => ({ rules, source: 'environment' }),
    loadGrants: async () => [],
    counter,
    loadEndUser: async () => 'eu_1',
  });
  return { decider, recorded };
}

const rules: Rule[] = [
  { connector: 'secret:S', category: 'read', effect: 'deny', when: { count_over: { max: 3, per: 'day' } } },
  { category: 'read', effect: 'allow' },
];

describe('PolicyDecider: count_over rules (issue 26)', () => {
  it('under the max: allowed, and settle records the request', async () => {
    const { decider, recorded } = setup(rules, { read: 2, locked: 2 });
    const d = await decider.decide('dev', 'env', { connector: 'secret:S', category: 'read' });
    expect(d).to.deep.include({ decision: 'allow', reason: 'rule', matched_rules: [1] });
    expect(await d.settle!(false)).to.equal(null);
    expect(recorded).to.deep.equal(['secret:S/read']);
  });

  it('at the max: denied, no settle called by the gateway', async () => {
    const { decider } = setup(rules, { read: 3, locked: 3 });
    expect(await decider.decide('dev', 'env', { connector: 'secret:S', category: 'read' })).to.deep.include({ decision: 'deny', reason: 'deny_rule', matched_rules: [0, 1] });
  });

  it('another node reached the max meanwhile: settle answers the deny, nothing recorded', async () => {
    const { decider, recorded } = setup(rules, { read: 2, locked: 3 });
    const d = await decider.decide('dev', 'env', { connector: 'secret:S', category: 'read' });
    expect(d.decision).to.equal('allow');
    expect(await d.settle!(false)).to.deep.include({ decision: 'deny', reason: 'deny_rule' });
    expect(recorded).to.deep.equal([]);
  });

  it('a request no count_over rule matches has no settle (no store round trip)', async () => {
    const { decider } = setup(rules, { read: 0, locked: 0 });
    const d = await decider.decide('dev', 'env', { connector: 'secret:T', category: 'read' });
    expect(d.settle).to.equal(undefined);
  });
});
