import { expect } from 'chai';
import {
  CATEGORIES,
  DANGER_ORDER,
  HIGH_RISK,
  SCOPES,
  dangerRank,
  isHighRisk,
  isWiderThan,
  moreDangerous,
  narrowest,
  scopeWidth,
} from '../../../policy-engine/categories.js';

describe('policy-engine categories', () => {
  it('has the six categories of the spec', () => {
    expect([...CATEGORIES]).to.deep.equal(['read', 'write', 'send', 'delete', 'pay', 'change_permission']);
  });

  const risk: Array<[string, boolean]> = [
    ['read', false],
    ['write', false],
    ['send', true],
    ['delete', true],
    ['pay', true],
    ['change_permission', true],
    ['not-a-category', true],
  ];
  for (const [c, high] of risk) {
    it(`isHighRisk(${c}) is ${high}`, () => {
      expect(isHighRisk(c)).to.equal(high);
      if (c !== 'not-a-category') expect(HIGH_RISK.has(c as never)).to.equal(high);
    });
  }

  it('orders scopes once < task < session < time_limited < permanent', () => {
    expect([...SCOPES]).to.deep.equal(['once', 'task', 'session', 'time_limited', 'permanent']);
    expect(SCOPES.map(scopeWidth)).to.deep.equal([0, 1, 2, 3, 4]);
    expect(() => scopeWidth('until' as never)).to.throw(TypeError);
  });

  it('narrowest picks the narrowest scope', () => {
    expect(narrowest('permanent')).to.equal('permanent');
    expect(narrowest('permanent', 'session', 'time_limited')).to.equal('session');
    expect(narrowest('time_limited', 'task', 'once')).to.equal('once');
    expect(narrowest('task', 'task')).to.equal('task');
  });

  it('isWiderThan is strict', () => {
    expect(isWiderThan('permanent', 'time_limited')).to.equal(true);
    expect(isWiderThan('task', 'task')).to.equal(false);
    expect(isWiderThan('once', 'task')).to.equal(false);
  });

  it('danger order: read < write < send < delete < pay < change_permission', () => {
    expect([...DANGER_ORDER]).to.deep.equal(['read', 'write', 'send', 'delete', 'pay', 'change_permission']);
    expect(moreDangerous('send', 'delete')).to.equal('delete');
    expect(moreDangerous('pay', 'write')).to.equal('pay');
    expect(moreDangerous('read', 'read')).to.equal('read');
    expect(dangerRank('change_permission')).to.equal(5);
    for (const c of CATEGORIES) {
      if (HIGH_RISK.has(c)) expect(dangerRank(c)).to.be.greaterThan(dangerRank('write'));
    }
  });
});
