/**
 * The resident spawner (hosts/drivers/spawner.ts), driver level: execs of one running
 * environment paced like an agent's commands (BENCH_GAP_MS, default 50 ms apart; each exec's
 * next launcher is started after its answer), with the exec launchers started by the
 * service's own `spawn` (`residentSpawner: false`) and by the spawner, A/B interleaved in one
 * run. Reports the exec round trip and what every other request of the service pays: the
 * event loop's delay (p99 and max) while they run. The bench process carries BENCH_RSS_MIB of
 * extra resident memory (default 150) so that its RSS is the gateway's under load (~200 MiB):
 * a fork's cost grows with it. As root, with bubblewrap. Printed, never asserted.
 *
 *   npx tsx bench/environments/exec-spawn.bench.ts
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessDriver } from '../../hosts/drivers/process.js';
import { silentLogger } from '../../lib/log.js';

const N = Number(process.env.BENCH_N ?? 40);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const ballast: Buffer[] = [];
for (let i = 0; i < Number(process.env.BENCH_RSS_MIB ?? 150); i++) ballast.push(Buffer.alloc(1 << 20, i & 255));

const root = mkdtempSync(join(tmpdir(), 'gw-exec-spawn-'));
const surface = { env: {}, files: {}, connections: {}, caPem: '' };
const results: Record<string, { exec: number[]; p99: number[]; max: number[] }> = { 'service spawn': { exec: [], p99: [], max: [] }, 'resident spawner': { exec: [], p99: [], max: [] } };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, resident] of [['service spawn', false], ['resident spawner', true]] as const) {
    const driver = new ProcessDriver({ rootDir: join(root, `r${round}${resident ? 's' : 'n'}`), proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_execspawn', insecure: false, log: silentLogger, sandboxPool: 0, residentSpawner: resident });
    await driver.slotsReaped();
    const id = `env_${(0xe5e000 + round * 2 + (resident ? 1 : 0)).toString(16).padStart(24, '0')}`;
    await driver.start({ id, cpus: 1, memoryMib: 512, diskGib: 1 }, surface);
    const run = () => driver.exec(id, { command: ['true'], timeoutMs: 10_000, maxOutputBytes: 4096 });
    await run(); // the first exec, then each one's next launcher is started after it
    await new Promise((r) => setTimeout(r, 200));
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    for (let i = 0; i < N; i++) {
      const t0 = performance.now();
      await run();
      results[name]!.exec.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, GAP_MS));
    }
    h.disable();
    results[name]!.p99.push(h.percentile(99) / 1e6);
    results[name]!.max.push(h.max / 1e6);
    await driver.destroy(id);
    await driver.close();
  }
}
rmSync(root, { recursive: true, force: true });
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
console.log(`\nExecs ${GAP_MS} ms apart (${N} × ${ROUNDS} rounds each, interleaved), process RSS ${(process.memoryUsage().rss / 1048576).toFixed(0)} MiB\n`);
console.log('| exec launchers started by | exec p50 ms | exec p90 | event-loop delay p99 ms (per round) | max (per round) |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, r] of Object.entries(results)) {
  console.log(`| ${name} | ${pct(r.exec, 0.5).toFixed(1)} | ${pct(r.exec, 0.9).toFixed(1)} | ${r.p99.map((x) => x.toFixed(1)).join(', ')} | ${r.max.map((x) => x.toFixed(1)).join(', ')} |`);
}
