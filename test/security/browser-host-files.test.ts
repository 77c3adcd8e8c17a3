import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBrowserWorld, CHROMIUM, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * Issue 23, finding 1 (critical): `DOM.setFileInputFiles` with a host path and a FileReader
 * in the page, or `Page.navigate file:///…`, read DATA_DIR/master.key, /etc/shadow and the
 * store. Now: the relay refuses host paths and browser-internal URLs (first wall), Chromium's
 * URLBlocklist refuses file: and chrome: whoever asks (second wall), and the browser's
 * namespace holds none of the host's files anyway (third wall). Each wall has its own
 * assertion, so switching one off turns its assertion red.
 */
describe('attack: host files through the browser (file inputs, file:// pages)', function () {
  this.timeout(180_000);
  let w: BrowserWorld;
  let canaryDir: string;
  const CANARY = 'CANARY-host-file-5b0c1e';

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld({ GATEWAY_RUNTIME: 'process' });
    // A secret file in DATA_DIR (where the master key lives) and one elsewhere on the host.
    writeFileSync(join(w.t.svc.dataDir, 'canary.key'), CANARY);
    canaryDir = mkdtempSync(join(tmpdir(), 'gw-canary-'));
    writeFileSync(join(canaryDir, 'canary.txt'), CANARY);
  });
  after(async () => {
    await w?.close();
    if (canaryDir) rmSync(canaryDir, { recursive: true, force: true });
  });

  const leaked = (agent: RawCdp): boolean => agent.frames.some((f) => f.includes(CANARY));

  /** The agent's connection, on the upload page (a file input `#f` whose file the page reads back). */
  async function uploadPage(cdpUrl: string): Promise<{ agent: RawCdp; p: { targetId: string; sessionId: string }; nodeId: number }> {
    const agent = await RawCdp.connect(cdpUrl);
    const p = await agent.newPage();
    await agent.navigate(p.sessionId, 'https://app.example.com/upload');
    await agent.ok('DOM.enable', {}, p.sessionId);
    const doc = await agent.ok('DOM.getDocument', {}, p.sessionId);
    const { nodeId } = await agent.ok('DOM.querySelector', { nodeId: doc.root.nodeId, selector: '#f' }, p.sessionId);
    return { agent, p, nodeId };
  }

  it('DOM.setFileInputFiles with a host path is refused, and the page reads nothing', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const { agent, p, nodeId } = await uploadPage(l.cdp_url);
    for (const path of [join(w.t.svc.dataDir, 'canary.key'), join(canaryDir, 'canary.txt'), join(w.t.svc.dataDir, 'master.key'), '/etc/shadow', '/proc/self/environ', '/home/agent/../../etc/shadow']) {
      const r = await agent.send('DOM.setFileInputFiles', { files: [path], nodeId }, p.sessionId);
      expect(r.error?.message, `setFileInputFiles ${path}`).to.match(/environment's disk|never a host path|\.\./);
    }
    expect(await agent.evaluate(p.sessionId, 'window.read()')).to.equal(null);
    expect(leaked(agent)).to.equal(false);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('a file of the environment\'s own disk is copied in by the broker and the page reads it (the way uploads work)', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    await w.t.api.put(`/v1/environments/${e.id}/files`, { path: 'report.csv', content: 'a,b\n1,2\n' });
    const l = await w.lease(e.id);
    const { agent, p, nodeId } = await uploadPage(l.cdp_url);
    await agent.ok('DOM.setFileInputFiles', { files: ['/home/agent/report.csv'], nodeId }, p.sessionId);
    expect(await agent.evaluate(p.sessionId, 'window.read()')).to.equal('a,b\n1,2\n');
    // Not a file of the disk: refused, with its reason.
    const missing = await agent.send('DOM.setFileInputFiles', { files: ['/home/agent/nope.txt'], nodeId }, p.sessionId);
    expect(missing.error?.message).to.include('/home/agent/nope.txt');
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('attack: file inputs set again and again stage at most 128 MiB per lease on the host; past it refused, with the reason', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    expect((await sh(w.t.api, e.id, 'head -c 16777216 /dev/zero > big.bin && echo ok')).stdout).to.equal('ok\n');
    const l = await w.lease(e.id);
    const { agent, p, nodeId } = await uploadPage(l.cdp_url);
    const found = w.t.svc.browserBroker.browserOf(l.id)!;
    const uploads = join(found.browser.sandbox.stagingDir, 'uploads', l.id);
    const stagedBytes = (): number => {
      let n = 0;
      const walk = (d: string): void => {
        for (const x of readdirSync(d, { withFileTypes: true })) x.isDirectory() ? walk(join(d, x.name)) : (n += statSync(join(d, x.name)).size);
      };
      if (existsSync(uploads)) walk(uploads);
      return n;
    };
    // 8 × 16 MiB fits (128 MiB); one more file is refused whole, nothing more staged.
    await agent.ok('DOM.setFileInputFiles', { files: Array.from({ length: 8 }, () => '/home/agent/big.bin'), nodeId }, p.sessionId);
    const more = await agent.send('DOM.setFileInputFiles', { files: ['/home/agent/big.bin'], nodeId }, p.sessionId);
    expect(more.error?.message).to.match(/at most 128 MiB/);
    expect(stagedBytes()).to.equal(128 * 1024 * 1024);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
    // Released: the copies are gone from the host.
    for (let i = 0; i < 100 && existsSync(uploads); i++) await new Promise((res) => setTimeout(res, 50));
    expect(existsSync(uploads)).to.equal(false);
  });

  it('file:// and browser-internal pages: refused by the relay (navigate, createTarget) and blocked by Chromium\'s policy (page script, window.open, a link)', async () => {
    const e = await w.env();
    const l = await w.lease(e.id);
    const agent = await RawCdp.connect(l.cdp_url);
    const p = await agent.newPage();
    await agent.navigate(p.sessionId, 'https://app.example.com/start');
    const targets = [`file://${join(canaryDir, 'canary.txt')}`, `file://${join(w.t.svc.dataDir, 'canary.key')}`, 'file:///usr/', 'chrome://version', 'view-source:https://app.example.com/start', 'devtools://devtools/bundled/inspector.html'];
    for (const url of targets) {
      const nav = await agent.send('Page.navigate', { url }, p.sessionId);
      expect(nav.error?.message, `Page.navigate ${url}`).to.match(/URL scheme is not available/);
      const created = await agent.send('Target.createTarget', { url });
      expect(created.error?.message, `Target.createTarget ${url}`).to.match(/URL scheme is not available/);
    }
    // The page itself goes there (no CDP command names the URL): Chromium's URLBlocklist.
    for (const how of ['location.href = u', 'window.open(u)', 'Object.assign(document.createElement("a"), { href: u }).click()']) {
      const tab = await agent.newPage();
      await agent.navigate(tab.sessionId, 'https://app.example.com/start');
      await agent.ok('Page.enable', {}, tab.sessionId);
      await agent.evaluate(tab.sessionId, `(() => { const u = 'file:///usr/'; ${how}; return 1; })()`);
      // Wait for the attempt to settle: the frame navigates (to the block page) or the popup opens.
      await agent.event((ev) => (ev.method === 'Page.frameNavigated' && ev.sessionId === tab.sessionId && ev.params.frame.url !== 'https://app.example.com/start') || ev.method === 'Page.windowOpen' || (ev.method === 'Page.frameStartedLoading' && ev.sessionId === tab.sessionId), 10_000).catch(() => null);
      const text = await agent.evaluate(tab.sessionId, 'document.location.href + " " + (document.body ? document.body.innerText : "")');
      expect(text, how).to.not.match(/Index of \/usr|share\/|lib\//);
    }
    // Every page of the lease, listed by the broker: none shows a file: address.
    const found = w.t.svc.browserBroker.browserOf(l.id)!;
    for (const t of found.browser.pages(found.contextId)) {
      const s = await found.browser.attach(t.targetId);
      const r = await s.send('Runtime.evaluate', { expression: 'location.href + " " + (document.body ? document.body.innerText : "")', returnByValue: true });
      await s.detach();
      expect(r.result.value).to.not.match(/^file:|Index of \/usr/);
    }
    expect(leaked(agent)).to.equal(false);
    agent.close();
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('from inside the environment (vm_cdp_url, a client of the agent\'s own): a host path in a file input is refused', async () => {
    const e = await w.env();
    await waitState(w.t.api, e.id, 'running');
    const l = await w.lease(e.id);
    // The agent's own minimal CDP client in the VM's python: a script of commands.
    await w.t.api.put(`/v1/environments/${e.id}/files`, { path: 'cdp.py', content: PY_CDP });
    const script = JSON.stringify([
      { method: 'Target.createTarget', params: { url: 'https://app.example.com/upload' }, save: 'target' },
      { method: 'Target.attachToTarget', params: { targetId: '$target.targetId', flatten: true }, save: 'att' },
      // The page may still be committing its navigation (a document replaced under the first
      // evaluate): asked again until it answers, then the input as an object, not a node id.
      { method: 'Runtime.evaluate', params: { expression: 'new Promise(r => { const t = () => document.getElementById("f") ? r(1) : setTimeout(t, 20); t(); })', awaitPromise: true }, session: '$att.sessionId', retry: true },
      { method: 'Runtime.evaluate', params: { expression: 'document.getElementById("f")' }, session: '$att.sessionId', save: 'input', retry: true },
      { method: 'DOM.setFileInputFiles', params: { files: [join(w.t.svc.dataDir, 'canary.key')], objectId: '$input.result.objectId' }, session: '$att.sessionId' },
      { method: 'Runtime.evaluate', params: { expression: 'window.read()', awaitPromise: true, returnByValue: true }, session: '$att.sessionId' },
    ]);
    await w.t.api.put(`/v1/environments/${e.id}/files`, { path: 'steps.json', content: script });
    const r = await sh(w.t.api, e.id, `python3 cdp.py '${l.vm_cdp_url}' steps.json`);
    const answers = r.stdout.trim().split('\n').map((x) => JSON.parse(x));
    expect(answers, r.stderr).to.have.length(6);
    expect(answers[4].error.message).to.match(/never a host path/);
    expect(answers[5].result.result.value).to.equal(null);
    expect(r.stdout).to.not.include(CANARY);
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});

/** A CDP client an agent could write in its VM: one WebSocket, a JSON script of commands, `$name.path` substitutions. */
export const PY_CDP = String.raw`import base64, json, os, socket, struct, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port), timeout=30)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(('GET %s?%s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n' % (u.path, u.query, key)).encode())
head = b''
while b'\r\n\r\n' not in head:
    c = s.recv(1)
    if not c: sys.exit('no upgrade')
    head += c
if b' 101 ' not in head.split(b'\r\n')[0]: sys.exit(head.split(b'\r\n')[0].decode())
def read(n):
    b = b''
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise SystemExit('closed')
        b += c
    return b
def frame():
    h = read(2); n = h[1] & 0x7f
    if n == 126: n = struct.unpack('>H', read(2))[0]
    elif n == 127: n = struct.unpack('>Q', read(8))[0]
    return h[0] & 0x0f, read(n)
def send(obj):
    msg = json.dumps(obj).encode(); mask = os.urandom(4); n = len(msg)
    hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack('>H', n) if n < 65536 else bytes([0x80 | 127]) + struct.pack('>Q', n))
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
saved = {}
def sub(v):
    if isinstance(v, str) and v.startswith('$'):
        name, *path = v[1:].split('.')
        x = saved[name]
        for p in path: x = x[p]
        return x
    if isinstance(v, dict): return {k: sub(x) for k, x in v.items()}
    if isinstance(v, list): return [sub(x) for x in v]
    return v
for i, step in enumerate(json.load(open(sys.argv[2]))):
    msg = {'id': i + 1, 'method': step['method'], 'params': sub(step.get('params', {}))}
    if 'session' in step: msg['sessionId'] = sub(step['session'])
    tries = 100 if step.get('retry') else 1
    for attempt in range(tries):
        send(msg)
        while True:
            op, data = frame()
            if op == 8: raise SystemExit('closed')
            if op != 1: continue
            m = json.loads(data)
            if m.get('id') == i + 1: break
        if 'error' not in m and 'exceptionDetails' not in m.get('result', {}): break
        if attempt < tries - 1: time.sleep(0.05)
    print(json.dumps(m)); sys.stdout.flush()
    if 'save' in step: saved[step['save']] = m.get('result', {})
`;
