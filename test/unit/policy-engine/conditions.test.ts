/**
 * Conditions on rules (issue 26, item 1): validation, evaluation with decoded facts and
 * counts, and the decoder factsOf() against requests that try to hide what they do.
 */
import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { conditionsHold } from '../../../policy-engine/conditions.js';
import { compilePolicy, evaluate, evaluateNaive, type PolicyRequest } from '../../../policy-engine/evaluate.js';
import { factsNeedBody, factsOf } from '../../../policy-engine/facts.js';
import { validateRules, type Rule } from '../../../policy-engine/rules.js';

const NOW = 1_800_000_000_000;
const usd = (minor_units: number) => ({ currency: 'usd', minor_units });

describe('policy-engine: rule conditions (issue 26)', () => {
  describe('validateRules with when', () => {
    const v = (when: unknown, rule: object = { category: 'pay', effect: 'deny' }) => validateRules([{ ...rule, when }]);
    it('accepts each condition and normalises currency and domains', () => {
      const out = v({ amount_over: { currency: 'USD', minor_units: 1000000 }, recipients_outside: ['Acme.com'], channels_outside: ['C0123'], count_over: { max: 50, per: 'hour', scope: 'end_user' } });
      expect(out).to.deep.equal({
        ok: true,
        rules: [{ category: 'pay', effect: 'deny', when: { amount_over: usd(1000000), recipients_outside: ['acme.com'], channels_outside: ['C0123'], count_over: { max: 50, per: 'hour', scope: 'end_user' } } }],
      });
    });
    const cases: Array<[string, unknown, 400 | 422]> = [
      ['not an object', [], 422],
      ['an unknown condition', { amount_under: usd(1) }, 422],
      ['an unknown field in amount_over', { amount_over: { ...usd(1), cents: 1 } }, 422],
      ['minor_units a string', { amount_over: { currency: 'usd', minor_units: '1' } }, 422],
      ['minor_units a fraction', { amount_over: { currency: 'usd', minor_units: 1.5 } }, 422],
      ['recipients_outside a string', { recipients_outside: 'acme.com' }, 422],
      ['channels_outside with a number', { channels_outside: [1] }, 422],
      ['count_over per week', { count_over: { max: 1, per: 'week' } }, 422],
      ['count_over scope team', { count_over: { max: 1, per: 'day', scope: 'team' } }, 422],
      ['count_over without max', { count_over: { per: 'day' } }, 422],
      ['a currency of four letters', { amount_over: { currency: 'usdt', minor_units: 1 } }, 400],
      ['a negative amount', { amount_over: usd(-1) }, 400],
      ['an unsafe amount', { amount_over: usd(2 ** 60) }, 400],
      ['an empty domain list', { recipients_outside: [] }, 400],
      ['an address for a domain', { recipients_outside: ['bob@acme.com'] }, 400],
      ['an empty channel', { channels_outside: [''] }, 400],
      ['a negative max', { count_over: { max: -1, per: 'day' } }, 400],
    ];
    for (const [name, when, status] of cases) {
      it(`${status} for ${name}`, () => {
        const out = v(when);
        expect(out.ok).to.equal(false);
        expect(out).to.have.property('status', status);
      });
    }
    it('400 for an allow rule with conditions on a high-risk category', () => {
      expect(v({ amount_over: usd(5) }, { category: 'pay', effect: 'allow' })).to.deep.include({ ok: false, status: 400 });
    });
    it('a shape error anywhere wins over a value error (422 first)', () => {
      const out = validateRules([{ category: 'pay', effect: 'deny', when: { amount_over: usd(-1) } }, { effect: 'deny', when: { nope: 1 } }]);
      expect(out).to.have.property('status', 422);
    });
  });

  describe('conditionsHold: the riskier reading for what cannot be read', () => {
    const when = { amount_over: usd(1000) };
    it('amount over, at, under', () => {
      expect(conditionsHold(when, 'deny', { facts: { amount: usd(1001) } })).to.equal(true);
      expect(conditionsHold(when, 'deny', { facts: { amount: usd(1000) } })).to.equal(false);
      expect(conditionsHold(when, 'allow', { facts: { amount: usd(1001) } })).to.equal(true);
    });
    for (const facts of [undefined, null, {}, { amount: null }, { amount: { currency: 'eur', minor_units: 1 } }]) {
      it(`unreadable amount ${JSON.stringify(facts)}: holds for deny and ask, not for allow`, () => {
        expect(conditionsHold(when, 'deny', { facts })).to.equal(true);
        expect(conditionsHold(when, 'ask', { facts })).to.equal(true);
        expect(conditionsHold(when, 'allow', { facts })).to.equal(false);
      });
    }
    it('recipients: one outside is enough; subdomains are inside; none readable is unknown', () => {
      const r = { recipients_outside: ['acme.com'] };
      expect(conditionsHold(r, 'deny', { facts: { recipients: ['a@acme.com', 'b@eu.acme.com'] } })).to.equal(false);
      expect(conditionsHold(r, 'deny', { facts: { recipients: ['a@acme.com', 'e@notacme.com'] } })).to.equal(true);
      expect(conditionsHold(r, 'deny', { facts: { recipients: ['a@acme.com.evil.io'] } })).to.equal(true);
      expect(conditionsHold(r, 'deny', { facts: { recipients: [] } })).to.equal(false);
      expect(conditionsHold(r, 'deny', { facts: { recipients: null } })).to.equal(true);
      expect(conditionsHold(r, 'allow', { facts: { recipients: null } })).to.equal(false);
    });
    it('channel: not listed holds; unknown takes the riskier reading', () => {
      const c = { channels_outside: ['C1'] };
      expect(conditionsHold(c, 'deny', { facts: { channel: 'C1' } })).to.equal(false);
      expect(conditionsHold(c, 'deny', { facts: { channel: 'C2' } })).to.equal(true);
      expect(conditionsHold(c, 'ask', { facts: {} })).to.equal(true);
      expect(conditionsHold(c, 'allow', { facts: {} })).to.equal(false);
    });
    it('count_over: with max 3 the 4th is the first to satisfy it', () => {
      const c = { count_over: { max: 3, per: 'day' as const } };
      expect([0, 1, 2, 3, 4].map((count) => conditionsHold(c, 'deny', { count }))).to.deep.equal([false, false, false, true, true]);
      expect(conditionsHold(c, 'deny', {})).to.equal(true);
      expect(conditionsHold(c, 'allow', {})).to.equal(false);
    });
  });

  describe('evaluate with conditions', () => {
    const rules: Rule[] = [
      { connector: 'secret:S', category: 'pay', effect: 'deny', when: { amount_over: usd(10000) } },
      { connector: 'secret:S', category: 'read', effect: 'deny', when: { count_over: { max: 3, per: 'day' } } },
      { category: 'read', effect: 'allow' },
    ];
    const both = (req: PolicyRequest) => {
      const a = evaluate(compilePolicy(rules), req, [], { nowMs: NOW });
      const b = evaluateNaive(rules, req, [], { nowMs: NOW });
      expect(a).to.deep.equal(b);
      return a;
    };
    it('a charge over the amount is denied by the rule; a smaller one asks (pay is high-risk)', () => {
      expect(both({ connector: 'secret:S', category: 'pay', facts: { amount: usd(20000) } })).to.deep.include({ decision: 'deny', reason: 'deny_rule', matched_rules: [0] });
      expect(both({ connector: 'secret:S', category: 'pay', facts: { amount: usd(500) } })).to.deep.include({ decision: 'ask', reason: 'high_risk', matched_rules: [] });
      expect(both({ connector: 'secret:S', category: 'pay' })).to.deep.include({ decision: 'deny', matched_rules: [0] });
    });
    it('count_over: the 4th read is denied; matched_rules in rule order', () => {
      const at = (n: number) => both({ connector: 'secret:S', category: 'read', counts: new Map([[1, n]]) });
      expect(at(2)).to.deep.include({ decision: 'allow', reason: 'rule', matched_rules: [2] });
      expect(at(3)).to.deep.include({ decision: 'deny', reason: 'deny_rule', matched_rules: [1, 2] });
      // Counts not supplied: unknown, the riskier reading.
      expect(both({ connector: 'secret:S', category: 'read' })).to.deep.include({ decision: 'deny' });
    });
    it('CompiledPolicy says which rules count and whether facts are read', () => {
      const p = compilePolicy(rules);
      expect(p.countedRules('secret:S', 'read')).to.deep.equal([1]);
      expect(p.countedRules('secret:T', 'read')).to.deep.equal([]);
      expect(p.needsFacts).to.equal(true);
      expect(compilePolicy([{ category: 'read', effect: 'allow' }]).hasConditions).to.equal(false);
    });
    it('a grant with limits covers only a request within them', () => {
      const g = { id: 'g', connector: 'secret:S', category: 'pay' as const, scope: 'permanent' as const, task_id: null, session_id: null, expires_at: null, limits: { currency: 'usd', per_request_minor_units: 1000 } };
      const req = (m: number | null): PolicyRequest => ({ connector: 'secret:S', category: 'pay', facts: m === null ? {} : { amount: usd(m) } });
      expect(evaluate([], req(500), [g], { nowMs: NOW })).to.include({ decision: 'allow', reason: 'grant' });
      expect(evaluate([], req(5000), [g], { nowMs: NOW })).to.include({ decision: 'ask' });
      expect(evaluate([], req(null), [g], { nowMs: NOW })).to.include({ decision: 'ask' });
      expect(evaluate(compilePolicy([]), req(5000), [g], { nowMs: NOW })).to.include({ decision: 'ask' });
    });
  });

  describe('factsOf: the decoder, never a guess', () => {
    const stripe = (body: string | Buffer, headers: Record<string, string> = {}, path = '/v1/charges') =>
      factsOf({ method: 'POST', host: 'api.stripe.com', path, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body }, 'secret:S');
    it('Stripe amount and currency from the form', () => {
      expect(stripe('amount=2000&currency=USD&description=x')).to.deep.equal({ amount: usd(2000) });
    });
    for (const [name, body, headers, path] of [
      ['amount twice', 'amount=1&amount=2000000&currency=usd', {}, undefined],
      ['amount in the query and the body', 'amount=1&currency=usd', {}, '/v1/charges?amount=9999999'],
      ['a bracketed amount', 'amount[]=1&currency=usd', {}, undefined],
      ['a differently cased key', 'amount=1&Amount=99999&currency=usd', {}, undefined],
      ['no currency', 'amount=1', {}, undefined],
      ['an amount that is no integer', 'amount=1e9&currency=usd', {}, undefined],
      ['JSON', '{"amount":1,"currency":"usd"}', { 'content-type': 'application/json' }, undefined],
      ['a compressed body', gzipSync('amount=1&currency=usd'), { 'content-encoding': 'gzip' }, undefined],
    ] as Array<[string, string | Buffer, Record<string, string>, string | undefined]>) {
      it(`Stripe: ${name} is unreadable`, () => expect(stripe(body, headers, path)).to.deep.equal({ amount: null }));
    }
    it('Stripe: a body not buffered is unreadable', () => {
      expect(factsOf({ method: 'POST', host: 'api.stripe.com', path: '/v1/charges', headers: { 'content-length': '20' } }, 'secret:S')).to.deep.equal({ amount: null });
    });

    const gmail = (msg: string, extra: object = {}) =>
      factsOf({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ raw: Buffer.from(msg).toString('base64url'), ...extra }) }, 'gmail');
    it('Gmail: To, Cc and Bcc, lower-cased, an empty group skipped', () => {
      expect(gmail('To: Bob <Bob@Acme.com>, ann@acme.com\r\nCc: c@x.io\r\nBcc: undisclosed-recipients:;, d@y.io\r\nFrom: me@acme.com\r\n\r\nhi')).to.deep.equal({ recipients: ['bob@acme.com', 'ann@acme.com', 'c@x.io', 'd@y.io'] });
    });
    for (const [name, msg] of [
      ['two To headers', 'To: a@acme.com\r\nTo: e@evil.io\r\n\r\nx'],
      ['two Bcc headers', 'To: a@acme.com\r\nBcc: a@acme.com\r\nbcc: e@evil.io\r\n\r\nx'],
      ['mixed line ends', 'To: a@acme.com\r\nBcc: e@evil.io\nSubject: x\r\n\r\nx'],
      ['a NUL in the headers', 'To: a@acme.com\u0000, e@evil.io\r\n\r\nx'],
      ['two <…> in one entry', 'To: <a@acme.com> <e@evil.io>\r\n\r\nx'],
      ['an address that is not well-formed', 'To: a@acme.com@evil.io\r\n\r\nx'],
    ]) {
      it(`Gmail: ${name} is unreadable`, () => expect(gmail(msg!)).to.deep.equal({ recipients: null }));
    }
    it('Gmail: a second raw spelling, a saved draft, a compressed body, a resumable upload: unreadable', () => {
      expect(gmail('To: a@acme.com\r\n\r\nx', { RAW: 'VG86IGVAZXZpbC5pbw' })).to.deep.equal({ recipients: null });
      expect(factsOf({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts/send', headers: { 'content-type': 'application/json' }, body: '{"id":"r1"}' }, 'gmail')).to.deep.equal({ recipients: null });
      expect(factsOf({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync('{}') }, 'gmail')).to.deep.equal({ recipients: null });
      expect(factsOf({ method: 'POST', host: 'gmail.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send?uploadType=resumable', headers: { 'content-type': 'application/json' }, body: '{}' }, 'gmail')).to.deep.equal({ recipients: null });
    });
    it('Gmail: a message/rfc822 upload is read', () => {
      expect(factsOf({ method: 'POST', host: 'gmail.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send?uploadType=media', headers: { 'content-type': 'message/rfc822' }, body: 'To: a@acme.com\r\n\r\nx' }, 'gmail')).to.deep.equal({ recipients: ['a@acme.com'] });
    });
    it('Gmail: a call that sends nothing has no recipients field', () => {
      expect(factsOf({ method: 'GET', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages', headers: {} }, 'gmail')).to.deep.equal({});
    });

    const cal = (method: string, path: string, body: unknown) =>
      factsOf({ method, host: 'www.googleapis.com', path, headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) }, 'calendar');
    it('Calendar: the guests of an insert; none is an empty list; PATCH without attendees is unknown', () => {
      expect(cal('POST', '/calendar/v3/calendars/primary/events', { attendees: [{ email: 'A@acme.com' }, { email: 'e@evil.io', optional: true }] })).to.deep.equal({ recipients: ['a@acme.com', 'e@evil.io'] });
      expect(cal('POST', '/calendar/v3/calendars/primary/events', { summary: 'x' })).to.deep.equal({ recipients: [] });
      expect(cal('PATCH', '/calendar/v3/calendars/primary/events/ev1', { summary: 'x' })).to.deep.equal({ recipients: null });
      expect(cal('POST', '/calendar/v3/calendars/primary/events', { attendees: [{ id: 'x' }] })).to.deep.equal({ recipients: null });
      expect(cal('POST', '/calendar/v3/calendars/primary/events', '{"attendees":[],"attendees":[{"email":"e@evil.io"}]}')).to.deep.equal({ recipients: null });
      expect(cal('POST', '/calendar/v3/calendars/primary/events/quickAdd?text=x', '')).to.deep.equal({ recipients: null });
    });

    const slack = (body: string, ct = 'application/json', path = '/api/chat.postMessage') =>
      factsOf({ method: 'POST', host: 'slack.com', path, headers: { 'content-type': ct }, body }, 'slack');
    it('Slack: the one channel, from JSON or a form', () => {
      expect(slack('{"channel":"C1","text":"x"}')).to.deep.equal({ channel: 'C1' });
      expect(slack('channel=C1&text=x', 'application/x-www-form-urlencoded')).to.deep.equal({ channel: 'C1' });
    });
    it('Slack: a channel in the query and the body, twice in a form, repeated JSON keys, a list: unreadable', () => {
      expect(slack('{"channel":"C1"}', 'application/json', '/api/chat.postMessage?channel=C2')).to.deep.equal({ channel: null });
      expect(slack('channel=C1&channel=C2', 'application/x-www-form-urlencoded')).to.deep.equal({ channel: null });
      expect(slack('{"channel":"C1","channel":"C2"}')).to.deep.equal({ channel: null });
      expect(slack('{"channel":"C1","channel_id":"C2"}')).to.deep.equal({ channel: null });
      expect(slack('channels=C1,C2', 'application/x-www-form-urlencoded', '/api/files.upload')).to.deep.equal({ channel: null });
    });

    it('factsNeedBody: the decoders\' writes', () => {
      expect(factsNeedBody({ method: 'POST', host: 'api.stripe.com', path: '/v1/charges', headers: {} })).to.equal(true);
      expect(factsNeedBody({ method: 'GET', host: 'api.stripe.com', path: '/v1/charges', headers: {} })).to.equal(false);
      expect(factsNeedBody({ method: 'POST', host: 'gmail.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send', headers: {} })).to.equal(true);
      expect(factsNeedBody({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/modify', headers: {} })).to.equal(false);
      expect(factsNeedBody({ method: 'PATCH', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events/e', headers: {} })).to.equal(true);
      expect(factsNeedBody({ method: 'POST', host: 'example.com', path: '/', headers: {} })).to.equal(false);
    });
  });

  describe('a fourth review: the cost of recipients_outside cannot be driven up by a request', () => {
    it('attack: 1,000 recipients of distinct domains against 100 rules of 100 domains read each rule\'s list once, not once a recipient', () => {
      let reads = 0;
      const lists = Array.from({ length: 100 }, (_, r) => {
        const domains = Array.from({ length: 100 }, (_, i) => `d${r}x${i}.example.com`);
        return new Proxy(domains, { get: (t, k, rcv) => (typeof k === 'string' && /^\d+$/.test(k) && reads++, Reflect.get(t, k, rcv)) });
      });
      const recipients = Array.from({ length: 1000 }, (_, i) => `u${i}@sub${i}.d99x99.example.com`);
      for (let round = 0; round < 2; round++) {
        for (const domains of lists) expect(conditionsHold({ recipients_outside: domains }, 'ask', { facts: { recipients } })).to.equal(domains !== lists[99]);
      }
      // Each list read once (to build its set), not 2 rounds x 1,000 recipients x 100 rules times.
      expect(reads).to.be.at.most(100 * 100);
    });

    it('subdomains and trailing dots as before: within a listed domain or under it, never a look-alike', () => {
      const within = (address: string, domains: string[]) => !conditionsHold({ recipients_outside: domains }, 'ask', { facts: { recipients: [address] } });
      expect(within('x@eu.acme.com', ['acme.com'])).to.equal(true);
      expect(within('x@acme.com.', ['.ACME.com.'])).to.equal(true);
      expect(within('x@acme.com.evil.io', ['acme.com'])).to.equal(false);
      expect(within('x@notacme.com', ['acme.com'])).to.equal(false);
      expect(within('no-domain', ['acme.com'])).to.equal(false);
    });

    it('a request naming more than 1,000 recipients has none the policy reads (the riskier reading)', () => {
      const event = (n: number) => factsOf({
        method: 'POST', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events', headers: { 'content-type': 'application/json', 'content-length': '1' },
        body: JSON.stringify({ attendees: Array.from({ length: n }, (_, i) => ({ email: `g${i}@acme.com` })) }),
      }, '');
      expect(event(1000).recipients).to.have.length(1000);
      expect(event(1001).recipients).to.equal(null);
    });
  });
});
