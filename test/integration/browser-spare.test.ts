import { expect } from 'chai';
import { startBrowserWorld, CHROMIUM, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { pollUntil, skipWithoutRuntime } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 29, item 3: each environment's browser keeps the next lease's context made ahead,
 * with a blank page (a renderer) in it; the lease's first about:blank page is that page.
 * Until then it is the broker's: never shown, never attachable, never counted.
 */
describe('browser leases: the context made ahead and its blank page (issue 29, item 3)', function () {
  this.timeout(120_000);
  let w: BrowserWorld;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld({ GATEWAY_BROWSER_POOL_SIZE: '0' });
  });
  after(async () => {
    await w?.close();
  });

  /** The lease's blank page while the broker holds it (the one page of its context the agent cannot see). */
  const hiddenPage = (leaseId: string): string | undefined => {
    const { browser, contextId } = w.t.svc.browserBroker.browserOf(leaseId)!;
    const shown = new Set(browser.pages(contextId).map((t) => t.targetId));
    // (Chromium's own WebUI pages of a window, chrome://omnibox-popup..., are hidden too, and are not it.)
    return [...browser.targets.values()].find((t) => t.type === 'page' && t.browserContextId === contextId && t.url === 'about:blank' && !shown.has(t.targetId))?.targetId;
  };

  it('is hidden until taken: no target, no discovery event, attachToTarget refused; the first about:blank page is it, announced and attachable', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const blank = await pollUntil(() => hiddenPage(l.id), (id) => id !== undefined, 10_000);
    expect(blank, 'the blank page made ahead').to.be.a('string');
    const agent = await RawCdp.connect(l.cdp_url);
    expect((await agent.ok('Target.getTargets')).targetInfos).to.deep.equal([]);
    await agent.ok('Target.setDiscoverTargets', { discover: true });
    expect(agent.events.filter((ev) => ev.method === 'Target.targetCreated')).to.deep.equal([]);
    expect((await agent.send('Target.attachToTarget', { targetId: blank, flatten: true })).error?.message).to.equal('no such target');
    const { targetId } = await agent.ok('Target.createTarget', { url: 'about:blank' });
    expect(targetId).to.equal(blank);
    await agent.event((ev) => ev.method === 'Target.targetCreated' && ev.params.targetInfo.targetId === blank);
    const { sessionId } = await agent.ok('Target.attachToTarget', { targetId, flatten: true });
    await agent.navigate(sessionId, 'https://app.example.com/after-the-blank-page');
    expect(await agent.evaluate(sessionId, 'document.body.textContent')).to.equal('/after-the-blank-page');
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('two createTargets at once: two pages of the lease, each shown and attachable (the second waits for the blank page to be made)', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    const [a, b] = await Promise.all([agent.ok('Target.createTarget', { url: 'about:blank' }), agent.ok('Target.createTarget', { url: 'about:blank' })]);
    expect(a.targetId).to.not.equal(b.targetId);
    const shown = (await agent.ok('Target.getTargets')).targetInfos.map((t: { targetId: string }) => t.targetId);
    expect(shown).to.have.members([a.targetId, b.targetId]);
    for (const t of [a, b]) expect((await agent.send('Target.attachToTarget', { targetId: t.targetId, flatten: true })).error).to.equal(undefined);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('a first page asked at a URL: the blank page is closed (no renderer left hidden), the agent\'s page is made', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const blank = await pollUntil(() => hiddenPage(l.id), (id) => id !== undefined, 10_000);
    const agent = await RawCdp.connect(l.cdp_url);
    const { targetId } = await agent.ok('Target.createTarget', { url: 'https://app.example.com/at-once' });
    expect(targetId).to.not.equal(blank);
    const left = await pollUntil(() => hiddenPage(l.id), (id) => id === undefined, 10_000);
    expect(left, 'the blank page').to.equal(undefined);
    const { browser, contextId } = w.t.svc.browserBroker.browserOf(l.id)!;
    expect(browser.pages(contextId).map((t) => t.targetId)).to.deep.equal([targetId]);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});
