import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { createMembersService, LINK_MS, SESSION_MS, SignInBusyError } from '../../accounts/members.service.js';
import { ServiceClock } from '../../lib/clock.js';

/**
 * Issue 23, item 8 (c, d): the console's credentials end. A session cookie (12 hours) and a
 * one-time sign-in link (24 hours) are refused once their lifetime has passed on the
 * service's clock (advanced here, never slept), and accepted one second before; an expired
 * session decides nothing. The login form is a double-submit CSRF check: a POST without the
 * login cookie is refused, whatever the form says (an empty token must not equal an absent
 * cookie), so another site cannot sign a victim's browser in to the attacker's account.
 * Each test makes its own member; each passes alone and in any order.
 */
describe('attack: console sessions and sign-in links past their lifetime; a login POST without its cookie (issue 23, item 8c-d)', function () {
  this.timeout(30_000);
  let t: TestService;

  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t?.close();
  });

  /** A tiny cookie-keeping browser over fetch (no redirects followed). */
  function browser() {
    const jar = new Map<string, string>();
    return {
      jar,
      async go(path: string, init: { method?: string; form?: Record<string, string>; cookies?: boolean } = {}) {
        const headers: Record<string, string> = {};
        if (init.cookies !== false && jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
        let body: string | undefined;
        if (init.form) {
          headers['content-type'] = 'application/x-www-form-urlencoded';
          body = new URLSearchParams(init.form).toString();
        }
        const res = await fetch(`${t.url}${path}`, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
        const setCookies = res.headers.getSetCookie();
        for (const c of setCookies) {
          const [pair] = c.split(';');
          const at = pair!.indexOf('=');
          const [k, v] = [pair!.slice(0, at), pair!.slice(at + 1)];
          if (v === '' || /Max-Age=0/.test(c)) jar.delete(k);
          else jar.set(k, v);
        }
        return { status: res.status, location: res.headers.get('location'), setCookies, text: await res.text() };
      },
    };
  }
  const field = (html: string, name: string): string => new RegExp(`name="${name}" value="([^"]+)"`).exec(html)![1]!;
  const email = () => `m-${randomBytes(5).toString('hex')}@example.com`;

  async function member(password?: string): Promise<{ id: string; email: string; signIn: string }> {
    const e = email();
    const r = await t.api.post('/v1/team-members', { email: e, name: 'Member', ...(password ? { password } : {}) });
    expect(r.status, r.text).to.equal(201);
    return { id: r.body.id, email: e, signIn: new URL(r.body.sign_in_url).pathname };
  }

  async function signedIn(): Promise<ReturnType<typeof browser>> {
    const b = browser();
    const r = await b.go((await member()).signIn);
    expect(r.status).to.equal(303);
    expect(b.jar.has('gw_console')).to.equal(true);
    return b;
  }

  async function pendingApproval(): Promise<string> {
    const env = await t.api.post('/v1/environments', { end_user_id: `console-${randomBytes(5).toString('hex')}` });
    expect(env.status, env.text).to.equal(201);
    const a = await t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID, environmentId: env.body.id, connector: 'gmail', category: 'send', method: 'POST',
      host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', max_scope: 'once',
    });
    return a.id;
  }

  it('a session cookie lives 12 hours: accepted one second before, refused from then on (pages, the live stream and decisions)', async () => {
    expect(SESSION_MS).to.equal(12 * 3_600_000);
    const b = await signedIn();
    const first = await b.go('/console/approvals');
    expect(first.status).to.equal(200);
    const csrf = field(first.text, 'csrf');

    await t.advance(SESSION_MS / 1000 - 1);
    expect((await b.go('/console/approvals')).status, 'one second before the end').to.equal(200);

    await t.advance(1);
    const expired = await b.go('/console/approvals');
    expect(expired.status).to.equal(303);
    expect(expired.location).to.equal('/console/login');
    expect((await b.go('/console/grants')).status).to.equal(303);
    expect((await b.go('/console/audit')).status).to.equal(303);
    expect((await b.go('/console/approvals/stream')).status).to.equal(401);
    // The session's own CSRF token does not bring it back: nothing is decided.
    const id = await pendingApproval();
    const decide = await b.go(`/console/approvals/${id}/decide`, { method: 'POST', form: { csrf, decision: 'approve', scope: 'once' } });
    expect(decide.status).to.equal(303);
    expect(decide.location).to.equal('/console/login');
    expect((await t.api.get(`/v1/approvals/${id}`)).body.status).to.equal('pending');
  });

  it('the session cookie says the same lifetime to the browser (Max-Age 12 hours), for a link and for a password', async () => {
    const viaLink = browser();
    const r = await viaLink.go((await member()).signIn);
    expect(r.setCookies.find((c) => c.startsWith('gw_console='))).to.match(new RegExp(`Max-Age=${SESSION_MS / 1000}(;|$)`));
    const m = await member('a long enough password');
    const viaPassword = browser();
    const page = await viaPassword.go('/console/login');
    const ok = await viaPassword.go('/console/login', { method: 'POST', form: { csrf: field(page.text, 'csrf'), email: m.email, password: 'a long enough password' } });
    expect(ok.status).to.equal(303);
    expect(ok.setCookies.find((c) => c.startsWith('gw_console='))).to.match(new RegExp(`Max-Age=${SESSION_MS / 1000}(;|$)`));
  });

  it('a password session ends after 12 hours too', async () => {
    const m = await member('a long enough password');
    const b = browser();
    const page = await b.go('/console/login');
    expect((await b.go('/console/login', { method: 'POST', form: { csrf: field(page.text, 'csrf'), email: m.email, password: 'a long enough password' } })).status).to.equal(303);
    expect((await b.go('/console/approvals')).status).to.equal(200);
    await t.advance(SESSION_MS / 1000);
    expect((await b.go('/console/approvals')).status).to.equal(303);
  });

  it('a sign-in link lives 24 hours: one second before the end it still signs in', async () => {
    expect(LINK_MS).to.equal(24 * 3_600_000);
    const m = await member();
    await t.advance(LINK_MS / 1000 - 1);
    const b = browser();
    const r = await b.go(m.signIn);
    expect(r.status).to.equal(303);
    expect(r.location).to.equal('/console/approvals');
    expect((await b.go('/console/approvals')).status).to.equal(200);
  });

  it('attack: a sign-in link used after 24 hours is refused (404 page, no session), and stays refused', async () => {
    const m = await member();
    await t.advance(LINK_MS / 1000);
    const b = browser();
    const r = await b.go(m.signIn);
    expect(r.status).to.equal(404);
    expect(r.text).to.include('This sign-in link is not valid');
    expect(r.setCookies.filter((c) => c.startsWith('gw_console='))).to.deep.equal([]);
    expect((await b.go('/console/approvals')).status).to.equal(303);
    await t.advance(60);
    expect((await browser().go(m.signIn)).status).to.equal(404);
  });

  it('attack: another developer adding a member with the same email cannot lock this one out of password sign-in (a fourth review); each password signs in to its own', async () => {
    const victim = await member('the victim\'s own password');
    const other = await t.otherDeveloper();
    const impostor = await other.post('/v1/team-members', { email: victim.email, name: 'Impostor', password: 'the impostor\'s password' });
    expect(impostor.status, impostor.text).to.equal(201);
    const login = async (password: string) => {
      const b = browser();
      const page = await b.go('/console/login');
      const r = await b.go('/console/login', { method: 'POST', form: { csrf: field(page.text, 'csrf'), email: victim.email, password } });
      return { status: r.status, b };
    };
    const sessions = async (memberId: string): Promise<number> => Number((await t.svc.db('console_sessions').where({ member_id: memberId }).count({ n: '*' }))[0]!.n);
    expect((await login('the victim\'s own password')).status).to.equal(303);
    expect([await sessions(victim.id), await sessions(impostor.body.id)]).to.deep.equal([1, 0]);
    // The impostor's password signs in to the impostor, at its own developer only.
    expect((await login('the impostor\'s password')).status).to.equal(303);
    expect([await sessions(victim.id), await sessions(impostor.body.id)]).to.deep.equal([1, 1]);
    expect((await login('a wrong password, long enough')).status).to.equal(401);
  });

  it('attack: a login POST without the login cookie is refused (with the form\'s token, an empty one, none); with the cookie it signs in', async () => {
    const m = await member('a long enough password');
    const creds = { email: m.email, password: 'a long enough password' };
    const b = browser();
    const page = await b.go('/console/login');
    const token = field(page.text, 'csrf');
    expect(b.jar.get('gw_login_csrf')).to.equal(token);
    for (const form of [{ csrf: token, ...creds }, { csrf: '', ...creds }, { ...creds }]) {
      const r = await b.go('/console/login', { method: 'POST', form, cookies: false });
      expect(r.status, JSON.stringify(Object.keys(form))).to.equal(403);
      expect(r.setCookies.filter((c) => c.startsWith('gw_console='))).to.deep.equal([]);
    }
    // The cookie without the matching form field is refused too.
    const other = browser();
    const fresh = await other.go('/console/login');
    expect((await other.go('/console/login', { method: 'POST', form: { csrf: token, ...creds } })).status).to.equal(403);
    expect((await other.go('/console/login', { method: 'POST', form: { ...creds } })).status).to.equal(403);
    // The control: cookie and field together sign in.
    const again = await other.go('/console/login');
    expect(field(again.text, 'csrf')).to.not.equal(field(fresh.text, 'csrf'));
    const ok = await other.go('/console/login', { method: 'POST', form: { csrf: field(again.text, 'csrf'), ...creds } });
    expect(ok.status).to.equal(303);
    expect(ok.location).to.equal('/console/approvals');
    expect((await other.go('/console/approvals')).status).to.equal(200);
  });
});

/**
 * A fourth review: password sign-in had no bound. From one address, guesses were unlimited;
 * from many, each attempt's scrypt (32 MiB, ~100 ms) took a thread of libuv's pool of four,
 * which the egress guard's DNS lookups share. Now one address gets 10 attempts, then one
 * every 6 s (429 with Retry-After); at most 2 checks run and 32 wait, the rest are refused at once.
 */
describe('attack: password guessing and sign-in floods (a fourth review)', function () {
  this.timeout(30_000);
  let t: TestService;
  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t?.close();
  });

  it('one address gets 10 attempts, then 429 with Retry-After, the right password too', async () => {
    const email = `g-${randomBytes(5).toString('hex')}@example.com`;
    expect((await t.api.post('/v1/team-members', { email, name: 'G', password: 'the right password' })).status).to.equal(201);
    const attempt = async (password: string) => {
      const page = await fetch(`${t.url}/console/login`);
      const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
      const cookie = page.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      const r = await fetch(`${t.url}/console/login`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, email, password }).toString() });
      await r.text();
      return { status: r.status, retryAfter: r.headers.get('retry-after') };
    };
    for (let i = 0; i < 10; i++) expect((await attempt(`guess number ${i}`)).status).to.equal(401);
    const next = await attempt('the right password');
    expect(next.status).to.equal(429);
    expect(Number(next.retryAfter)).to.be.within(1, 6);
  });

  it('at most 2 checks run and 32 wait: past that a sign-in is refused at once, and the others still answer', async () => {
    const members = createMembersService({ db: t.svc.db, clock: new ServiceClock() });
    const email = `f-${randomBytes(5).toString('hex')}@example.com`;
    await members.create(DEFAULT_DEVELOPER_ID, { email, name: 'F', password: 'the right password' });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => members.signIn(email, 'a wrong password')));
    const busy = results.filter((r) => r.status === 'rejected' && r.reason instanceof SignInBusyError).length;
    expect(busy).to.equal(6);
    expect(results.filter((r) => r.status === 'fulfilled' && r.value === null)).to.have.length(34);
    expect(await members.signIn(email, 'the right password')).to.not.equal(null);
  });
});
