import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * Hole 5 (medium): high-risk actions classified lower. The policy here allows reads and
 * writes and denies deletes for the Gmail secret; every attack dresses a delete (or a
 * payment) as a write or a read. Each must meet the dangerous reading: a delete is denied
 * (403 policy_denied), a payment is held for a human, and the upstream sees nothing.
 */
const U = '/gmail/v1/users/me';

describe('security: a dangerous request cannot be classified as a harmless one (hole 5)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['gmail.googleapis.com', 'www.googleapis.com', 'api.stripe.com'],
      secrets: {
        GMAIL: { value: 'ya29.real-gmail-token', allowed_hosts: ['gmail.googleapis.com', 'www.googleapis.com'] },
        STRIPE_KEY: { value: 'sk_live_51DowngradeRealKey', allowed_hosts: ['api.stripe.com'] },
      },
      rules: [{ connector: 'secret:GMAIL', category: 'delete', effect: 'deny' }],
    });
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());

  const gmail = (path: string, body: string | Buffer, headers: Record<string, string> = {}, host = 'gmail.googleapis.com') =>
    request(`https://${host}${path}`, { dispatcher: proxyAgent(w.gw), method: 'POST', body, headers: { authorization: `Bearer ${w.ph.GMAIL}`, 'content-type': 'application/json', ...headers } });

  async function deniedAsDelete(r: Awaited<ReturnType<typeof request>>, rule?: RegExp): Promise<void> {
    const text = await r.body.text();
    expect([r.statusCode, r.headers['x-gateway-error']], text).to.deep.equal([403, 'policy_denied']);
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:GMAIL', category: 'delete', decision: 'deny', reason: 'deny_rule' });
    if (rule) expect(text).to.match(rule);
  }

  it('attack: trash via duplicate keys (the last addLabelIds harmless)', async () => {
    await deniedAsDelete(await gmail(`${U}/messages/1/modify`, '{"addLabelIds":["TRASH"],"addLabelIds":["STARRED"]}'));
  });

  it('attack: trash via snake_case add_label_ids (Google reads the proto name too)', async () => {
    await deniedAsDelete(await gmail(`${U}/messages/1/modify`, '{"add_label_ids":["TRASH"]}'));
  });

  it('attack: trash via a body the gateway cannot parse', async () => {
    await deniedAsDelete(await gmail(`${U}/messages/batchModify`, '{"ids":["1"],"addLabelIds":["TRASH"],}'));
  });

  it('attack: a batch sent with X-HTTP-Method-Override: GET hiding a delete', async () => {
    const body = `--b\r\nContent-Type: application/http\r\n\r\nGET ${U}/messages/2\r\n--b\r\nContent-Type: application/http\r\n\r\nDELETE ${U}/messages/1\r\n--b--\r\n`;
    await deniedAsDelete(await gmail('/batch/gmail/v1', body, { 'content-type': 'multipart/mixed; boundary=b', 'x-http-method-override': 'GET' }, 'www.googleapis.com'));
  });

  it('attack: a DELETE sent with X-HTTP-Method-Override: GET (Google documents the override on POST only) is a delete', async () => {
    const r = await request(`https://gmail.googleapis.com${U}/messages/1`, {
      dispatcher: proxyAgent(w.gw), method: 'DELETE', headers: { authorization: `Bearer ${w.ph.GMAIL}`, 'x-http-method-override': 'GET' },
    });
    await deniedAsDelete(r);
  });

  it('attack: a batch with two boundary parameters is unreadable, so the most dangerous reading (asked, not passed)', async () => {
    const body = `--a\r\nContent-Type: application/http\r\n\r\nGET ${U}/messages/2\r\n--a--\r\n`;
    const held = gmail('/batch/gmail/v1', body, { 'content-type': 'multipart/mixed; boundary=a; boundary=b' }, 'www.googleapis.com');
    const approval = await pending();
    expect(approval).to.include({ connector: 'secret:GMAIL', category: 'change_permission' });
    expect((await w.t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' })).status).to.equal(200);
    const r = await held;
    await r.body.text();
    expect(r.headers['x-gateway-error']).to.equal('approval_denied');
    expect(w.up.seen).to.have.length(0);
  });

  it('attack: a Stripe subscription under an allow-write policy is a payment: held for approval', async () => {
    const held = request('https://api.stripe.com/v1/subscriptions', {
      dispatcher: proxyAgent(w.gw), method: 'POST', body: 'customer=cus_1&items[0][price]=price_1',
      headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
    });
    const approval = await pending();
    expect(approval).to.include({ connector: 'secret:STRIPE_KEY', category: 'pay', summary: 'POST api.stripe.com /v1/subscriptions' });
    expect(w.up.seen).to.have.length(0);
    await w.t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' });
    const r = await held;
    await r.body.text();
    expect(r.statusCode).to.equal(403);
  });

  // Second pass (the classifier's readings tightened after the first attack suite).

  it('attack: trash via a gzip-compressed label change (the gateway does not inflate)', async () => {
    await deniedAsDelete(await gmail(`${U}/messages/1/modify`, gzipSync('{"addLabelIds":["TRASH"]}'), { 'content-encoding': 'gzip' }));
  });

  it('attack: trash via a label list spelled AddLabelIds, the label padded as " TRASH"', async () => {
    await deniedAsDelete(await gmail(`${U}/threads/1/modify`, '{"AddLabelIds":[" TRASH"]}'));
  });

  it('attack: a filter that trashes the provider\'s security alerts as they arrive', async () => {
    await deniedAsDelete(await gmail(`${U}/settings/filters`, '{"criteria":{"from":"no-reply@accounts.google.com"},"action":{"addLabelIds":["TRASH"],"removeLabelIds":["INBOX"]}}'));
  });

  it('attack: a batch whose close delimiter is padded with NBSP, a delete hidden in the parts after it', async () => {
    const body = `--b\r\nContent-Type: application/http\r\n\r\nGET ${U}/messages/2\r\n--b--\xa0\r\n--b\r\nContent-Type: application/http\r\n\r\nDELETE ${U}/messages/1\r\n--b--\r\n`;
    await heldAndDenied(gmail('/batch/gmail/v1', Buffer.from(body, 'latin1'), { 'content-type': 'multipart/mixed; boundary=b' }, 'www.googleapis.com'), 'secret:GMAIL', 'change_permission');
  });

  it('attack: a batch Content-Type of 15,000 spaces and no "=" (a pattern that backtracked for minutes, every tenant waiting) is unreadable at once', async () => {
    await heldAndDenied(gmail('/batch/gmail/v1', 'x', { 'content-type': `multipart/mixed; ${' '.repeat(15_000)}x` }, 'www.googleapis.com'), 'secret:GMAIL', 'change_permission');
  });

  it('attack: a batch body line of 500,000 spaces ending in a letter (quadratic padding trim) is read in linear time: unreadable, asked', async () => {
    const body = `--b\r\n${' '.repeat(500_000)}x\r\n--b--\r\n`;
    await heldAndDenied(gmail('/batch/gmail/v1', body, { 'content-type': 'multipart/mixed; boundary=b' }, 'www.googleapis.com'), 'secret:GMAIL', 'change_permission');
  });

  it('attack: a batch with boundary= and an RFC 2231 boundary*= naming other parts', async () => {
    const body = `--a\r\nContent-Type: application/http\r\n\r\nGET ${U}/messages/2\r\n--a--\r\n--b\r\nContent-Type: application/http\r\n\r\nDELETE ${U}/messages/1\r\n--b--\r\n`;
    await heldAndDenied(gmail('/batch/gmail/v1', body, { 'content-type': "multipart/mixed; boundary=a; boundary*=utf-8''b" }, 'www.googleapis.com'), 'secret:GMAIL', 'change_permission');
  });

  it('attack: a batch read with GET whose body hides a delete', async () => {
    const body = `--b\r\nContent-Type: application/http\r\n\r\nDELETE ${U}/messages/1\r\n--b--\r\n`;
    const r = await request(`https://www.googleapis.com/batch/gmail/v1`, { dispatcher: proxyAgent(w.gw), method: 'GET', body, headers: { authorization: `Bearer ${w.ph.GMAIL}`, 'content-type': 'multipart/mixed; boundary=b' } });
    await deniedAsDelete(r);
  });

  const stripe = (path: string, body: string) =>
    request(`https://api.stripe.com${path}`, { dispatcher: proxyAgent(w.gw), method: 'POST', body, headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' } });

  it('attack: a Stripe invoice created with auto_advance (charged an hour later) under an allow-write policy', async () => {
    await heldAndDenied(stripe('/v1/invoices', 'customer=cus_1&auto_advance=true'), 'secret:STRIPE_KEY', 'pay');
  });

  it('attack: a Stripe customer credited through balance=, spelled b%61lance', async () => {
    await heldAndDenied(stripe('/v1/customers/cus_1', 'name=x&b%61lance=-500000'), 'secret:STRIPE_KEY', 'pay');
  });

  it('attack: Stripe usage reported for a customer (meter events bill them)', async () => {
    await heldAndDenied(stripe('/v1/billing/meter_events', 'event_name=api_calls&payload[stripe_customer_id]=cus_1&payload[value]=1000000'), 'secret:STRIPE_KEY', 'pay');
  });

  it('a Stripe customer update without balance is still a write, allowed and forwarded', async () => {
    const r = await stripe('/v1/customers/cus_1', 'name=Ada&metadata[note]=balance');
    await r.body.text();
    expect(r.statusCode).to.equal(200);
    expect(w.up.seen).to.have.length(1);
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:STRIPE_KEY', category: 'write', decision: 'allow', reason: 'rule' });
  });

  /** Held for a human (a high-risk category), the upstream untouched; denied, then audited with its category. */
  async function heldAndDenied(sending: ReturnType<typeof request>, connector: string, category: string): Promise<void> {
    const approval = await pending();
    expect(approval).to.include({ connector, category });
    expect(w.up.seen).to.have.length(0);
    expect((await w.t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'deny' })).status).to.equal(200);
    const r = await sending;
    await r.body.text();
    expect([r.statusCode, r.headers['x-gateway-error']]).to.deep.equal([403, 'approval_denied']);
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ connector, category, decision: 'ask', reason: 'approval_denied', status: 403 });
  }

  async function pending(): Promise<{ id: string; connector: string; category: string; summary: string }> {
    for (let i = 0; i < 300; i++) {
      const r = await w.t.api.get(`/v1/approvals?status=pending&environment_id=${w.envId}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 10));
    }
    throw new Error('no pending approval appeared');
  }
});
