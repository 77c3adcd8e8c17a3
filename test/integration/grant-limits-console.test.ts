import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import type { RequestApprovalInput } from '../../approvals/approvals.service.js';

/**
 * The console's approve form offers spending limits (issue 26, item 2): amounts (in major
 * units, sent as minor units) and a currency prefilled from the request for a payment,
 * recipient domains for a send, a number of requests for both; posted with the session's
 * CSRF token to the same decision as the API. The grants page shows limits and what was spent.
 */
describe('console: spending limits on the approve form (issue 26)', function () {
  this.timeout(30_000);
  let t: TestService;
  let envId: string;

  before(async () => {
    t = await startTestService();
    envId = (await t.api.post('/v1/environments', { end_user_id: 'mandate-console-user' })).body.id;
  });
  after(async () => {
    await t.close();
  });

  function agent() {
    const jar = new Map<string, string>();
    return {
      async go(path: string, init: { method?: string; form?: Record<string, string> } = {}) {
        const headers: Record<string, string> = { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') };
        let body: string | undefined;
        if (init.form) {
          headers['content-type'] = 'application/x-www-form-urlencoded';
          body = new URLSearchParams(init.form).toString();
        }
        const res = await fetch(`${t.url}${path}`, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
        for (const c of res.headers.getSetCookie()) {
          const [pair] = c.split(';');
          const [k, v] = pair!.split('=');
          if (v === '' || /Max-Age=0/.test(c)) jar.delete(k!);
          else jar.set(k!, v!);
        }
        return { status: res.status, text: await res.text() };
      },
    };
  }
  const field = (html: string, name: string): string => new RegExp(`name="${name}" value="([^"]+)"`).exec(html)![1]!;
  let m = 0;
  async function signedIn() {
    const member = (await t.api.post('/v1/team-members', { email: `limits${++m}@example.com`, name: `Limits ${m}` })).body;
    const b = agent();
    await b.go(new URL(member.sign_in_url).pathname);
    return b;
  }
  const pay = (over: Partial<RequestApprovalInput> = {}) => t.svc.approvals.requestApproval({
    developerId: DEFAULT_DEVELOPER_ID, environmentId: envId, connector: 'secret:STRIPE_KEY', category: 'pay', method: 'POST',
    host: 'api.stripe.com', path: '/v1/charges', max_scope: 'permanent', facts: { amount: { currency: 'usd', minor_units: 3000 } }, ...over,
  });
  /** The card of one approval on the page. */
  const cardOf = (html: string, id: string): string => {
    const at = html.indexOf(`data-approval="${id}"`);
    return html.slice(at, html.indexOf('</form>', at));
  };

  it('a pay card offers amounts and a currency (prefilled from the charge) and uses; approving with them stores a grant with those limits, the charge its first use', async () => {
    const a = await pay();
    const b = await signedIn();
    const page = await b.go('/console/approvals');
    const card = cardOf(page.text, a.id);
    for (const name of ['limit_per_request', 'limit_total', 'limit_currency', 'limit_max_uses']) expect(card).to.include(`name="${name}"`);
    expect(card).to.not.include('name="limit_recipients"');
    expect(card).to.match(/name="limit_currency" size="4" maxlength="3" value="USD"/);
    const csrf = field(page.text, 'csrf');
    const form = { decision: 'approve', scope: 'permanent', limit_per_request: '50', limit_total: '80.00', limit_currency: 'USD', limit_max_uses: '' };
    // CSRF as for every form: a forged token decides nothing.
    expect((await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { ...form, csrf: 'forged' } })).status).to.equal(403);
    const done = await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { ...form, csrf } });
    expect(done.status, done.text).to.equal(303);
    const decided = (await t.api.get(`/v1/approvals/${a.id}`)).body;
    expect(decided).to.include({ status: 'approved', scope: 'permanent', decided_via: 'console' });
    const grant = (await t.api.get('/v1/grants')).body.data.find((g: { id: string }) => g.id === decided.grant_id);
    expect(grant).to.deep.include({ limits: { per_request_minor_units: 5000, total_minor_units: 8000, currency: 'usd' }, used: { minor_units: 3000, uses: 1 } });
    const grants = await b.go('/console/grants');
    expect(grants.text).to.include('at most 50.00 USD per request; 30.00 USD of 80.00 USD spent');
  });

  it('the form\'s mistakes are a page saying so and leave the approval pending: limits on "this request only", an amount that is not one, no currency, limits that leave out the charge itself', async () => {
    const a = await pay();
    const b = await signedIn();
    const page = await b.go('/console/approvals');
    const csrf = field(page.text, 'csrf');
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ scope: 'once', limit_max_uses: '3' }, /once approval stores none/],
      [{ scope: 'permanent', limit_total: 'lots', limit_currency: 'usd' }, /not an amount in USD/],
      [{ scope: 'permanent', limit_total: '10.555', limit_currency: 'usd' }, /not an amount in USD/],
      [{ scope: 'permanent', limit_total: '80', limit_currency: '' }, /needs its currency/],
      [{ scope: 'permanent', limit_per_request: '20', limit_currency: 'usd' }, /request being approved/],
      [{ scope: 'permanent', limit_max_uses: '0' }, /at least 1/],
    ];
    for (const [form, message] of cases) {
      const r = await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', ...form } });
      expect(r.status, JSON.stringify(form)).to.equal(400);
      expect(r.text, JSON.stringify(form)).to.match(message);
    }
    expect((await t.api.get(`/v1/approvals/${a.id}`)).body.status).to.equal('pending');
    // Empty limit fields (the prefilled currency alone included) are no limits.
    const plain = await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', scope: 'permanent', limit_currency: 'USD', limit_total: '', limit_per_request: '' } });
    expect(plain.status).to.equal(303);
    const g = (await t.api.get('/v1/grants')).body.data.find((x: { approval_id: string }) => x.approval_id === a.id);
    expect(g).to.deep.include({ limits: null, used: { minor_units: 0, uses: 0 } });
  });

  it('a zero-decimal currency is taken in whole units', async () => {
    const a = await pay({ facts: { amount: { currency: 'jpy', minor_units: 3000 } } });
    const b = await signedIn();
    const page = await b.go('/console/approvals');
    const csrf = field(page.text, 'csrf');
    expect((await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', scope: 'permanent', limit_total: '5000.5', limit_currency: 'JPY' } })).status).to.equal(400);
    expect((await b.go(`/console/approvals/${a.id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', scope: 'permanent', limit_total: '5000', limit_currency: 'JPY' } })).status).to.equal(303);
    const g = (await t.api.get('/v1/grants')).body.data.find((x: { approval_id: string }) => x.approval_id === a.id);
    expect(g.limits).to.deep.equal({ total_minor_units: 5000, currency: 'jpy' });
  });

  it('a send card offers recipient domains and uses; other cards offer no limits', async () => {
    const send = await t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID, environmentId: envId, connector: 'gmail', category: 'send', method: 'POST',
      host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', max_scope: 'permanent', facts: { recipients: ['ann@acme.com'] },
    });
    const write = await t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID, environmentId: envId, connector: 'gmail', category: 'write', method: 'POST',
      host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts', max_scope: 'permanent',
    });
    const b = await signedIn();
    const page = await b.go('/console/approvals');
    const card = cardOf(page.text, send.id);
    expect(card).to.include('name="limit_recipients"');
    expect(card).to.include('name="limit_max_uses"');
    expect(card).to.not.include('name="limit_total"');
    expect(cardOf(page.text, write.id)).to.not.include('limit_');
    const csrf = field(page.text, 'csrf');
    const done = await b.go(`/console/approvals/${send.id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', scope: 'permanent', limit_recipients: 'acme.com, partner.io', limit_max_uses: '5' } });
    expect(done.status, done.text).to.equal(303);
    const g = (await t.api.get('/v1/grants')).body.data.find((x: { approval_id: string }) => x.approval_id === send.id);
    expect(g).to.deep.include({ limits: { max_uses: 5, recipients_within: ['acme.com', 'partner.io'] }, used: { minor_units: 0, uses: 1 } });
    expect((await b.go('/console/grants')).text).to.include('1 of 5 requests; recipients within acme.com, partner.io');
  });
});
