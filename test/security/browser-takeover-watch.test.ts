import { expect } from 'chai';
import { WebSocket } from 'ws';
import { startBrowserWorld, CHROMIUM, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 23, finding 4 (high): during a takeover the agent's commands were refused but its
 * events kept flowing, and the bindings and scripts it had put in the page kept running: a
 * password typed through the viewer arrived at the agent key by key. The viewer showed no
 * URL, so a page the agent drew could pass for a real sign-in page. Now takeover closes the
 * agent's connections (their sessions, bindings, scripts and subscriptions end), loads every
 * page of the lease afresh, refuses a new connection with its reason until handback, and the
 * viewer shows the page's address outside its pixels.
 */
describe('attack: watching what a person types during a takeover', function () {
  this.timeout(120_000);
  let w: BrowserWorld;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld({ GATEWAY_RUNTIME: 'process' });
  });
  after(async () => {
    await w?.close();
  });

  it('a keylogger binding and an injected script see nothing of the password; a new agent connection is refused with the reason; the viewer shows the address', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    const p = await agent.newPage();
    // The agent's trap, three ways: a binding, a script in the page now, and one for every new document.
    await agent.ok('Runtime.enable', {}, p.sessionId);
    await agent.ok('Runtime.addBinding', { name: 'exfil' }, p.sessionId);
    const trap = 'document.addEventListener("keydown", (e) => { window.__log = (window.__log || "") + e.key; try { exfil(e.key); } catch {} }, true)';
    await agent.ok('Page.enable', {}, p.sessionId);
    await agent.ok('Page.addScriptToEvaluateOnNewDocument', { source: trap }, p.sessionId);
    await agent.navigate(p.sessionId, 'https://app.example.com/form');
    await agent.evaluate(p.sessionId, `${trap}, 1`);
    // The trap works while the agent holds the browser (so the test can fail).
    await agent.ok('Input.dispatchKeyEvent', { type: 'keyDown', key: 'x', text: 'x' }, p.sessionId);
    await agent.event((ev) => ev.method === 'Runtime.bindingCalled' && ev.params.payload === 'x');
    const bindingCalls = (): number => agent.events.filter((ev) => ev.method === 'Runtime.bindingCalled').length;
    // The trap is in the page twice (the evaluated one and the new-document one): both calls
    // arrive before the count is taken (a CI run once took it between the two).
    for (let i = 0; i < 200 && bindingCalls() < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(bindingCalls()).to.equal(2);
    const before = bindingCalls();

    const take = await w.t.api.post(`/v1/browser/leases/${l.id}/takeover`);
    expect(take.status).to.equal(200);
    // The agent's connection is closed at takeover, with the reason.
    const closed = await agent.closed;
    expect(closed.code).to.equal(4409);
    expect(closed.reason).to.match(/taken over by a person/);
    // A new connection is refused the same way until handback.
    const again = await RawCdp.connect(l.cdp_url);
    const refused = await again.closed;
    expect(refused.code).to.equal(4409);

    // The person types a password through the viewer.
    const viewer = new WebSocket(`${take.body.view_url.replace(/^http/, 'ws')}/ws`);
    const shown: any[] = [];
    viewer.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'location') shown.push(m);
      if (m.type === 'frame') viewer.send(JSON.stringify({ type: 'ack' }));
    });
    await new Promise((r, j) => {
      viewer.once('open', r);
      viewer.once('error', j);
    });
    // The address is shown, outside the page.
    for (let i = 0; i < 100 && !shown.length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(shown.at(-1)).to.include({ url: 'https://app.example.com/form', origin: 'https://app.example.com' });
    // A session of the broker's own reads the page. The person types once the page, loaded
    // afresh at takeover, is there and its field has the focus (as a person would, seeing it).
    const found = w.t.svc.browserBroker.browserOf(l.id)!;
    const probe = await found.browser.attach(found.browser.page(l.id)!.targetId);
    const read = async (expr: string): Promise<unknown> => (await probe.send('Runtime.evaluate', { expression: expr, returnByValue: true })).result.value;
    for (let i = 0; i < 400 && (await read('document.readyState === "complete" && document.activeElement && document.activeElement.id')) !== 'pw'; i++) {
      // Click into the field (what a person does when the page is up).
      viewer.send(JSON.stringify({ type: 'mouse', event: 'down', x: 20, y: 15, button: 'left' }));
      viewer.send(JSON.stringify({ type: 'mouse', event: 'up', x: 20, y: 15, button: 'left' }));
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(await read('document.activeElement && document.activeElement.id')).to.equal('pw');
    for (const ch of 'hunter2') {
      viewer.send(JSON.stringify({ type: 'key', event: 'down', key: ch, code: `Key${ch.toUpperCase()}`, text: ch }));
      viewer.send(JSON.stringify({ type: 'key', event: 'up', key: ch, code: `Key${ch.toUpperCase()}` }));
    }
    for (let i = 0; i < 200 && (await read('document.getElementById("pw").value')) !== 'hunter2'; i++) await new Promise((r) => setTimeout(r, 25));
    expect(await read('document.getElementById("pw").value')).to.equal('hunter2');
    // Nothing of the agent's trap survived the takeover: no binding, no listener, no log.
    expect(await read('typeof window.exfil')).to.equal('undefined');
    expect(await read('window.__log === undefined')).to.equal(true);
    await probe.detach();
    expect(bindingCalls()).to.equal(before);
    expect(agent.frames.join('\n')).to.not.include('hunter2');
    viewer.close();

    // Handback: the agent connects again and finds the page, without its trap.
    expect((await w.t.api.post(`/v1/browser/leases/${l.id}/handback`)).status).to.equal(200);
    const back = await RawCdp.connect(l.cdp_url);
    await back.ok('Target.setDiscoverTargets', { discover: true });
    const pages = (await back.ok('Target.getTargets')).targetInfos.filter((t: { type: string }) => t.type === 'page');
    expect(pages).to.have.length(1);
    const { sessionId } = await back.ok('Target.attachToTarget', { targetId: pages[0].targetId, flatten: true });
    expect(await back.evaluate(sessionId, 'typeof window.exfil + " " + typeof window.__log')).to.equal('undefined undefined');
    back.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
  it('attack: a reload the site never answers does not keep the agent\'s document (and its listener) up for the person; the takeover does not wait for it', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    const p = await agent.newPage();
    await agent.navigate(p.sessionId, 'https://app.example.com/stall');
    await agent.evaluate(p.sessionId, 'window.__trap = 1; document.addEventListener("keydown", (e) => { window.__log = (window.__log || "") + e.key; }, true); 1');
    // From now on the site (one the agent may reach, and could run) answers /stall never.
    const normal = w.up.respond;
    const stalled: Array<import('node:http').ServerResponse> = [];
    w.up.respond = (req, res) => ((req.url ?? '').startsWith('/stall') ? void stalled.push(res) : normal(req, res));
    try {
      const found = w.t.svc.browserBroker.browserOf(l.id)!;
      const started = Date.now();
      expect((await w.t.api.post(`/v1/browser/leases/${l.id}/takeover`)).status).to.equal(200);
      expect(Date.now() - started).to.be.below(15_000);
      await agent.closed;
      // What the person is handed: a page with nothing of the agent's document.
      const page = found.browser.page(l.id)!;
      const probe = await found.browser.attach(page.targetId);
      const trap = (await probe.send('Runtime.evaluate', { expression: 'typeof window.__trap', returnByValue: true })).result.value;
      await probe.detach();
      expect(trap).to.equal('undefined');
    } finally {
      w.up.respond = normal;
      for (const res of stalled) res.destroy();
    }
    expect((await w.t.api.post(`/v1/browser/leases/${l.id}/handback`)).status).to.equal(200);
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('attack: a fragment set before the takeover (same-document reload) does not keep the agent\'s listener in the page the person types into', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    const p = await agent.newPage();
    await agent.navigate(p.sessionId, 'https://app.example.com/form');
    // A listener in the page, then `location.hash`: reloading "the current address" would be
    // a same-document navigation that loads nothing.
    await agent.evaluate(p.sessionId, 'window.__trap = 1; document.addEventListener("keydown", (e) => { window.__log = (window.__log || "") + e.key; }, true); location.hash = "x"; 1');
    const found = w.t.svc.browserBroker.browserOf(l.id)!;
    // The trap is there while the agent holds the browser (so the test can fail).
    const before = await found.browser.attach(found.browser.page(l.id)!.targetId);
    expect((await before.send('Runtime.evaluate', { expression: 'window.__trap', returnByValue: true })).result.value).to.equal(1);
    await before.detach();

    expect((await w.t.api.post(`/v1/browser/leases/${l.id}/takeover`)).status).to.equal(200);
    await agent.closed;
    const page = found.browser.page(l.id)!;
    const probe = await found.browser.attach(page.targetId);
    const read = async (expr: string): Promise<unknown> => (await probe.send('Runtime.evaluate', { expression: expr, returnByValue: true })).result.value;
    for (let i = 0; i < 200 && (await read('document.readyState')) !== 'complete'; i++) await new Promise((r) => setTimeout(r, 25));
    expect(await read('typeof window.__trap')).to.equal('undefined');
    expect(await read('location.pathname')).to.equal('/form');
    await probe.detach();
    expect((await w.t.api.post(`/v1/browser/leases/${l.id}/handback`)).status).to.equal(200);
  });
});
