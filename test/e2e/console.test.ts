import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { ProxyAgent, request } from 'undici';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = resolve(import.meta.dirname, '..', '..', 'test-artifacts');

/**
 * The console in a real browser (issue 15, item 5): a team member signs in, sees a held
 * gateway request appear without reloading, approves it with `task` scope, and the agent's
 * request completes; screenshots of each page are saved as test artifacts.
 */
describe('console in Chromium: a held request approved by a team member', function () {
  this.timeout(120_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let browser: Browser;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-console-'));
    writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
    t = await startTestService({ GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port},gmail.googleapis.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem') });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sign in → the held payment appears live → approve for this task → the agent\'s request completes', async () => {
    const env = (await t.api.post('/v1/environments', {
      end_user_id: 'console-e2e', egress_allow: ['api.stripe.com', 'gmail.googleapis.com'],
      secrets: {
        STRIPE_KEY: { value: 'sk_live_real_value_never_shown', allowed_hosts: ['api.stripe.com'] },
        GMAIL_TOKEN: { value: 'ya29.real_gmail_token_never_shown', allowed_hosts: ['gmail.googleapis.com'] },
      },
    })).body;
    const gw = (await t.api.get(`/v1/environments/${env.id}/gateway`)).body;
    const secrets = (await t.api.get(`/v1/environments/${env.id}/secrets`)).body.data;
    const placeholder = secrets.find((x: any) => x.name === 'STRIPE_KEY').placeholder;
    const gmailPlaceholder = secrets.find((x: any) => x.name === 'GMAIL_TOKEN').placeholder;
    await t.api.post('/v1/team-members', { email: 'ops@example.com', name: 'Ops Reviewer', password: 'a long enough password' });

    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await page.goto(`${t.url}/console`);
    expect(new URL(page.url()).pathname).to.equal('/console/login');
    await page.screenshot({ path: join(ARTIFACTS, 'console-login.png') });
    await page.fill('#email', 'ops@example.com');
    await page.fill('#password', 'a long enough password');
    await Promise.all([page.waitForURL(/\/console\/approvals$/), page.click('button[type=submit]')]);
    await page.waitForSelector('#none');
    await page.screenshot({ path: join(ARTIFACTS, 'console-approvals-empty.png') });

    // The agent's payment is held; the page shows it without a reload by hand (server-sent events).
    const u = new URL(gw.proxy_url);
    const dispatcher = new ProxyAgent({ uri: `${u.protocol}//${u.host}`, token: `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`, requestTls: { ca: gw.ca_cert_pem } });
    const held = request('https://api.stripe.com/v1/charges', {
      dispatcher, method: 'POST', body: 'amount=2000&currency=usd',
      headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded', 'x-service-task-id': 'task-42' },
    });
    await page.waitForSelector('[data-approval]', { timeout: 20_000 });
    expect(await page.textContent('[data-approval] .summary')).to.equal('POST api.stripe.com /v1/charges');
    expect(await page.textContent('[data-approval] dl.details')).to.include('20.00 USD');
    // A second one: the agent sends a mail; its card shows the decoded recipients and subject.
    const raw = Buffer.from('To: Finance Team <finance@example.com>\r\nCc: cfo@example.com\r\nSubject: =?UTF-8?Q?Q4_payroll_=E2=80=94_please_approve?=\r\n\r\nAttached.').toString('base64url');
    const mail = request('https://gmail.googleapis.com/gmail/v1/users/me/messages/send', {
      dispatcher, method: 'POST', body: JSON.stringify({ raw }), headers: { authorization: `Bearer ${gmailPlaceholder}`, 'content-type': 'application/json', 'x-service-task-id': 'task-42' },
    });
    await page.waitForFunction(() => document.querySelectorAll('[data-approval]').length === 2, undefined, { timeout: 20_000 });
    const mailCard = page.locator('[data-approval]', { hasText: 'gmail.googleapis.com' });
    expect(await mailCard.locator('dl.details').textContent()).to.include('finance@example.com').and.include('Q4 payroll — please approve');
    await page.screenshot({ path: join(ARTIFACTS, 'console-approvals-pending.png'), fullPage: true });
    expect(up.seen).to.have.length(0);

    await Promise.all([page.waitForURL(/\/console\/approvals$/), mailCard.locator('button.deny').click()]);
    const denied = await mail;
    expect(denied.statusCode).to.equal(403);
    await denied.body.text();
    const payCard = page.locator('[data-approval]', { hasText: 'api.stripe.com' });
    await payCard.locator('select[name=scope]').selectOption('task');
    await Promise.all([page.waitForURL(/\/console\/approvals$/), payCard.locator('button.approve').click()]);
    const r = await held;
    expect(r.statusCode).to.equal(200);
    await r.body.text();
    expect(up.seen[0]!.headers.authorization).to.equal('Bearer sk_live_real_value_never_shown');
    const approvals = (await t.api.get('/v1/approvals?status=approved')).body.data;
    expect(approvals[0]).to.include({ decided_via: 'console', scope: 'task', task_id: 'task-42' });

    await page.goto(`${t.url}/console/grants`);
    expect(await page.textContent('table')).to.include('task-42');
    await page.screenshot({ path: join(ARTIFACTS, 'console-grants.png') });
    await page.goto(`${t.url}/console/audit`);
    expect(await page.textContent('#verify')).to.match(/intact/);
    expect(await page.textContent('table')).to.include('/v1/charges');
    await page.screenshot({ path: join(ARTIFACTS, 'console-audit.png') });
    await dispatcher.close();
  });
});
