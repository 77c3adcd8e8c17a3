import { expect } from 'chai';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBrowserWorld, CHROMIUM, hasFiles, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { skipWithoutRuntime } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 23, finding 2 (critical): `Browser.setDownloadBehavior` passed with the agent's
 * `downloadPath` (only the context was pinned), and a blob `<a download>` landed, root-owned,
 * in any host directory (a 0700 root-only one; the same reaches /etc/cron.d). Now the agent's
 * download settings are answered and never applied, downloads are refused in the lease's
 * context and by Chromium's policy, and the browser's namespace has no host directory to
 * write to anyway.
 */
describe('attack: a download into a host directory', function () {
  this.timeout(120_000);
  let w: BrowserWorld;
  let target: string;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld();
    target = mkdtempSync(join(tmpdir(), 'gw-root-only-'));
    chmodSync(target, 0o700);
  });
  after(async () => {
    await w?.close();
    if (target) rmSync(target, { recursive: true, force: true });
  });

  it('setDownloadBehavior naming a host directory (browser level and session level), then a blob download: nothing lands anywhere', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    // Answered (Playwright sends it when it connects), never applied.
    expect((await agent.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: target, eventsEnabled: true })).error).to.equal(undefined);
    const p = await agent.newPage();
    for (const m of ['Page.setDownloadBehavior', 'Browser.setDownloadBehavior']) {
      const r = await agent.send(m, { behavior: 'allow', downloadPath: target }, p.sessionId);
      expect(r.error?.message, `${m} on a session`).to.match(/not available/);
    }
    await agent.navigate(p.sessionId, 'https://app.example.com/download');
    // The download is refused where it starts: Chromium says so (downloadWillBegin, then canceled),
    // or never begins it at all (the policy). Either way, wait until the page has clicked and a
    // round trip through the renderer has passed.
    await agent.evaluate(p.sessionId, 'document.getElementById("d").click(), 1');
    await agent.evaluate(p.sessionId, 'new Promise((r) => setTimeout(r, 300)).then(() => 1)');
    const progress = agent.events.filter((x) => x.method === 'Browser.downloadProgress' || x.method === 'Page.downloadProgress');
    expect(progress.filter((x) => x.params.state === 'completed'), 'a completed download').to.deep.equal([]);
    expect(hasFiles(target), `files in ${target}: ${existsSync(target) ? readdirSync(target).join(', ') : ''}`).to.equal(false);
    // The browser's own filesystem holds no download either (nothing to hand anyone).
    const pid = w.browserPid(l.id);
    const home = `/proc/${pid}/root/home/browser`;
    const walk = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((x) => (x.isDirectory() ? walk(join(d, x.name)) : [x.name])) : []);
    expect(walk(home).filter((f) => f.startsWith('cron-job'))).to.deep.equal([]);
    expect(walk(`/proc/${pid}/root/tmp`).filter((f) => f.startsWith('cron-job'))).to.deep.equal([]);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});
