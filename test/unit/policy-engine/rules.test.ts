import { expect } from 'chai';
import { validateRules, MAX_RULES } from '../../../policy-engine/rules.js';

describe('policy-engine validateRules', () => {
  describe('accepts', () => {
    const ok: Array<[string, unknown]> = [
      ['an empty policy', []],
      ['a wildcard allow', [{ effect: 'allow' }]],
      ['each effect', [{ effect: 'allow' }, { effect: 'deny' }, { effect: 'ask' }]],
      ['every category on deny and ask', ['read', 'write', 'send', 'delete', 'pay', 'change_permission'].flatMap((category) => [{ category, effect: 'deny' }, { category, effect: 'ask' }])],
      ['allow on read and write', [{ category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }]],
      ['every max_scope on ask', ['once', 'task', 'session', 'time_limited', 'permanent'].map((max_scope) => ({ effect: 'ask', max_scope }))],
      ['the named connectors', [{ connector: 'gmail', effect: 'allow' }, { connector: 'calendar', effect: 'allow' }, { connector: 'slack', effect: 'allow' }, { connector: 'secret:STRIPE_KEY', effect: 'deny' }]],
      ['any other connector string (future connectors)', [{ connector: 'github', effect: 'allow' }, { connector: 'secret:', effect: 'deny' }, { connector: ' ', effect: 'deny' }]],
      ['a connector of exactly 100 characters', [{ connector: 'c'.repeat(100), effect: 'allow' }]],
      ['a connector of 100 characters counted as code points', [{ connector: '😀'.repeat(100), effect: 'allow' }]],
      ['exactly 100 rules', Array.from({ length: MAX_RULES }, () => ({ effect: 'deny' }))],
      ['a rule with a null prototype', [Object.assign(Object.create(null) as object, { effect: 'deny' })]],
    ];
    for (const [name, rules] of ok) {
      it(name, () => {
        const r = validateRules(rules);
        expect(r, JSON.stringify(r)).to.include({ ok: true });
      });
    }

    it('returns fresh rules with only the fields sent, in canonical order', () => {
      const input = [{ max_scope: 'task', effect: 'ask', category: 'send', connector: 'gmail' }, { effect: 'allow' }];
      const r = validateRules(input);
      if (!r.ok) throw new Error(r.message);
      expect(r.rules).to.deep.equal([{ connector: 'gmail', category: 'send', effect: 'ask', max_scope: 'task' }, { effect: 'allow' }]);
      expect(Object.keys(r.rules[0]!)).to.deep.equal(['connector', 'category', 'effect', 'max_scope']);
      expect(Object.keys(r.rules[1]!)).to.deep.equal(['effect']);
      expect(r.rules[0]).not.to.equal(input[0]);
    });
  });

  describe('422 (shape)', () => {
    const bad: Array<[string, unknown, RegExp]> = [
      ['not an array (object)', { rules: [] }, /must be an array/],
      ['not an array (null)', null, /must be an array/],
      ['not an array (string)', 'allow', /must be an array/],
      ['a rule that is null', [null], /rules\[0\] must be an object/],
      ['a rule that is a string', ['allow'], /rules\[0\] must be an object/],
      ['a rule that is an array', [[]], /rules\[0\] must be an object/],
      ['an unknown field', [{ effect: 'allow', scope: 'task' }], /rules\[0\]\.scope is not allowed/],
      ['a misspelled field', [{ effect: 'deny' }, { efect: 'deny' }], /rules\[1\]\.efect is not allowed/],
      ['a missing effect', [{ connector: 'gmail' }], /effect is required/],
      ['a misspelled effect', [{ effect: 'alow' }], /effect must be one of allow, deny, ask/],
      ['an effect in upper case', [{ effect: 'ALLOW' }], /effect must be one of/],
      ['an effect of the wrong type', [{ effect: 1 }], /effect must be one of/],
      ['an unknown category', [{ category: 'email', effect: 'deny' }], /category must be one of/],
      ['a null category', [{ category: null, effect: 'deny' }], /category must be one of/],
      ['a connector of the wrong type', [{ connector: 7, effect: 'deny' }], /connector must be a string/],
      ['a null connector', [{ connector: null, effect: 'deny' }], /connector must be a string/],
      ['an unknown max_scope', [{ effect: 'ask', max_scope: 'forever' }], /max_scope must be one of/],
      ['the decision kind `until` as max_scope', [{ effect: 'ask', max_scope: 'until' }], /max_scope must be one of/],
      ['shape beats value: 101 rules, one with an unknown field', [...Array.from({ length: 100 }, () => ({ effect: 'deny' })), { effect: 'deny', x: 1 }], /rules\[100\]\.x/],
      ['shape beats value: a bad max_scope on an allow rule', [{ effect: 'allow', max_scope: 'bogus' }], /max_scope must be one of/],
      ['shape of a later rule beats a value error of an earlier one', [{ effect: 'allow', category: 'send' }, { effect: 'nope' }], /rules\[1\]\.effect/],
    ];
    for (const [name, rules, message] of bad) {
      it(name, () => {
        const r = validateRules(rules);
        if (r.ok) throw new Error('accepted');
        expect(r.status).to.equal(422);
        expect(r.message).to.match(message);
      });
    }
  });

  describe('400 (values)', () => {
    const bad: Array<[string, unknown, RegExp]> = [
      ...['send', 'delete', 'pay', 'change_permission'].map(
        (category): [string, unknown, RegExp] => [`allow on high-risk ${category}`, [{ category, effect: 'allow' }], /high-risk/],
      ),
      ['max_scope on an allow rule', [{ category: 'read', effect: 'allow', max_scope: 'task' }], /max_scope is only permitted when effect is ask/],
      ['max_scope on a deny rule', [{ effect: 'deny', max_scope: 'permanent' }], /max_scope is only permitted/],
      ['an empty connector', [{ connector: '', effect: 'deny' }], /connector must not be empty/],
      ['a connector of 101 characters', [{ connector: 'c'.repeat(101), effect: 'deny' }], /at most 100 characters/],
      ['a secret connector of 101 characters', [{ connector: 'secret:' + 'A'.repeat(94), effect: 'deny' }], /at most 100 characters/],
      ['101 rules', Array.from({ length: 101 }, () => ({ effect: 'deny' })), /at most 100 rules/],
      ['the first failing rule is named', [{ effect: 'deny' }, { effect: 'deny' }, { effect: 'allow', category: 'pay' }], /rules\[2\]/],
    ];
    for (const [name, rules, message] of bad) {
      it(name, () => {
        const r = validateRules(rules);
        if (r.ok) throw new Error('accepted');
        expect(r.status).to.equal(400);
        expect(r.message).to.match(message);
      });
    }
  });
});
