import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * Conditions on rules (issue 26, item 1), through the real proxy: a deny rule with
 * `amount_over` refuses a Stripe charge over the amount and lets a smaller one reach its
 * approval; `recipients_outside` refuses mail to an outside domain; `channels_outside` a
 * post to another channel; `count_over` refuses the 4th of 3 reads in a day, across
 * concurrent requests, and allows again once the clock moved a day. Each defence has its
 * attack: a request that hides its amount or a recipient from the decoder (a repeated form
 * key, a second To header, a compressed body) is treated as undecodable, which satisfies
 * deny conditions.
 */
describe('policy conditions through the gateway (issue 26, item 1)', function () {
  this.timeout(30_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com', 'gmail.googleapis.com', 'slack.com', 'www.googleapis.com'],
      secrets: {
        STRIPE: { value: 'sk_live_conditionsconditions', allowed_hosts: ['api.stripe.com'] },
        GMAIL: { value: 'ya29.conditionsconditions', allowed_hosts: ['gmail.googleapis.com'] },
        SLACK: { value: 'xoxb-conditionsconditions', allowed_hosts: ['slack.com'] },
        GCAL: { value: 'ya29.calendarcalendarcal', allowed_hosts: ['www.googleapis.com'] },
      },
    });
  });
  after(async () => {
    await w.close();
  });

  async function policy(rules: unknown[]): Promise<void> {
    const r = await w.t.api.put(`/v1/environments/${w.envId}/policy`, { rules });
    expect(r.status, r.text).to.equal(200);
  }

  interface Sent { status: number; error: string | null; }
  let n = 0;
  /** Sends one request through the gateway; `approve`: approve its approval (once) as soon as it is pending. */
  async function send(
    url: string,
    init: { method?: string; body?: string | Buffer; headers?: Record<string, string>; secret: string; approve?: boolean; deny?: boolean },
  ): Promise<Sent & { held: boolean }> {
    const agent = proxyAgent(w.gw);
    const tag = `n=${++n}`;
    const target = url.includes('?') ? `${url}&${tag}` : `${url}?${tag}`;
    const answer = request(target, {
      dispatcher: agent, method: (init.method ?? 'POST') as 'POST', body: init.body,
      headers: { authorization: `Bearer ${w.ph[init.secret]}`, ...init.headers },
    }).then(async (r) => {
      const text = await r.body.text();
      return { status: r.statusCode, error: r.statusCode >= 400 ? (JSON.parse(text) as { error: string }).error : null };
    }).finally(() => agent.close().catch(() => {}));
    let held = false;
    let settled = false;
    void answer.then(() => (settled = true), () => (settled = true));
    for (let i = 0; i < 2000 && !settled; i++) {
      // One request at a time is held here: the pending approval is this one's.
      const pending = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data as Array<{ id: string }>;
      const mine = pending[0];
      if (mine) {
        held = true;
        const decided = await w.t.api.post(`/v1/approvals/${mine.id}/decision`, init.deny ? { decision: 'deny' } : { decision: 'approve', scope: { kind: 'once' } });
        expect(decided.status, decided.text).to.equal(200);
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    return { ...(await answer), held };
  }

  const forwarded = (path: string) => w.up.seen.filter((s) => s.url.startsWith(path)).length;
  const form = { 'content-type': 'application/x-www-form-urlencoded' };

  describe('amount_over', () => {
    before(async () => {
      await policy([{ connector: 'secret:STRIPE', category: 'pay', effect: 'deny', when: { amount_over: { currency: 'usd', minor_units: 10000 } } }]);
    });
    beforeEach(() => w.mark());

    it('refuses a charge over the amount (403 policy_denied, deny_rule), never forwarded nor held', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: 'amount=20000&currency=usd', headers: form });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied', held: false });
      expect(forwarded('/v1/charges')).to.equal(0);
      const [e] = await w.audited(1);
      expect(e).to.include({ decision: 'deny', reason: 'deny_rule', category: 'pay' });
    });

    it('lets a smaller charge reach the approval (pay asks), forwarded once approved', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: 'amount=500&currency=usd', headers: form, approve: true });
      expect(r).to.deep.include({ status: 200, held: true });
      expect(forwarded('/v1/charges')).to.equal(1);
    });

    it('the amount exactly at the limit is not over it', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: 'amount=10000&currency=usd', headers: form, approve: true });
      expect(r).to.deep.include({ status: 200, held: true });
    });

    it('attack: the amount given twice (which one Stripe reads is its choice) is undecodable: refused', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: 'amount=500&currency=usd&amount=2000000', headers: form });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied', held: false });
      expect(forwarded('/v1/charges')).to.equal(0);
    });

    it('attack: the amount in the query and a small one in the body: refused', async () => {
      const r = await send('https://api.stripe.com/v1/charges?amount=2000000', { secret: 'STRIPE', body: 'amount=500&currency=usd', headers: form });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('attack: a compressed body hides the amount: refused', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: gzipSync('amount=2000000&currency=usd'), headers: { ...form, 'content-encoding': 'gzip' } });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('another currency does not dodge the rule: refused (the riskier reading)', async () => {
      const r = await send('https://api.stripe.com/v1/charges', { secret: 'STRIPE', body: 'amount=100&currency=eur', headers: form });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('a payment without an amount (confirm) is undecodable: refused', async () => {
      const r = await send('https://api.stripe.com/v1/payment_intents/pi_1/confirm', { secret: 'STRIPE', body: '', headers: form });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });
  });

  describe('recipients_outside', () => {
    before(async () => {
      await policy([{ connector: 'secret:GMAIL', category: 'send', effect: 'deny', when: { recipients_outside: ['acme.com'] } }]);
    });
    beforeEach(() => w.mark());
    const mail = (headers: string) => JSON.stringify({ raw: Buffer.from(`${headers}\r\nSubject: hi\r\n\r\nbody\r\n`).toString('base64url') });
    const sendMail = (headers: string, approve = false) =>
      send('https://gmail.googleapis.com/gmail/v1/users/me/messages/send', { secret: 'GMAIL', body: mail(headers), headers: { 'content-type': 'application/json' }, approve });

    it('refuses mail to an outside domain', async () => {
      expect(await sendMail('To: eve@evil.example')).to.deep.include({ status: 403, error: 'policy_denied', held: false });
      expect(forwarded('/gmail/v1/users/me/messages/send')).to.equal(0);
    });

    it('mail inside the domain (subdomains too) reaches its approval', async () => {
      expect(await sendMail('To: Bob <bob@acme.com>\r\nCc: ann@eu.acme.com', true)).to.deep.include({ status: 200, held: true });
    });

    it('a Bcc outside is enough to refuse', async () => {
      expect(await sendMail('To: bob@acme.com\r\nBcc: eve@evil.example')).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('attack: a second To header is undecodable: refused', async () => {
      expect(await sendMail('To: bob@acme.com\r\nTo: eve@evil.example')).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('attack: a look-alike domain (acme.com.evil.example) is outside', async () => {
      expect(await sendMail('To: bob@acme.com.evil.example')).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('attack: mixed line ends in the headers are undecodable: refused', async () => {
      const raw = Buffer.from('To: bob@acme.com\r\nBcc: eve@evil.example\nSubject: x\r\n\r\nb').toString('base64url');
      const r = await send('https://gmail.googleapis.com/gmail/v1/users/me/messages/send', { secret: 'GMAIL', body: JSON.stringify({ raw }), headers: { 'content-type': 'application/json' } });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('attack: a compressed body is undecodable: refused', async () => {
      const r = await send('https://gmail.googleapis.com/gmail/v1/users/me/messages/send', {
        secret: 'GMAIL', body: gzipSync(mail('To: bob@acme.com')), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });

    it('a message/rfc822 upload is read too', async () => {
      const up = (to: string, approve: boolean) => send('https://gmail.googleapis.com/upload/gmail/v1/users/me/messages/send?uploadType=media', {
        secret: 'GMAIL', body: `To: ${to}\r\nSubject: x\r\n\r\nbody`, headers: { 'content-type': 'message/rfc822' }, approve,
      });
      expect(await up('eve@evil.example', false)).to.deep.include({ status: 403, error: 'policy_denied' });
      expect(await up('bob@acme.com', true)).to.deep.include({ status: 200, held: true });
    });
  });

  describe('channels_outside', () => {
    before(async () => {
      await policy([{ connector: 'secret:SLACK', category: 'send', effect: 'deny', when: { channels_outside: ['C0123'] } }]);
    });
    beforeEach(() => w.mark());
    const post = (body: string, approve = false) =>
      send('https://slack.com/api/chat.postMessage', { secret: 'SLACK', body, headers: { 'content-type': 'application/json' }, approve });

    it('refuses a post to another channel; the listed one reaches its approval', async () => {
      expect(await post(JSON.stringify({ channel: 'C9999', text: 'hi' }))).to.deep.include({ status: 403, error: 'policy_denied' });
      expect(await post(JSON.stringify({ channel: 'C0123', text: 'hi' }), true)).to.deep.include({ status: 200, held: true });
    });

    it('attack: a channel repeated in the query is undecodable: refused', async () => {
      const r = await send('https://slack.com/api/chat.postMessage?channel=C9999', { secret: 'SLACK', body: JSON.stringify({ channel: 'C0123', text: 'hi' }), headers: { 'content-type': 'application/json' } });
      expect(r).to.deep.include({ status: 403, error: 'policy_denied' });
    });
  });

  describe('count_over', () => {
    beforeEach(() => w.mark());

    it('refuses the 4th of 3 reads a day, and allows again after the clock moved a day', async () => {
      await policy([
        { connector: 'secret:STRIPE', category: 'read', effect: 'deny', when: { count_over: { max: 3, per: 'day', scope: 'environment' } } },
        { category: 'read', effect: 'allow' },
      ]);
      const read = () => send('https://api.stripe.com/v1/customers', { method: 'GET', secret: 'STRIPE' });
      for (let i = 0; i < 3; i++) expect(await read(), `read ${i + 1}`).to.deep.include({ status: 200 });
      expect(await read()).to.deep.include({ status: 403, error: 'policy_denied' });
      expect(await read()).to.deep.include({ status: 403, error: 'policy_denied' }); // refused ones are not counted, nor let through
      expect(forwarded('/v1/customers')).to.equal(3);
      await w.t.advance(23 * 3600);
      expect(await read()).to.deep.include({ status: 403, error: 'policy_denied' });
      await w.t.advance(3600 + 1);
      expect(await read()).to.deep.include({ status: 200 });
      expect(forwarded('/v1/customers')).to.equal(4);
    });

    it('attack: 100 rules counting the same thing cost one count query each way, not 100 (a fourth review: every tenant shares SQLite\'s one connection)', async () => {
      await policy([
        ...Array.from({ length: 99 }, () => ({ connector: 'secret:STRIPE', category: 'read', effect: 'deny', when: { count_over: { max: 1000 + Math.floor(Math.random() * 1000), per: 'day' } } })),
        { category: 'read', effect: 'allow' },
      ]);
      const counts: string[] = [];
      const onQuery = (q: { sql: string }) => {
        if (/count\(/i.test(q.sql) && /policy_rate_events/i.test(q.sql)) counts.push(q.sql);
      };
      w.t.svc.db.on('query', onQuery);
      try {
        expect(await send('https://api.stripe.com/v1/balance', { method: 'GET', secret: 'STRIPE' })).to.deep.include({ status: 200 });
      } finally {
        w.t.svc.db.off('query', onQuery);
      }
      // The first decision's read and the settle's, under the lock: one query each.
      expect(counts).to.have.length(2);
    });

    it('concurrent requests never pass the max (counted atomically)', async () => {
      await policy([
        { connector: 'secret:STRIPE', category: 'read', effect: 'deny', when: { count_over: { max: 4, per: 'hour' } } },
        { category: 'read', effect: 'allow' },
      ]);
      await w.t.advance(2 * 3600);
      const answers = await Promise.all(Array.from({ length: 12 }, () => send('https://api.stripe.com/v1/balance', { method: 'GET', secret: 'STRIPE' })));
      expect(answers.filter((a) => a.status === 200)).to.have.length(4);
      expect(answers.filter((a) => a.status === 403 && a.error === 'policy_denied')).to.have.length(8);
      expect(forwarded('/v1/balance')).to.equal(4);
    });

    it('an ask rule with count_over asks from the (max+1)th on; a denied approval is not counted', async () => {
      await policy([
        { connector: 'secret:STRIPE', category: 'write', effect: 'ask', max_scope: 'once', when: { count_over: { max: 1, per: 'hour', scope: 'end_user' } } },
        { category: 'write', effect: 'allow' },
      ]);
      await w.t.advance(2 * 3600);
      const write = (o: { approve?: boolean; deny?: boolean } = {}) => send('https://api.stripe.com/v1/customers/cus_1', { secret: 'STRIPE', body: 'name=x', headers: form, ...o });
      expect(await write()).to.deep.include({ status: 200, held: false });
      expect(await write({ deny: true })).to.deep.include({ status: 403, error: 'approval_denied', held: true });
      expect(await write({ approve: true })).to.deep.include({ status: 200, held: true });
      expect(forwarded('/v1/customers/cus_1')).to.equal(2);
    });
  });

  describe('the policy check endpoint reads the decoded fields', () => {
    it('amount, recipients, channel; one left out is undecodable', async () => {
      await policy([
        { connector: 'secret:STRIPE', category: 'pay', effect: 'deny', when: { amount_over: { currency: 'usd', minor_units: 10000 } } },
        { connector: 'gmail', category: 'send', effect: 'deny', when: { recipients_outside: ['acme.com'] } },
        { connector: 'slack', category: 'send', effect: 'deny', when: { channels_outside: ['C0123'] } },
      ]);
      const check = async (body: object) => {
        const r = await w.t.api.post(`/v1/environments/${w.envId}/policy/check`, body);
        expect(r.status, r.text).to.equal(200);
        return r.body as { decision: string; reason: string; matched_rules: number[] };
      };
      expect(await check({ connector: 'secret:STRIPE', category: 'pay', amount: { currency: 'usd', minor_units: 20000 } })).to.include({ decision: 'deny', reason: 'deny_rule' });
      expect(await check({ connector: 'secret:STRIPE', category: 'pay', amount: { currency: 'USD', minor_units: 500 } })).to.deep.include({ decision: 'ask', reason: 'high_risk', matched_rules: [] });
      expect(await check({ connector: 'secret:STRIPE', category: 'pay' })).to.deep.include({ decision: 'deny', matched_rules: [0] });
      expect(await check({ connector: 'gmail', category: 'send', recipients: ['bob@acme.com'] })).to.include({ decision: 'ask' });
      expect(await check({ connector: 'gmail', category: 'send', recipients: ['bob@acme.com', 'Eve@Evil.example'] })).to.deep.include({ decision: 'deny', matched_rules: [1] });
      expect(await check({ connector: 'slack', category: 'send', channel: 'C0123' })).to.include({ decision: 'ask' });
      expect(await check({ connector: 'slack', category: 'send', channel: 'C1' })).to.deep.include({ decision: 'deny', matched_rules: [2] });
      const bad = (body: object) => w.t.api.post(`/v1/environments/${w.envId}/policy/check`, { connector: 'gmail', category: 'send', ...body });
      expect((await bad({ amount: { currency: 'usd', minor_units: -1 } })).status).to.equal(400);
      expect((await bad({ amount: { currency: 'usd', minor_units: '5' } })).status).to.equal(422);
      expect((await bad({ recipients: 'bob@acme.com' })).status).to.equal(422);
    });
  });

  describe('setting rules with conditions', () => {
    it('stores and answers them; 422 for shapes, 400 for values', async () => {
      const rules = [
        { connector: 'secret:STRIPE', category: 'pay', effect: 'ask', max_scope: 'once', when: { amount_over: { currency: 'usd', minor_units: 1000000 } } },
        { category: 'read', effect: 'allow', when: { count_over: { max: 50, per: 'hour', scope: 'end_user' } } },
      ];
      const put = await w.t.api.put(`/v1/environments/${w.envId}/policy`, { rules });
      expect(put.status, put.text).to.equal(200);
      expect(put.body.rules).to.deep.equal(rules);
      expect((await w.t.api.get(`/v1/environments/${w.envId}/policy`)).body.rules).to.deep.equal(rules);
      const status = async (when: unknown, rule: object = { category: 'pay', effect: 'deny' }) =>
        (await w.t.api.put(`/v1/environments/${w.envId}/policy`, { rules: [{ ...rule, when }] })).status;
      expect(await status({ amount_below: { currency: 'usd', minor_units: 1 } })).to.equal(422);
      expect(await status({ amount_over: { currency: 'usd', minor_units: '5' } })).to.equal(422);
      expect(await status({ count_over: { max: 3, per: 'week' } })).to.equal(422);
      expect(await status({ recipients_outside: 'acme.com' })).to.equal(422);
      expect(await status('acme.com')).to.equal(422);
      expect(await status({ amount_over: { currency: 'dollars', minor_units: 5 } })).to.equal(400);
      expect(await status({ amount_over: { currency: 'usd', minor_units: -5 } })).to.equal(400);
      expect(await status({ recipients_outside: [] })).to.equal(400);
      expect(await status({ recipients_outside: ['bob@acme.com'] })).to.equal(400);
      expect(await status({ count_over: { max: -1, per: 'day' } })).to.equal(400);
      // An allow rule never reaches a high-risk category, conditions or not.
      expect(await status({ amount_over: { currency: 'usd', minor_units: 5 } }, { category: 'pay', effect: 'allow' })).to.equal(400);
    });
  });
});
