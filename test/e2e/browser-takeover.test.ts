import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Screenshots a reviewer can look at (test artifacts). */
const ARTIFACTS = resolve(import.meta.dirname, '..', '..', 'test-artifacts');

/**
 * Human takeover in real browsers (issue 14, items 4 and 5): the agent drives its lease over
 * CDP; a person opens the one-time viewer in a second headless Chromium, sees a frame of the
 * leased page, clicks its button through the viewer (the leased page sees the click) while
 * every agent command is refused, and hands back; the agent's connection works again.
 */
describe('browser takeover: the viewer in a second Chromium', function () {
  this.timeout(120_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let person: Browser;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    // Takeover needs the environment placed on a host that is up (service.md): a real one.
    skipWithoutRuntime(this);
    up = await startFakeUpstream();
    up.respond = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body style="margin:0"><button id="b" style="position:absolute;left:100px;top:80px;width:200px;height:80px;font-size:24px" onclick="document.title=\'clicked by a person\'">Approve</button></body></html>');
    };
    dir = mkdtempSync(join(tmpdir(), 'gw-takeover-'));
    writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
    t = await startTestService({ GATEWAY_RUNTIME: 'process', GATEWAY_UPSTREAM_OVERRIDES: `app.example.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'), CHROMIUM_PATH: CHROMIUM });
    person = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  after(async () => {
    await person?.close();
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('takeover → viewer frames → a click through the viewer → hand back; the agent is refused meanwhile and works after', async () => {
    const unplaced = (await t.api.post('/v1/environments', { end_user_id: 'takeover-unplaced', resources: { cpus: 1, memory_mib: 512 } })).body;
    const env = await waitState(t.api, (await t.api.post('/v1/environments', { end_user_id: 'takeover-user', egress_allow: ['app.example.com'], resources: { cpus: 1, memory_mib: 512 } })).body.id, 'running');
    await waitState(t.api, unplaced.id, 'running');
    // An environment not on a host (or on an offline one): 503 host_unavailable.
    const l0 = (await t.api.post('/v1/browser/leases', { environment_id: unplaced.id })).body;
    await t.svc.db('environments').where({ id: unplaced.id }).update({ host_id: null });
    const no = await t.api.post(`/v1/browser/leases/${l0.id}/takeover`);
    expect(no.status).to.equal(503);
    expect(no.body.error).to.equal('host_unavailable');
    await t.api.post(`/v1/browser/leases/${l0.id}/release`);
    const lease = (await t.api.post('/v1/browser/leases', { environment_id: env.id })).body;
    const agent = await chromium.connectOverCDP(lease.cdp_url);
    const agentPage = await agent.contexts()[0]!.newPage();
    await agentPage.setViewportSize({ width: 800, height: 600 });
    await agentPage.goto('https://app.example.com/approve');
    expect(await agentPage.title()).to.equal('');

    const take = await t.api.post(`/v1/browser/leases/${lease.id}/takeover`);
    expect(take.status).to.equal(200);
    expect(take.body.view_url).to.match(/\/v1\/browser\/view\/[A-Za-z0-9_-]+$/);
    expect((await t.api.get(`/v1/browser/leases/${lease.id}`)).body.taken_over).to.equal(true);
    // The agent is refused while a person holds the browser.
    let refused = '';
    await agentPage.evaluate(() => 1).catch((e: Error) => {
      refused = e.message;
    });
    expect(refused, 'the agent\'s command while taken over').to.not.equal('');

    // Opening the page does not consume the token: fetch it first, then open it for real.
    const head = await fetch(take.body.view_url);
    expect(head.status).to.equal(200);
    expect(head.headers.get('cache-control')).to.equal('no-store');
    expect(head.headers.get('referrer-policy')).to.equal('no-referrer');
    expect(head.headers.get('content-security-policy')).to.match(/default-src 'none'/);
    const viewer = await person.newPage({ viewport: { width: 1000, height: 800 } });
    await viewer.goto(take.body.view_url);
    await viewer.waitForFunction(() => (document.getElementById('screen') as HTMLImageElement).src.startsWith('data:image/jpeg'), null, { timeout: 20_000 });
    await viewer.screenshot({ path: join(ARTIFACTS, 'takeover-viewer.png') });
    // The token is used now: a reload finds a 404 page.
    const used = await fetch(take.body.view_url);
    expect(used.status).to.equal(404);
    expect(used.headers.get('content-type')).to.match(/^text\/html/);

    // Click the leased page's button through the viewer, at its place in the frame.
    const box = (await viewer.locator('#screen').boundingBox())!;
    const frame = await viewer.evaluate(() => {
      const img = document.getElementById('screen') as HTMLImageElement;
      return { w: img.naturalWidth, h: img.naturalHeight };
    });
    // The button's centre in page CSS pixels is (200, 120). The agent's 800x600 viewport ended
    // with its session at takeover: the frame's own size maps the click.
    await viewer.mouse.click(box.x + (200 / frame.w) * box.width, box.y + (120 / frame.h) * box.height);
    // The leased page's title, read by a session of the broker's own.
    const found = t.svc.browserBroker.browserOf(lease.id)!;
    const probe = await found.browser.attach(found.browser.page(lease.id)!.targetId);
    const title = async (): Promise<string> => (await probe.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true })).result.value;
    for (let i = 0; i < 200 && (await title()) !== 'clicked by a person'; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await title()).to.equal('clicked by a person');
    await probe.detach();
    expect(frame.w).to.be.greaterThan(0);
    // The viewer shows the page's address above it, outside the page's pixels.
    expect(await viewer.textContent('#where')).to.include('https://app.example.com');

    // Hand back from the viewer's button.
    await viewer.click('#done');
    for (let i = 0; i < 100 && (await t.api.get(`/v1/browser/leases/${lease.id}`)).body.taken_over; i++) await new Promise((r) => setTimeout(r, 50));
    expect((await t.api.get(`/v1/browser/leases/${lease.id}`)).body.taken_over).to.equal(false);
    // The agent's connection was closed at takeover; after handback it connects again.
    const back = await chromium.connectOverCDP(lease.cdp_url);
    const pages = back.contexts()[0]!.pages();
    expect(pages).to.have.length(1);
    expect(await pages[0]!.title()).to.equal('clicked by a person');
    await back.close();

    // A new takeover makes a new URL; a handback through the API invalidates it unused.
    const again = (await t.api.post(`/v1/browser/leases/${lease.id}/takeover`)).body;
    expect(again.view_url).to.not.equal(take.body.view_url);
    expect((await t.api.post(`/v1/browser/leases/${lease.id}/handback`)).body.taken_over).to.equal(false);
    const dead = await fetch(again.view_url);
    expect(dead.status).to.equal(404);
    const nb = await t.api.post(`/v1/browser/leases/${lease.id}/handback`);
    expect(nb.status).to.equal(409);
    expect(nb.body.error).to.equal('not_taken_over');
    expect((await fetch(`${t.url}/v1/browser/view/not-a-valid-token-at-all-xx`)).status).to.equal(404);
    // A viewer URL is valid 10 minutes.
    const late = (await t.api.post(`/v1/browser/leases/${lease.id}/takeover`)).body;
    expect((await fetch(late.view_url)).status).to.equal(200);
    await t.advance(601);
    expect((await fetch(late.view_url)).status).to.equal(404);
    await t.api.post(`/v1/browser/leases/${lease.id}/handback`);
    await agent.close();
    await t.api.post(`/v1/browser/leases/${lease.id}/release`);
  });
});
