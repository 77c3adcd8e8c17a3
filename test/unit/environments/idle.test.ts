import { expect } from 'chai';
import { nextIdleStep } from '../../../environments/idle.service.js';

describe('idle ladder: the next step', () => {
  const base = { state: 'running', desired_state: 'running', last_active_at: 1_000_000, suspend_after_secs: 60, stop_after_secs: 120, keep_awake_until: null } as const;
  const cases: Array<[string, Record<string, unknown>, { step: string | null; at: number | null }]> = [
    ['running: suspend after suspend_after_secs', {}, { step: 'suspend', at: 1_060_000 }],
    ['running, suspend step off: nothing (stop only from suspended)', { suspend_after_secs: 0 }, { step: null, at: null }],
    ['suspended: stop after stop_after_secs from the last activity', { state: 'suspended', desired_state: 'suspended' }, { step: 'stop', at: 1_120_000 }],
    ['suspended, stop step off: nothing', { state: 'suspended', desired_state: 'suspended', stop_after_secs: 0 }, { step: null, at: null }],
    ['a keep-awake past the step holds it', { keep_awake_until: 2_000_000 }, { step: 'suspend', at: 2_000_000 }],
    ['a keep-awake already over does not', { keep_awake_until: 1_010_000 }, { step: 'suspend', at: 1_060_000 }],
    ['desired already elsewhere: nothing', { desired_state: 'suspended' }, { step: null, at: null }],
    ['pending (no host): nothing', { state: 'pending' }, { step: null, at: null }],
    ['stopped: nothing', { state: 'stopped', desired_state: 'stopped' }, { step: null, at: null }],
  ];
  for (const [name, patch, want] of cases) {
    it(name, () => {
      const n = nextIdleStep({ ...base, ...patch } as never);
      expect({ step: n.step, at: n.at }).to.deep.equal(want);
    });
  }
});
