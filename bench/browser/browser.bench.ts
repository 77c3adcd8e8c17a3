/**
 * The browser pool (issue 14, item 6; issue 23, item 1): lease create → active with a warm
 * browser (p50/p99), the first lease of an environment (its browser starts: since issue 23
 * each environment has a sandboxed browser of its own), memory per active lease (PSS of the
 * Chromium process trees, before and after opening leases, divided by their number), memory
 * per environment's browser, viewer frames per second of an animating page with a viewer that
 * acknowledges each frame at once. Printed next to the targets, never asserted.
 *
 *   npx tsx bench/browser/browser.bench.ts          # BENCH_N=30 leases, BENCH_ENVS=5, BENCH_FPS_SECS=3
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { startService } from '../../bin/service.js';
import { startFakeUpstream } from '../../test/helpers/upstream.js';
import { RawCdp } from '../../test/helpers/cdp-client.js';

const N = Number(process.env.BENCH_N ?? 30);
const FPS_SECS = Number(process.env.BENCH_FPS_SECS ?? 3);
const ENVS = Number(process.env.BENCH_ENVS ?? 5);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** PSS (KiB) of every process whose command line runs Chromium. */
function chromiumPssKb(): number {
  let kb = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('chromium')) continue;
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch { /* gone */ }
  }
  return kb;
}

const up = await startFakeUpstream();
up.respond = (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<html><body><div id="d" style="width:400px;height:300px"></div><script>let i=0;(function f(){document.getElementById("d").style.background="hsl("+(i++%360)+",80%,50%)";requestAnimationFrame(f)})()</script></body></html>');
};
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-browser-'));
writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
const key = `sk_${randomBytes(20).toString('hex')}`;
const svc = await startService(loadConfig({
  DATABASE_URL: `sqlite:${join(dir, 'gw.sqlite')}`, DATA_DIR: dir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'process',
  GATEWAY_UPSTREAM_OVERRIDES: `app.example.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'),
  GATEWAY_BOOTSTRAP_API_KEY: key, GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'silent',
  GATEWAY_BROWSER_LEASES_PER_DEVELOPER: String(N + 10), GATEWAY_BROWSER_LEASES_PER_END_USER: String(N + 10),
}), silentLogger);
const api = async (method: string, path: string, body?: unknown): Promise<any> => {
  const r = await fetch(`${svc.apiUrl}${path}`, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  return r.json();
};

const env = await api('POST', '/v1/environments', { end_user_id: 'bench', egress_allow: ['app.example.com'], resources: { cpus: 2, memory_mib: 16384, disk_gib: 1 } });
// Takeover needs the environment on a host (service.md): wait until it runs.
for (let i = 0; i < 500 && (await api('GET', `/v1/environments/${env.id}`)).state !== 'running'; i++) await new Promise((r) => setTimeout(r, 20));
// Warm: the browser starts with the first lease.
const t0 = performance.now();
const first = await api('POST', '/v1/browser/leases', { environment_id: env.id });
const coldFirstMs = performance.now() - t0;
await api('POST', `/v1/browser/leases/${first.id}/release`);
await new Promise((r) => setTimeout(r, 500));
const baseKb = chromiumPssKb();

const lat: number[] = [];
const ids: string[] = [];
for (let i = 0; i < N; i++) {
  const s = performance.now();
  const l = await api('POST', '/v1/browser/leases', { environment_id: env.id });
  lat.push(performance.now() - s);
  if (l.state !== 'active') throw new Error(`lease not active: ${JSON.stringify(l)}`);
  ids.push(l.id);
}
await new Promise((r) => setTimeout(r, 1000));
const perLeaseMiB = (chromiumPssKb() - baseKb) / N / 1024;
// With one page each (what an agent's first newPage() adds: a renderer process), opened over
// each lease's own CDP endpoint, as an agent does.
const agents: RawCdp[] = [];
const firstPages: Array<{ sessionId: string }> = [];
for (const id of ids) {
  const l = await api('GET', `/v1/browser/leases/${id}`);
  const c = await RawCdp.connect(l.cdp_url);
  agents.push(c);
  firstPages.push(await c.newPage());
}
await new Promise((r) => setTimeout(r, 1000));
const perLeasePageMiB = (chromiumPssKb() - baseKb) / N / 1024;

// Environments: each has a browser of its own. The first lease of each starts it (cold), and
// the memory of a browser with one lease and one page is what an environment's browser costs.
const envKbBefore = chromiumPssKb();
const coldMs: number[] = [];
const envLeases: string[] = [];
for (let i = 0; i < ENVS; i++) {
  const e = await api('POST', '/v1/environments', { end_user_id: `bench-env-${i}`, egress_allow: ['app.example.com'], resources: { cpus: 1, memory_mib: 1024, disk_gib: 1 } });
  const s0 = performance.now();
  const l = await api('POST', '/v1/browser/leases', { environment_id: e.id });
  coldMs.push(performance.now() - s0);
  envLeases.push(l.id);
  const c = await RawCdp.connect(l.cdp_url);
  agents.push(c);
  await c.newPage();
}
await new Promise((r) => setTimeout(r, 1000));
const perEnvMiB = (chromiumPssKb() - envKbBefore) / ENVS / 1024;

// Viewer fps: one lease on the animating page, taken over, a viewer that acks at once.
const page = firstPages[0]!;
await agents[0]!.ok('Emulation.setDeviceMetricsOverride', { width: 800, height: 600, deviceScaleFactor: 1, mobile: false }, page.sessionId);
await agents[0]!.navigate(page.sessionId, 'https://app.example.com/anim');
const take = await api('POST', `/v1/browser/leases/${ids[0]}/takeover`);
const ws = new WebSocket(`${take.view_url.replace(/^http/, 'ws')}/ws`);
let frames = 0;
let bytes = 0;
await new Promise<void>((resolve, reject) => {
  ws.on('open', () => resolve());
  ws.on('error', reject);
});
const fpsStart = performance.now();
ws.on('message', (d) => {
  const m = JSON.parse(d.toString());
  if (m.type === 'frame') {
    frames++;
    bytes += m.data.length;
    ws.send(JSON.stringify({ type: 'ack' }));
  }
});
await new Promise((r) => setTimeout(r, FPS_SECS * 1000));
const fps = frames / ((performance.now() - fpsStart) / 1000);
ws.close();

console.log(`\nBrowser pool (Chromium ${svc.browserBroker.up() ? 'up' : 'down'}), ${N} leases, SQLite\n`);
console.log(`  first lease (cold browser start)   ${coldFirstMs.toFixed(0)} ms; first lease of each new environment p50 ${pct(coldMs, 50).toFixed(0)} ms (its browser starts)`);
console.log(`  lease create → active (warm)       p50 ${pct(lat, 50).toFixed(1)} ms   p99 ${pct(lat, 99).toFixed(1)} ms    target p50 < 150 ms`);
console.log(`  memory per active lease (PSS)      ${perLeaseMiB.toFixed(1)} MiB without a page, ${perLeasePageMiB.toFixed(1)} MiB with one about:blank page`);
console.log(`  memory per environment's browser   ${perEnvMiB.toFixed(1)} MiB (its browser, one lease, one page; ${ENVS} environments)`);
console.log(`  viewer                             ${fps.toFixed(1)} frames/s, ${(bytes / Math.max(1, frames) / 1024).toFixed(0)} KiB/frame (base64)    target >= 15 fps\n`);

for (const a of agents) a.close();
for (const id of [...ids, ...envLeases]) await api('POST', `/v1/browser/leases/${id}/handback`).catch(() => {});
for (const id of [...ids, ...envLeases]) await api('POST', `/v1/browser/leases/${id}/release`);
await svc.close();
await up.close();
rmSync(dir, { recursive: true, force: true });
