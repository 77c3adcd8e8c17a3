import { expect } from 'chai';
import { startBrowserWorld, CHROMIUM, SESSION_SECRET, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { skipWithoutRuntime } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 23, item 4: a signed-in profile's HttpOnly cookies are credentials, like the secrets
 * the gateway swaps. The agent drives the signed-in browser without ever holding its session:
 * cookie reads answer without HttpOnly values, and Cookie, Set-Cookie and Authorization
 * values are replaced in every event and answer it gets. Checked on every frame the agent's
 * connection received, not only on the calls made.
 */
describe('attack: reading the profile\'s session cookie through CDP', function () {
  this.timeout(120_000);
  let w: BrowserWorld;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld();
  });
  after(async () => {
    await w?.close();
  });

  it('a signed-in profile: cookie reads, network events, interception and Playwright\'s own storageState never carry the HttpOnly value', async () => {
    const e = await w.env('cookie-victim');
    const profile = (await w.t.api.post('/v1/browser/profiles', { end_user_id: 'cookie-victim', name: 'work' })).body;
    // The person signs in once (a write lease, saved): the profile holds the HttpOnly cookie.
    const first = await w.lease(e.id, { profile_id: profile.id });
    const signer = await RawCdp.connect(first.cdp_url);
    const sp = await signer.newPage();
    await signer.navigate(sp.sessionId, 'https://app.example.com/login');
    signer.close();
    await w.t.api.post(`/v1/browser/leases/${first.id}/release`);
    for (let i = 0; i < 200 && (await w.t.api.get(`/v1/browser/profiles/${profile.id}`)).body.version !== 1; i++) await new Promise((r) => setTimeout(r, 25));
    expect((await w.t.api.get(`/v1/browser/profiles/${profile.id}`)).body.version).to.equal(1);

    // The agent, on a read lease of the signed-in profile, tries everything.
    const l = await w.lease(e.id, { profile_id: profile.id, mode: 'read' });
    const agent = await RawCdp.connect(l.cdp_url);
    const p = await agent.newPage();
    await agent.ok('Network.enable', {}, p.sessionId);
    await agent.ok('Audits.enable', {}, p.sessionId);
    await agent.ok('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Response' }] }, p.sessionId);
    const paused = new Set<string>();
    const continueAll = setInterval(() => {
      for (const ev of agent.events) {
        if (ev.method === 'Fetch.requestPaused' && !paused.has(ev.params.requestId)) {
          paused.add(ev.params.requestId);
          void agent.send('Fetch.continueRequest', { requestId: ev.params.requestId }, p.sessionId);
        }
      }
    }, 10);
    await agent.navigate(p.sessionId, 'https://app.example.com/whoami');
    clearInterval(continueAll);
    // The session is there: the site got the cookie (the browser sends it; the agent cannot read it).
    const seen = w.up.seen.filter((r) => r.url === '/whoami').map((r) => String(r.headers.cookie ?? ''));
    expect(seen.join(' ')).to.include(SESSION_SECRET);

    const reads = [
      await agent.ok('Network.getCookies', {}, p.sessionId),
      await agent.ok('Network.getCookies', { urls: ['https://app.example.com/'] }, p.sessionId),
      await agent.ok('Network.getAllCookies', {}, p.sessionId),
      await agent.ok('Storage.getCookies', {}, p.sessionId),
      await agent.ok('Storage.getCookies', {}),
    ];
    for (const r of reads) {
      const sid = r.cookies.find((c: { name: string }) => c.name === 'sid');
      expect(sid, JSON.stringify(r)).to.include({ httpOnly: true, value: '' });
    }
    expect(await agent.evaluate(p.sessionId, 'document.cookie')).to.not.include(SESSION_SECRET);
    const body = await agent.evaluate(p.sessionId, 'document.body.innerText');
    expect(body).to.be.a('string');
    // Events the browser sent while it loaded the signed-in page went through the filter.
    const names = new Set(agent.events.map((ev) => ev.method));
    expect(names.has('Network.requestWillBeSentExtraInfo') || names.has('Network.requestWillBeSent'), [...names].join(' ')).to.equal(true);
    for (const f of agent.frames) expect(f, 'a frame the agent received').to.not.include(SESSION_SECRET);

    // Playwright, connected as the agent, gets the same.
    const { chromium } = await import('playwright-core');
    const pw = await chromium.connectOverCDP(l.cdp_url);
    const state = await pw.contexts()[0]!.storageState();
    expect(JSON.stringify(state)).to.not.include(SESSION_SECRET);
    expect(JSON.stringify(await pw.contexts()[0]!.cookies())).to.not.include(SESSION_SECRET);
    await pw.close();
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});
