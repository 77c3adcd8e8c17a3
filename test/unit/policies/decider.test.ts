/**
 * The PolicyDecider cache (policies/decider.ts) over fake loaders: no store round trip while
 * nothing changed, in-process invalidation, the cross-process refresh bound, and loads
 * racing invalidations.
 */
import { expect } from 'chai';
import { ServiceClock } from '../../../lib/clock.js';
import { createPolicyDecider, type EffectivePolicy } from '../../../policies/decider.js';
import type { GrantLike } from '../../../policy-engine/index.js';

function setup(opts: { refreshMs?: number; maxEntries?: number } = {}) {
  let mono = 0;
  const policies = new Map<string, EffectivePolicy>();
  const grants = new Map<string, GrantLike[]>();
  const calls: string[] = [];
  let gate: Promise<void> | null = null;
  const clock = new ServiceClock(() => 1_000_000);
  const decider = createPolicyDecider<GrantLike>({
    clock,
    monotonicMs: () => mono,
    ...opts,
    loadPolicy: async (dev, env) => {
      calls.push(`policy:${dev}/${env}`);
      const p = policies.get(`${dev}/${env}`) ?? policies.get(`${dev}/*`) ?? { rules: [], source: 'default' };
      if (gate) await gate;
      return p;
    },
    loadGrants: async (dev, env) => {
      calls.push(`grants:${dev}/${env}`);
      return grants.get(`${dev}/${env}`) ?? [];
    },
  });
  return {
    decider, policies, grants, calls, clock,
    tick: (ms: number) => { mono += ms; },
    hold(): () => void {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return () => { gate = null; release(); };
    },
  };
}

const read = { connector: 'gmail', category: 'read' as const };
const send = { connector: 'gmail', category: 'send' as const };

describe('PolicyDecider', () => {
  it('loads an environment once and answers from memory afterwards', async () => {
    const s = setup();
    s.policies.set('d1/*', { rules: [{ connector: 'gmail', category: 'read', effect: 'allow' }], source: 'developer' });
    for (let i = 0; i < 100; i++) {
      const d = await s.decider.decide('d1', 'e1', read);
      expect(d).to.include({ decision: 'allow', reason: 'rule', source: 'developer' });
    }
    expect(s.decider.stats().loads).to.equal(1);
    expect(s.calls).to.deep.equal(['policy:d1/e1', 'grants:d1/e1']);
  });

  it('invalidate() makes the very next decision reload (revocation, policy write)', async () => {
    const s = setup();
    s.grants.set('d1/e1', [{ id: 'g1', connector: 'gmail', category: 'send', scope: 'permanent', task_id: null, session_id: null, expires_at: null }]);
    expect((await s.decider.decide('d1', 'e1', send)).reason).to.equal('grant');
    s.grants.set('d1/e1', []);
    expect((await s.decider.decide('d1', 'e1', send)).reason).to.equal('grant'); // cached: nobody said
    s.decider.invalidate('d1', 'e1');
    expect((await s.decider.decide('d1', 'e1', send)).reason).to.equal('high_risk');
  });

  it('invalidateDeveloper() drops every environment of that developer only', async () => {
    const s = setup();
    await s.decider.decide('d1', 'e1', read);
    await s.decider.decide('d1', 'e2', read);
    await s.decider.decide('d2', 'e3', read);
    expect(s.decider.stats().loads).to.equal(3);
    s.decider.invalidateDeveloper('d1');
    await s.decider.decide('d1', 'e1', read);
    await s.decider.decide('d1', 'e2', read);
    await s.decider.decide('d2', 'e3', read);
    expect(s.decider.stats().loads).to.equal(5);
  });

  it('reloads at most every refreshMs for writes made by other processes', async () => {
    const s = setup({ refreshMs: 1000 });
    await s.decider.decide('d1', 'e1', read);
    s.policies.set('d1/e1', { rules: [{ effect: 'allow', category: 'read' }], source: 'environment' });
    s.tick(999);
    expect((await s.decider.decide('d1', 'e1', read)).decision).to.equal('deny');
    s.tick(1);
    expect((await s.decider.decide('d1', 'e1', read))).to.include({ decision: 'allow', source: 'environment' });
    expect(s.decider.stats().loads).to.equal(2);
  });

  it('concurrent misses share one load', async () => {
    const s = setup();
    const release = s.hold();
    const all = Promise.all(Array.from({ length: 10 }, () => s.decider.decide('d1', 'e1', read)));
    release();
    await all;
    expect(s.decider.stats().loads).to.equal(1);
  });

  it('a load racing an invalidation is used by its waiters but not cached', async () => {
    const s = setup();
    const release = s.hold();
    const first = s.decider.decide('d1', 'e1', read); // load starts, reads the old policy
    await new Promise((r) => setImmediate(r));
    s.policies.set('d1/e1', { rules: [{ effect: 'allow', category: 'read' }], source: 'environment' });
    s.decider.invalidate('d1', 'e1');
    release();
    expect((await first).decision).to.equal('deny');
    expect((await s.decider.decide('d1', 'e1', read)).decision).to.equal('allow');
    expect(s.decider.stats().loads).to.equal(2);
  });

  it('time-limited grants expire on the service clock without a reload', async () => {
    const s = setup();
    s.grants.set('d1/e1', [{ id: 'g', connector: 'gmail', category: 'send', scope: 'time_limited', task_id: null, session_id: null, expires_at: s.clock.nowMs() + 60_000 }]);
    expect((await s.decider.decide('d1', 'e1', send)).reason).to.equal('grant');
    s.clock.advance(60_000);
    expect((await s.decider.decide('d1', 'e1', send)).reason).to.equal('high_risk');
    expect(s.decider.stats().loads).to.equal(1);
  });

  it('keeps at most maxEntries environments', async () => {
    const s = setup({ maxEntries: 2 });
    for (const e of ['e1', 'e2', 'e3']) await s.decider.decide('d1', e, read);
    expect(s.decider.stats().entries).to.equal(2);
    await s.decider.decide('d1', 'e3', read);
    expect(s.decider.stats().loads).to.equal(3);
    await s.decider.decide('d1', 'e1', read); // the oldest was dropped
    expect(s.decider.stats().loads).to.equal(4);
  });
});
