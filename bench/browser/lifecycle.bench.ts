/**
 * The browser session lifecycle as BrowserArena measures it (issue 29, items 1 and 3):
 * create a lease, connect to its CDP endpoint, open a new page, load a page through the
 * gateway, release; each stage's p50 and the whole, through the HTTP API of a `gateway start`
 * child (temp DATA_DIR, SQLite, GATEWAY_RUNTIME=process, as root) and the lease's `cdp_url`,
 * with the per-environment sandboxed browser (issue 23). Printed beside the published
 * anchors, never asserted (docs/performance.md, "Issue 29: what users feel").
 *
 *   npx tsx bench/browser/lifecycle.bench.ts                          # BENCH_COLD=15, BENCH_WARM=40
 *   BENCH_COLD=3 BENCH_WARM=5 npx tsx bench/browser/lifecycle.bench.ts
 *   BENCH_TRACE=1 npx tsx bench/browser/lifecycle.bench.ts            # + the first lease's breakdown
 *   BENCH_PACED=0 ...                                                  # no later leases paced 1 s apart (default 20)
 *   BENCH_POOL=0 ...                                                   # GATEWAY_BROWSER_POOL_SIZE (default: the service's)
 *
 * Two cases: the **first lease of an environment** (each run a fresh, running environment:
 * its browser starts inside the lease's create) and **a later lease of the same environment**
 * (its browser warm, every run on one environment). The page is a small HTML document from an
 * HTTPS upstream the gateway reaches through GATEWAY_UPSTREAM_OVERRIDES (as an operator
 * pointing at a staging host would): Chromium → its relay → the gateway proxy as the
 * environment (egress allow-list, TLS interception, audit) → the upstream. "connect" is the
 * agent's WebSocket to cdp_url opening; "new page" is Target.createTarget + attachToTarget
 * (flat), what a CDP client's newPage() sends; "load" is Page.navigate until loadEventFired;
 * "release" is closing the socket and POST .../release answering.
 *
 * Memory of an idle sandboxed browser: PSS and USS of every process of the browser's host
 * uid, read 1.5 s after the environment's first lease was released (the browser running,
 * its spare context and blank page ready, no lease); and of each idle pool slot (its uid in
 * the slot range) at the end, the pool refilled: what the pool costs.
 *
 * CPU of the browser per later lease: its cgroup's usage (every process, exited renderers
 * included) and its browser process's, before and after each series, divided by the leases.
 * Back to back, this is what bounds a lease on 2 cores (docs/performance.md).
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeUpstream } from '../../test/helpers/upstream.js';
import { RawCdp } from '../../test/helpers/cdp-client.js';
import { SLOT_UID_BASE, SLOT_UID_RANGE } from '../../browser/browser-pool.js';
import { loadavg, ms, pct, pssOfUid, readTrace, startGateway, wall } from '../child-gateway.js';

const COLD = Number(process.env.BENCH_COLD ?? 15);
const WARM = Number(process.env.BENCH_WARM ?? 40);
/** Later leases one second after the previous release (an agent that does anything between two leases): the browser has had idle time. */
const PACED = Number(process.env.BENCH_PACED ?? 20);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const up = await startFakeUpstream();
const PAGE = '<!doctype html><html><head><title>bench</title></head><body><h1>hello</h1><p>a small page, as a first navigation loads</p></body></html>';
up.respond = (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(PAGE) });
  res.end(PAGE);
};
const caDir = mkdtempSync(join(tmpdir(), 'gw-bench-lifecycle-'));
writeFileSync(join(caDir, 'ca.pem'), up.ca.certPem);

const loadBefore = loadavg();
const gw = await startGateway({
  ...(process.env.BENCH_POOL !== undefined ? { GATEWAY_BROWSER_POOL_SIZE: process.env.BENCH_POOL } : {}),
  GATEWAY_UPSTREAM_OVERRIDES: `app.example.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(caDir, 'ca.pem'), CHROMIUM_PATH: CHROMIUM,
  GATEWAY_BROWSER_LEASES_PER_DEVELOPER: '100', GATEWAY_BROWSER_LEASES_PER_END_USER: '100',
});

interface Sample { id: string; create: number; connect: number; newPage: number; load: number; reload: number; release: number; total: number; t0: number; tCreated: number }

/** Live processes of the browsers (host uids in their own range or the slot range), with their uid and /proc/<pid>/cgroup. */
function* browserProcesses(): Generator<{ pid: string; uid: number; cgroup: string }> {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
      if (uid < 1_100_000 || uid >= SLOT_UID_BASE + SLOT_UID_RANGE) continue;
      yield { pid, uid, cgroup: readFileSync(`/proc/${pid}/cgroup`, 'utf8') };
    } catch { /* gone */ }
  }
}

/** Host uids of the browsers with a live process, and those in the environment's cgroup. */
function browserUids(environmentId?: string): number[] {
  const out = new Set<number>();
  for (const p of browserProcesses()) if (!environmentId || p.cgroup.includes(environmentId)) out.add(p.uid);
  return [...out];
}

/**
 * The CPU an environment's browser has used, in ms: all its processes, exited ones included
 * (its cgroup's cpu.stat), and its browser process alone (the one Chromium process without a
 * --type: its UI thread makes every context and page). Null when it cannot be read.
 */
function browserCpuMs(environmentId: string): { all: number; main: number } | null {
  for (const p of browserProcesses()) {
    try {
      const cgroup = /^0::(.*)$/m.exec(p.cgroup)?.[1];
      if (!cgroup?.includes(environmentId)) continue;
      const cmd = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0');
      if (!cmd[0]?.includes('chromium') || cmd.some((a) => a.startsWith('--type='))) continue;
      const own = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
      const f = own.slice(own.lastIndexOf(')') + 2).split(' ');
      // cgroup v2: the unified tree (mounted at /sys/fs/cgroup, or beside the v1 trees at unified/).
      const stat = [`/sys/fs/cgroup${cgroup}/cpu.stat`, `/sys/fs/cgroup/unified${cgroup}/cpu.stat`].find((file) => existsSync(file));
      if (!stat) return null;
      const usage = Number(/^usage_usec (\d+)$/m.exec(readFileSync(stat, 'utf8'))?.[1]);
      return { all: usage / 1000, main: ((Number(f[11]) + Number(f[12])) * 1000) / 100 }; // utime + stime, in 1/100 s (USER_HZ)
    } catch { /* gone */ }
  }
  return null;
}

/** Until the pool is full (slot uids alive: as many as the pool's size), at most 60 s. */
async function poolFilled(size: number): Promise<void> {
  for (let i = 0; i < 600 && browserUids().filter((u) => u >= SLOT_UID_BASE).length < size; i++) await new Promise((r) => setTimeout(r, 100));
}

async function newEnvironment(endUser: string): Promise<string> {
  const e = await gw.api('POST', '/v1/environments', { end_user_id: endUser, egress_allow: ['app.example.com'] });
  if (e.status !== 201) throw new Error(`environment: ${e.status} ${JSON.stringify(e.body)}`);
  // Running (the exec waits for it): the lease measures the browser, not the environment's start.
  const x = await gw.api('POST', `/v1/environments/${e.body.id}/exec`, { command: ['true'] });
  if (x.status !== 200) throw new Error(`exec: ${x.status} ${JSON.stringify(x.body)}`);
  return e.body.id;
}

async function lifecycle(environmentId: string, n: number): Promise<Sample> {
  const t0 = wall();
  const l = await gw.api('POST', '/v1/browser/leases', { environment_id: environmentId });
  const t1 = wall();
  if (l.status !== 201 || l.body.state !== 'active' || !l.body.cdp_url) throw new Error(`lease: ${l.status} ${JSON.stringify(l.body)}`);
  const cdp = await RawCdp.connect(l.body.cdp_url);
  const t2 = wall();
  const page = await cdp.newPage();
  const t3 = wall();
  const nav = await cdp.navigate(page.sessionId, `https://app.example.com/page/${n}`);
  const t4 = wall();
  if (nav.error || nav.result?.errorText) throw new Error(`navigate: ${JSON.stringify(nav)}`);
  const title = await cdp.evaluate(page.sessionId, 'document.title');
  if (title !== 'bench') throw new Error(`the page did not load through the gateway (title ${JSON.stringify(title)})`);
  // Not part of the lifecycle: a second load of the same site (its renderer and the proxy connection are there).
  const r0 = wall();
  await cdp.navigate(page.sessionId, `https://app.example.com/again/${n}`);
  const reload = wall() - r0;
  const t5 = wall();
  cdp.close();
  const r = await gw.api('POST', `/v1/browser/leases/${l.body.id}/release`);
  const t6 = wall();
  if (r.status !== 200) throw new Error(`release: ${r.status} ${JSON.stringify(r.body)}`);
  return { id: l.body.id, create: t1 - t0, connect: t2 - t1, newPage: t3 - t2, load: t4 - t3, reload, release: t6 - t5, total: t6 - t0 - (t5 - t4), t0, tCreated: t1 };
}

async function destroy(environmentId: string): Promise<void> {
  await gw.api('DELETE', `/v1/environments/${environmentId}`);
  for (let k = 0; k < 2000 && (await gw.api('GET', `/v1/environments/${environmentId}`)).body.state !== 'destroyed'; k++) await new Promise((r) => setTimeout(r, 10));
}

// The pool fills from the host's first lease on: one lease (not counted), then the pool full.
const POOL_SIZE = Number(process.env.BENCH_POOL ?? 2);
const warmUp = await newEnvironment('lifecycle-warm-up');
await lifecycle(warmUp, -2);
await destroy(warmUp);
await poolFilled(POOL_SIZE);
const cold: Sample[] = [];
const idleKb: number[] = [];
const idleUssKb: number[] = [];
const idleProcs: number[] = [];
const coldEnvs: string[] = [];
for (let i = 0; i < COLD; i++) {
  const env = await newEnvironment(`lifecycle-cold-${i}`);
  coldEnvs.push(env);
  cold.push(await lifecycle(env, i));
  await new Promise((r) => setTimeout(r, 1500));
  const m = pssOfUid(browserUids(env)[0] ?? -1);
  idleKb.push(m.kb);
  idleUssKb.push(m.ussKb);
  idleProcs.push(m.procs);
  // The environment goes (its cgroup, its browser with it): one browser of an environment on the host at a time.
  await destroy(env);
}
const warmEnv = await newEnvironment('lifecycle-warm');
await lifecycle(warmEnv, -1); // its browser starts (not counted)
const warm: Sample[] = [];
const cpuWarm0 = browserCpuMs(warmEnv);
for (let i = 0; i < WARM; i++) warm.push(await lifecycle(warmEnv, i));
const cpuWarm1 = browserCpuMs(warmEnv);
const paced: Sample[] = [];
for (let i = 0; i < PACED; i++) {
  await new Promise((r) => setTimeout(r, 1000));
  paced.push(await lifecycle(warmEnv, WARM + i));
}
const cpuPaced1 = browserCpuMs(warmEnv);
const loadAfter = loadavg();
if (process.env.BENCH_RUNS_JSON) writeFileSync(process.env.BENCH_RUNS_JSON, JSON.stringify({ cold, coldEnvs, warm, paced, lines: gw.lines }));
await destroy(warmEnv);
// The pool's cost: each idle slot, the pool full again (every browser of an environment is gone).
await poolFilled(POOL_SIZE);
await new Promise((r) => setTimeout(r, 1500));
// A slot uid whose last process ended between the listing and the reading has nothing to count.
const slots = browserUids().filter((u) => u >= SLOT_UID_BASE).map((u) => pssOfUid(u)).filter((m) => m.procs > 0);
const trace = readTrace(gw.traceFile);
await gw.stop();
await up.close();
rmSync(caDir, { recursive: true, force: true });

const p50 = (xs: number[]) => ms(pct(xs, 50));
console.log(`\nBrowser session lifecycle (BrowserArena's stages), SQLite, ${COLD} first leases (a fresh environment each) and ${WARM} later leases of one environment,`);
console.log(`through the HTTP API of a \`gateway start\` child and the lease's cdp_url${process.env.BENCH_TRACE === '1' ? ' (traced)' : ''}`);
console.log(`load average before: ${loadBefore}; after: ${loadAfter}\n`);
console.log('| p50 ms | create lease | connect CDP | new page | load page (gateway) | release | **total** | total p90 | total p99 |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
const row = (name: string, s: Sample[]) => console.log(`| ${name} | ${p50(s.map((x) => x.create))} | ${p50(s.map((x) => x.connect))} | ${p50(s.map((x) => x.newPage))} | ${p50(s.map((x) => x.load))} | ${p50(s.map((x) => x.release))} | **${p50(s.map((x) => x.total)).trim()}** | ${ms(pct(s.map((x) => x.total), 90))} | ${ms(pct(s.map((x) => x.total), 99))} |`);
row(`ours, first lease of an environment (${POOL_SIZE ? `pool of ${POOL_SIZE}: a slot claimed when one is ready` : 'no pool: its browser starts'})`, cold);
row('ours, later lease of the same environment (browser warm), back to back', warm);
if (paced.length) row('ours, later lease of the same environment, 1 s after the previous release', paced);
console.log('| target (issue 29, item 3) | | | | | | 150 | | |');
console.log('| ours before, one shared browser (issue 29\'s figure) | | | | | | 325 | | |');
console.log('| BaseLayer (published) | | | | | | 224 | | |');
console.log('| Kernel (published) | | | | | | 365 | | |');
console.log('| Browserbase (published) | | | | | | 578 | | |');
/** The browser's CPU per lease between two readings (each lease's own work and the next lease's context made at its release). */
const perLease = (a: typeof cpuWarm0, b: typeof cpuWarm0, n: number) =>
  a && b && n ? `${((b.all - a.all) / n).toFixed(0)} ms (its browser process alone ${((b.main - a.main) / n).toFixed(0)} ms)` : 'unreadable';
console.log(`\nThe browser's CPU per later lease (all its processes, from its cgroup; each lease's work and the next lease's context and page, made at its release): ` +
  `back to back ${perLease(cpuWarm0, cpuWarm1, WARM)}, 1 s apart ${perLease(cpuWarm1, cpuPaced1, PACED)}`);
console.log(`A second load of the same site in the same page (not in the total): p50 ${pct(warm.map((x) => x.reload), 50).toFixed(1)} ms warm, ${pct(cold.map((x) => x.reload), 50).toFixed(1)} ms first lease`);
if (slots.length) console.log(`Idle pool slots (${slots.length}): USS ${slots.map((m) => (m.ussKb / 1024).toFixed(1)).join(', ')} MiB; PSS ${slots.map((m) => (m.kb / 1024).toFixed(1)).join(', ')} MiB; ${slots.map((m) => m.procs).join(', ')} processes`);
console.log(`Idle sandboxed browser (running, no lease, no page): USS (its own pages) p50 ${(pct(idleUssKb, 50) / 1024).toFixed(1)} MiB; PSS p50 ${(pct(idleKb, 50) / 1024).toFixed(1)} MiB (min ${(Math.min(...idleKb) / 1024).toFixed(1)}, max ${(Math.max(...idleKb) / 1024).toFixed(1)}) over ${pct(idleProcs, 50)} processes`);

if (trace.length) {
  // The first lease's create, from the traced child: the browser's start and the context.
  const rows = cold.map((s) => {
    const inside = trace.filter((t) => Number(t.t0) >= s.t0 && Number(t.t0) <= s.tCreated);
    const spawn = inside.find((t) => t.k === 'spawn' && String(t.what).startsWith('browser sandbox'));
    const envStart = inside.find((t) => t.k === 'call' && t.what === 'EnvBrowser.start');
    const open = inside.find((t) => t.k === 'call' && t.what === 'envBrowser.openContext');
    const brokerOpen = inside.find((t) => t.k === 'call' && t.what === 'broker.open');
    return { s, spawn, envStart, open, brokerOpen };
  }).filter((r) => r.spawn && r.envStart && r.open && r.brokerOpen) as Array<{ s: Sample; spawn: Record<string, any>; envStart: Record<string, any>; open: Record<string, any>; brokerOpen: Record<string, any> }>;
  const warmOpen = warm.map((s) => trace.find((t) => t.k === 'call' && t.what === 'envBrowser.openContext' && Number(t.t0) >= s.t0 && Number(t.t0) <= s.tCreated)).filter(Boolean);
  const g = (name: string, xs: number[]) => console.log(`| ${name} | ${ms(pct(xs, 50))} | ${ms(pct(xs, 90))} |`);
  console.log(`\nThe first lease's create, from the traced child (${rows.length} runs):\n`);
  console.log('| from → to | p50 | p90 |');
  console.log('|---|---:|---:|');
  g('create sent → broker.open (lease row, limits, transaction)', rows.map((r) => r.brokerOpen.t0 - r.s.t0));
  g('broker.open → browser sandbox spawned (cgroup, staging dir, proxy socket)', rows.map((r) => r.spawn.t0 - r.brokerOpen.t0));
  g('spawned → Chromium answers on its pipe (sh, setpriv, bwrap, socat relay, Chromium start)', rows.map((r) => r.envStart.t0 - r.spawn.t0));
  g('EnvBrowser.start (target discovery)', rows.map((r) => r.envStart.t1 - r.envStart.t0));
  g('openContext (context, downloads denied)', rows.map((r) => r.open.t1 - r.open.t0));
  g('openContext done → create answered (lease active, JSON)', rows.map((r) => r.s.tCreated - r.open.t1));
  g('a later lease\'s openContext, for comparison', warmOpen.map((t) => t!.t1 - t!.t0));
}
console.log();
