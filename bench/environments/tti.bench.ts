/**
 * Time to interactive (issue 29, items 1 and 2): "create → first exec done", the measure of
 * the ComputeSDK sandbox leaderboard, through the HTTP API of a `gateway start` child (temp
 * DATA_DIR, SQLite, GATEWAY_RUNTIME=process, as root): the bench sends POST /v1/environments
 * and, the moment it answers, POST /v1/environments/{id}/exec `true` (which waits for the
 * environment to run); TTI is from the create's send to the exec's answer. Printed beside the
 * published anchors, never asserted (docs/performance.md, "Issue 29: what users feel").
 *
 *   npx tsx bench/environments/tti.bench.ts                 # BENCH_N=50 runs
 *   BENCH_N=5 npx tsx bench/environments/tti.bench.ts       # a quick look
 *   BENCH_POOL=0 npx tsx bench/environments/tti.bench.ts    # every start cold (no sandbox pool; default: the service's, 1)
 *   BENCH_GAP_MS=300 npx tsx bench/environments/tti.bench.ts  # a pause after each destroy (default 50 ms): a pool refills in between
 *   (BENCH_HOST_UP_MS, default 1000: the pause after the gateway's start before the first run)
 *   BENCH_TRACE=1 npx tsx bench/environments/tti.bench.ts   # + where the time goes, from a traced child
 *   BENCH_RUNNING=20 BENCH_N=20 npx tsx bench/environments/tti.bench.ts   # with 20 idle environments on the host
 *   BENCH_RUNS_JSON=/tmp/runs.json ...                      # + every run's timings and the child's log lines, as JSON
 *   BENCH_NODE_ARGS=--trace-gc ...                          # node flags for the child (bench/child-gateway.ts)
 *
 * Each run creates one environment with the API's defaults (2 cpus, 4 GiB, a 10 GiB disk:
 * what `{end_user_id}` alone gets; BENCH_DISK_GIB to change the disk), execs, runs one more
 * exec on the running environment (the warm exec round trip) and one 300 ms later (the next
 * command of an agent that read the output), then destroys it and waits for
 * `destroyed`, so every run meets the same host (one environment running). The breakdown
 * comes from the environment's events (GET .../events: created, placed, running, to the
 * millisecond) and, with BENCH_TRACE=1, from bench/traced-gateway.ts (every helper process,
 * SQL statement and driver call, sub-millisecond). The floor, measured here too: bubblewrap
 * alone with every namespace, as the environment's uid, running /bin/true.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sandboxUid } from '../../hosts/drivers/process.js';
import { PERL, START_LAUNCHER } from '../../hosts/drivers/enter.js';
import { loadavg, ms, pct, readTrace, startGateway, wall } from '../child-gateway.js';

const N = Number(process.env.BENCH_N ?? 50);
const DISK = process.env.BENCH_DISK_GIB ? Number(process.env.BENCH_DISK_GIB) : undefined;
const FLOOR_RUNS = Number(process.env.BENCH_FLOOR_RUNS ?? 30);

const RUNNING = Number(process.env.BENCH_RUNNING ?? 0);
/** GATEWAY_SANDBOX_POOL of the child (its default, 1, when unset; 0: every start cold). */
const POOL = process.env.BENCH_POOL;
/** Pause after a run's destroy: how often environments are created (a pool refills in between). */
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 50);

const loadBefore = loadavg();
// With BENCH_RUNNING, the host offers room for them beside the measured one.
const gw = await startGateway({
  ...(RUNNING ? { GATEWAY_HOST_CPUS: String(RUNNING + 8), GATEWAY_HOST_MEMORY_MIB: String(RUNNING * 256 + 16384) } : {}),
  ...(POOL !== undefined ? { GATEWAY_SANDBOX_POOL: POOL } : {}),
});
if (!gw.hostId) {
  await gw.stop();
  throw new Error('no environment host in the child (bubblewrap or root missing)');
}
// A host that has been up a moment (its pool filled, GATEWAY_SANDBOX_POOL), as hosts are; the
// first environment right after a host's own start is a cold start (BENCH_POOL=0 measures those).
await new Promise((r) => setTimeout(r, Number(process.env.BENCH_HOST_UP_MS ?? 1000)));
// BENCH_RUNNING=k: k idle environments run on the host the whole time (a host is rarely empty).
const background: string[] = [];
for (let i = 0; i < RUNNING; i++) {
  const c = await gw.api('POST', '/v1/environments', { end_user_id: `idle-${i}`, resources: { cpus: 1, memory_mib: 512, base_memory_mib: 256, disk_gib: 1 } });
  background.push(c.body.id);
  await gw.api('POST', `/v1/environments/${c.body.id}/exec`, { command: ['true'] });
}

interface Run {
  tti: number;
  createAnswer: number;
  /** From the events (ms resolution, same clock). */
  created: number;
  placed: number;
  running: number;
  t0: number;
  t1: number;
  tExec: number;
  execDuration: number;
  warmExec: number;
  /** An exec 300 ms after the previous one answered (an agent reads the output before its next command). */
  pacedExec: number;
  id: string;
  /** Started from a slot of the pool (the child's log says so), not cold. */
  fromSlot: boolean;
}

// The bench's own first request is not the service's time: Node's fetch loads undici on its
// first call and opens the connection (40-50 ms here, seen as the first create's answer).
await gw.api('GET', '/v1/environments?limit=1');

const parse = (iso: string | null): number => (iso ? Date.parse(iso) : NaN);
const runs: Run[] = [];
for (let i = 0; i < N; i++) {
  const t0 = wall();
  const c = await gw.api('POST', '/v1/environments', { end_user_id: `tti-${i}`, ...(DISK ? { resources: { disk_gib: DISK } } : {}) });
  const t1 = wall();
  if (c.status !== 201) throw new Error(`create: ${c.status} ${JSON.stringify(c.body)}`);
  const id = c.body.id as string;
  const x = await gw.api('POST', `/v1/environments/${id}/exec`, { command: ['true'] });
  const tExec = wall();
  if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec: ${x.status} ${JSON.stringify(x.body)}`);
  const w0 = wall();
  await gw.api('POST', `/v1/environments/${id}/exec`, { command: ['true'] });
  const warmExec = wall() - w0;
  await new Promise((r) => setTimeout(r, 300));
  const p0 = wall();
  await gw.api('POST', `/v1/environments/${id}/exec`, { command: ['true'] });
  const pacedExec = wall() - p0;
  const ev = (await gw.api('GET', `/v1/environments/${id}/events?limit=50`)).body.data as Array<{ kind: string; created_at: string }>;
  const at = (kind: string) => parse(ev.find((e) => e.kind === kind)?.created_at ?? null);
  runs.push({
    tti: tExec - t0, createAnswer: t1 - t0, created: at('created'), placed: at('placed'), running: at('running'), t0, t1, tExec,
    execDuration: Number(x.body.duration_ms), warmExec, pacedExec, id, fromSlot: gw.lines.some((l) => l.includes(id) && l.includes('started from a sandbox slot')),
  });
  await gw.api('DELETE', `/v1/environments/${id}`);
  for (let k = 0; k < 2000; k++) {
    if ((await gw.api('GET', `/v1/environments/${id}`)).body.state === 'destroyed') break;
    await new Promise((r) => setTimeout(r, 5));
  }
  // The destroy's own work (umount, losetup, rm of the image) is out of the next run's way.
  await new Promise((r) => setTimeout(r, GAP_MS));
}
if (process.env.BENCH_RUNS_JSON) (await import('node:fs')).writeFileSync(process.env.BENCH_RUNS_JSON, JSON.stringify({ runs, lines: gw.lines }));
const loadAfter = loadavg();
for (const id of background) await gw.api('DELETE', `/v1/environments/${id}`);
for (const id of background) {
  for (let k = 0; k < 2000 && (await gw.api('GET', `/v1/environments/${id}`)).body.state !== 'destroyed'; k++) await new Promise((r) => setTimeout(r, 10));
}

// The floor: bubblewrap alone, every namespace, as an environment's uid, running /bin/true.
async function floorOnce(): Promise<number> {
  const uid = String(sandboxUid('env_000000000000000000000000'));
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const p = spawn('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', '/usr/bin/bwrap', '--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session',
      '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp',
      '--', '/bin/true'], { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } });
    p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bwrap exited ${code}`))));
  });
  return performance.now() - t0;
}
const floor: number[] = [];
for (let i = 0; i < FLOOR_RUNS; i++) floor.push(await floorOnce());

/** spawn → exit of a command, p50 over FLOOR_RUNS (what one helper process costs here). */
async function spawnMs(cmd: string, args: string[]): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < FLOOR_RUNS; i++) {
    const t0 = performance.now();
    await new Promise<void>((resolve) => spawn(cmd, args, { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } }).once('exit', () => resolve()));
    out.push(performance.now() - t0);
  }
  return out;
}
const parts: Array<[string, number[]]> = [
  ['/bin/true (a process, from Node)', await spawnMs('/bin/true', [])],
  ['sh -c : (dash)', await spawnMs('/bin/sh', ['-c', ':'])],
  ['perl -e 0 (exec\'s launcher\'s interpreter)', await spawnMs('/usr/bin/perl', ['-e', '0'])],
  ['socat -V (the relay\'s binary, to its exit)', await spawnMs('/usr/bin/socat', ['-V'])],
];

/**
 * The start's launcher without cgroups (enter.ts's START_LAUNCHER, as the driver runs it:
 * a private mount namespace, the bind at /mnt, a detach of every environment's mount the
 * copy holds: 3 per environment running on the machine, then the uid) → bwrap → /bin/true,
 * with K fake environments' mounts (tmpfs) present.
 */
const chainRoot = mkdtempSync(join(tmpdir(), 'gw-bench-chain-'));
const fakeMounts: string[] = [];
const chain: Array<[number, number[]]> = [];
try {
  let made = 0;
  for (const k of [1, 10, 40]) {
    for (; made < k; made++) {
      const env = join(chainRoot, `env_${made.toString(16).padStart(24, '0')}`);
      for (const sub of ['disk', 'service', 'etc']) {
        mkdirSync(join(env, sub), { recursive: true });
        execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', 'size=1m', 'bench', join(env, sub)]);
        fakeMounts.push(join(env, sub));
      }
    }
    const xs: number[] = [];
    for (let i = 0; i < Math.min(FLOOR_RUNS, 15); i++) {
      // The launcher makes the private copy it unwinds, as the driver runs it.
      const t0 = performance.now();
      await new Promise<void>((resolve, reject) => {
        const p = spawn(PERL, ['-e', START_LAUNCHER, '0', join(chainRoot, 'env_000000000000000000000000'), String(sandboxUid('env_000000000000000000000000')),
          '/usr/bin/bwrap', '--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session',
          '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp',
          '--', '/bin/true'], { stdio: 'ignore', env: { PATH: '/usr/sbin:/usr/bin:/bin' } });
        p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`chain exited ${code}`))));
      });
      xs.push(performance.now() - t0);
    }
    chain.push([k, xs]);
  }
} finally {
  for (const m of fakeMounts.reverse()) spawnSync('/usr/bin/umount', ['-l', m]);
  rmSync(chainRoot, { recursive: true, force: true });
}

const trace = readTrace(gw.traceFile);
await gw.stop();

const col = (xs: number[]) => `${ms(pct(xs, 50))} | ${ms(pct(xs, 90))} | ${ms(pct(xs, 99))}`;
const tti = runs.map((r) => r.tti);
console.log(`\nTime to interactive: create → first exec done (\`true\`), process runtime, SQLite, ${N} runs, ${RUNNING} other environments running, through the HTTP API of a \`gateway start\` child${process.env.BENCH_TRACE === '1' ? ' (traced)' : ''}`);
console.log(`load average before: ${loadBefore}; after: ${loadAfter}\n`);
console.log('|                                   |     p50 |     p90 |     p99 | ms');
console.log('|---|---:|---:|---:|');
console.log(`| **ours: create → first exec done** | ${col(tti)} |`);
const warm = runs.filter((r) => r.fromSlot);
const cold = runs.filter((r) => !r.fromSlot);
if (warm.length) console.log(`| ours, started from a slot of the pool (${warm.length} runs) | ${col(warm.map((r) => r.tti))} |`);
if (cold.length) console.log(`| ours, started cold (${cold.length} runs) | ${col(cold.map((r) => r.tti))} |`);
console.log(`| target (issue 29, item 2)         |    30.0 |       - |   100.0 |`);
console.log(`| ours before (issue 29's figure)   |    67.0 |       - |   114.0 |`);
console.log(`| Daytona (published)               |   110.0 |       - |       - |`);
console.log(`| E2B (published)                   |   440.0 |       - |       - |`);
console.log(`| floor: bwrap, every namespace, /bin/true | ${col(floor)} |`);
console.log(`| warm exec round trip (running env), right after the first | ${col(runs.map((r) => r.warmExec))} |`);
console.log(`| exec round trip 300 ms after the previous answer | ${col(runs.map((r) => r.pacedExec))} |`);
for (const [name, xs] of parts) console.log(`| one process: ${name} | ${col(xs)} |`);
for (const [k, xs] of chain) console.log(`| start's launcher + bwrap, ${k} environment(s)' mounts on the machine | ${col(xs)} |`);

console.log('\nWhere TTI goes, from the API answers and the environment\'s events (ms, the events carry whole milliseconds):\n');
console.log('| stage | p50 | p90 | p99 |');
console.log('|---|---:|---:|---:|');
const stage = (name: string, xs: number[]) => console.log(`| ${name} | ${col(xs.filter(Number.isFinite))} |`);
stage('POST /v1/environments answered', runs.map((r) => r.createAnswer));
stage('create answered → `placed` event', runs.map((r) => r.placed - r.t1));
stage('`placed` → `running` event (the start)', runs.map((r) => r.running - r.placed));
stage('`running` → exec answered', runs.map((r) => r.tExec - r.running));
stage('  of which the command (exec duration_ms)', runs.map((r) => r.execDuration));

if (trace.length) {
  // Per run: the records inside its window, as milestones and sums.
  const byRun = runs.map((r) => {
    const inside = trace.filter((t) => Number(t.t0) >= r.t0 && Number(t.t0) <= r.tExec);
    const call = (what: string, nth = 0) => inside.filter((t) => t.k === 'call' && t.what === what && t.id === r.id)[nth];
    const start = call('driver.start');
    const exec = call('driver.exec');
    const sandbox = inside.find((t) => t.k === 'spawn' && String(t.what).startsWith('sandbox'));
    const relay = trace.find((t) => t.k === 'relay-poll' && Number(t.last) >= r.t0 && Number(t.last) <= r.tExec);
    const spawns = new Map<string, number>();
    const counts = new Map<string, number>();
    for (const t of inside) {
      if (t.k !== 'spawn' || String(t.what).startsWith('sandbox') || !start || Number(t.t0) > Number(start.t1) || Number(t.t0) < Number(start.t0)) continue;
      const name = String(t.what);
      spawns.set(name, (spawns.get(name) ?? 0) + (Number(t.close ?? t.exit) - Number(t.t0)));
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    const sql = inside.filter((t) => t.k === 'sql');
    return { r, start, exec, sandbox, relay, spawns, counts, sqlN: sql.length, sqlMs: sql.reduce((s, t) => s + (t.t1 - t.t0), 0) };
  });
  const ok = byRun.filter((b) => b.start && b.exec && b.sandbox) as Array<(typeof byRun)[number] & { start: Record<string, any>; exec: Record<string, any>; sandbox: Record<string, any> }>;
  console.log(`\nThe same, from the traced child (sub-millisecond; ${ok.length} runs with a full timeline):\n`);
  console.log('| from → to | p50 | p90 | p99 |');
  console.log('|---|---:|---:|---:|');
  const g = (name: string, f: (b: (typeof ok)[number]) => number) => stage(name, ok.map(f));
  g('create sent → create answered', (b) => b.r.t1 - b.r.t0);
  g('create answered → driver.start called (wake, heartbeat, placement tx, reconcile read)', (b) => b.start.t0 - b.r.t1);
  g('driver.start → sandbox spawned (disk image, mounts, /etc, sockets, cgroup)', (b) => b.sandbox.t0 - b.start.t0);
  g('sandbox spawned → bwrap reported its pid (sh, unshare, mount, setpriv, bwrap namespaces)', (b) => b.sandbox.fd3 - b.sandbox.t0);
  g('bwrap pid → relay listening (sealed check, socat start, polled every 2 ms)', (b) => (b.relay ? b.relay.last : b.start.t1) - b.sandbox.fd3);
  g('relay listening → driver.start returned', (b) => b.start.t1 - (b.relay ? b.relay.last : b.start.t1));
  g('driver.start returned → driver.exec called (stats, report tx, exec\'s wake-up, envFor)', (b) => b.exec.t0 - b.start.t1);
  g('driver.exec (launcher: sh cgroup join → perl setns → shim → true)', (b) => b.exec.t1 - b.exec.t0);
  g('driver.exec returned → exec answered (JSON, HTTP)', (b) => b.r.tExec - b.exec.t1);
  console.log(`\nHelper processes run by driver.start (p50 of each run's sum, ms; count per run):\n`);
  const names = new Set(ok.flatMap((b) => [...b.spawns.keys()]));
  for (const n of [...names].sort()) {
    const xs = ok.map((b) => b.spawns.get(n) ?? 0);
    console.log(`  ${ms(pct(xs, 50))}  x${ok[0]!.counts.get(n) ?? '?'}  ${n}`);
  }
  console.log(`\n  SQL statements per run (create sent → exec answered): p50 ${pct(ok.map((b) => b.sqlN), 50)}, their summed time p50 ${pct(ok.map((b) => b.sqlMs), 50).toFixed(1)} ms`);
  const calls = new Map<string, number[]>();
  for (const b of ok) {
    const inside = trace.filter((t) => t.k === 'call' && Number(t.t0) >= b.r.t0 && Number(t.t0) <= b.r.tExec && String(t.what).startsWith('disk.'));
    const per = new Map<string, number>();
    for (const t of inside) per.set(t.what, (per.get(t.what) ?? 0) + (t.t1 - t.t0));
    for (const [k, v] of per) calls.set(k, [...(calls.get(k) ?? []), v]);
  }
  for (const [k, xs] of calls) console.log(`  ${k}: p50 ${pct(xs, 50).toFixed(1)} ms`);
}
console.log();
