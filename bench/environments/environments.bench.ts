/**
 * Environments on the process runtime (issue 12, item 7) or, with BENCH_RUNTIME=qemu, the
 * QEMU microVM runtime (issue 16, item 5: boot, suspend, resume, snapshot size): create → running, suspend →
 * suspended, resume → running, stop → running (a fresh boot on the kept disk), exec
 * round trip; memory per idle environment; how many idle environments a 24 GiB host
 * holds. Printed next to the targets, never asserted (docs/performance.md, "Environments").
 *
 *   npx tsx bench/environments/environments.bench.ts            # SQLite, 40 environments
 *   BENCH_N=100 DATABASE_URL=mysql://root@127.0.0.1:3306/gw_bench npx tsx bench/environments/environments.bench.ts
 *   BENCH_RUNTIME=qemu npx tsx bench/environments/environments.bench.ts  # 3 microVMs (TCG here)
 *
 * Latency is measured through the public API as a developer sees it: from the call's
 * start until GET /v1/environments/{id} first shows the state (polled every 2 ms, so a
 * result carries up to ~2 ms of polling granularity). Memory is PSS (private pages plus a
 * fair share of shared ones: bwrap, sh and socat binaries are shared by every sandbox)
 * summed over each sandbox's processes, read from /proc/<pid>/smaps_rollup, and the
 * cgroup's own count (memory.usage_in_bytes: includes the page cache and kernel memory the
 * environment caused).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { startService } from '../../bin/service.js';

const RUNTIME = process.env.BENCH_RUNTIME === 'qemu' ? 'qemu' : 'process';
const N = Number(process.env.BENCH_N ?? (RUNTIME === 'qemu' ? 3 : 40));
const HOST_GIB = 24;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const fmt = (xs: number[]): string => `p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms   p99 ${pct(xs, 99).toFixed(1).padStart(7)} ms`;

const dataDir = mkdtempSync(join(tmpdir(), 'gw-bench-env-'));
const key = `sk_${randomBytes(20).toString('hex')}`;
const config = loadConfig({
  ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : { DATABASE_URL: `sqlite:${join(dataDir, 'gateway.sqlite')}` }),
  DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: RUNTIME,
  ...(RUNTIME === 'qemu' ? { GATEWAY_QEMU_IMAGE_DIR: process.env.GATEWAY_QEMU_IMAGE_DIR ?? '/var/cache/agent-gateway/vm-image' } : {}),
  GATEWAY_BOOTSTRAP_API_KEY: key, GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'silent',
});
const svc = await startService(config, silentLogger);
if (!svc.host) {
  console.error('no environment host started (see the service log: bubblewrap or root missing)');
  process.exit(1);
}
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const api = async (method: string, path: string, body?: unknown): Promise<any> => {
  const r = await fetch(`${svc.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json();
};
async function until(id: string, state: string): Promise<void> {
  for (let i = 0; i < 20_000; i++) {
    const e = await api('GET', `/v1/environments/${id}`);
    if (e.state === state) return;
    if (e.state === 'failed') throw new Error(`environment failed: ${e.failure_reason}`);
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`${id} never reached ${state}`);
}
async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

const create: number[] = [];
const suspend: number[] = [];
const resume: number[] = [];
const stopStart: number[] = [];
const execRt: number[] = [];
const snapshotMiB: number[] = [];
const ids: string[] = [];
for (let i = 0; i < N; i++) {
  let id = '';
  create.push(await timed(async () => {
    id = (await api('POST', '/v1/environments', { end_user_id: `bench-${i}`, resources: { cpus: 1, memory_mib: 512, base_memory_mib: 256 } })).id;
    await until(id, 'running');
  }));
  ids.push(id);
}
for (const id of ids.slice(0, Math.min(N, RUNTIME === 'qemu' ? N : 30))) {
  execRt.push(await timed(async () => {
    await api('POST', `/v1/environments/${id}/exec`, { command: ['true'] });
  }));
  suspend.push(await timed(async () => {
    await api('POST', `/v1/environments/${id}/suspend`);
    await until(id, 'suspended');
  }));
  const sizes = (svc.host.driver as { sizes?: (id: string) => { snapshotBytes: number } }).sizes?.(id);
  if (sizes) snapshotMiB.push(sizes.snapshotBytes / 1024 / 1024);
  resume.push(await timed(async () => {
    await api('POST', `/v1/environments/${id}/resume`);
    await until(id, 'running');
  }));
}
for (const id of ids.slice(0, Math.min(N, 20))) {
  await api('POST', `/v1/environments/${id}/suspend`);
  await until(id, 'suspended');
  await svc.db('environments').where({ id }).update({ desired_state: 'stopped' });
  svc.host.notify();
  await until(id, 'stopped');
  stopStart.push(await timed(async () => {
    await api('POST', `/v1/environments/${id}/resume`);
    await until(id, 'running');
  }));
}

// Idle memory: let every sandbox settle, then read.
await new Promise((r) => setTimeout(r, 1500));
function pssKb(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}
function cgroupPids(id: string): number[] {
  const base = `/sys/fs/cgroup/unified/gateway-${svc.host!.hostId}/${id}`;
  const out: number[] = [];
  try {
    for (const p of readFileSync(`${base}/cgroup.procs`, 'utf8').split('\n')) if (p) out.push(Number(p));
  } catch { /* pure v2 machines: read /sys/fs/cgroup/... */ }
  return out;
}
let pssTotal = 0;
let cgTotal = 0;
let procs = 0;
for (const id of ids) {
  const pids = cgroupPids(id);
  procs += pids.length;
  for (const p of pids) pssTotal += pssKb(p);
  cgTotal += (await svc.host.driver.stats(id)).memoryBytes ?? 0;
}
const pssPerEnvMiB = pssTotal / ids.length / 1024;
const cgPerEnvMiB = cgTotal / ids.length / 1024 / 1024;
const hostRss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024;

if (RUNTIME === 'qemu') {
  // QEMU's RSS, by its cgroup (guest memory touched + QEMU itself).
  console.log(`\nEnvironments, qemu runtime (${(svc.host.driver as { accel?: string }).accel ?? '?'}; ${process.env.DATABASE_URL ? 'MySQL' : 'SQLite'}), ${N} microVMs, 1 cpu / 512 MiB each\n`);
  console.log(`  create → running (boot) ${fmt(create)}`);
  console.log(`  suspend → suspended     ${fmt(suspend)}`);
  console.log(`  resume → running        ${fmt(resume)}`);
  console.log(`  stop → running (boot)   ${fmt(stopStart)}`);
  console.log(`  exec round trip (true)  ${fmt(execRt)}`);
  console.log(`  snapshot size (zstd)    p50 ${pct(snapshotMiB, 50).toFixed(1)} MiB   max ${Math.max(...snapshotMiB).toFixed(1)} MiB`);
  console.log(`  idle memory per VM (cgroup: QEMU + guest pages touched): ${cgPerEnvMiB.toFixed(1)} MiB\n`);
  for (const id of ids) await api('DELETE', `/v1/environments/${id}`);
  for (const id of ids) await until(id, 'destroyed');
  await svc.close();
  process.exit(0);
}
console.log(`\nEnvironments, process runtime (${process.env.DATABASE_URL ? 'MySQL' : 'SQLite'}), ${N} environments, 1 cpu / 512 MiB each\n`);
console.log(`  create → running        ${fmt(create)}    target p50 < 300 ms`);
console.log(`  suspend → suspended     ${fmt(suspend)}`);
console.log(`  resume → running        ${fmt(resume)}    target p50 < 50 ms`);
console.log(`  stop → running (boot)   ${fmt(stopStart)}`);
console.log(`  exec round trip (true)  ${fmt(execRt)}`);
console.log(`\n  idle memory per environment: PSS ${pssPerEnvMiB.toFixed(2)} MiB over ${(procs / ids.length).toFixed(1)} processes; cgroup count ${cgPerEnvMiB.toFixed(2)} MiB`);
console.log(`  service process RSS with ${N} environments: ${hostRss.toFixed(0)} MiB`);
const perEnv = Math.max(pssPerEnvMiB, cgPerEnvMiB);
console.log(`  idle environments one ${HOST_GIB} GiB host holds (memory bound, by the larger count): ~${Math.floor((HOST_GIB * 1024) / perEnv)}`);
console.log('  (each also holds 4 processes on the host and 3 file descriptors in the service: mind pid_max and the fd limit past a few thousand)\n');

for (const id of ids) await api('DELETE', `/v1/environments/${id}`);
for (const id of ids) await until(id, 'destroyed');
await svc.close();
rmSync(dataDir, { recursive: true, force: true });
