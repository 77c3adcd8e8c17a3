/**
 * The process runtime's destroy, driver level (issue 29): how long `ProcessDriver.destroy`
 * takes for a running environment (stop, unmount, loop device, image, directory) and the
 * longest the service's event loop is blocked while it runs (what every request of the
 * service waits for). BENCH_N environments (default 10) of a 10 GiB preallocated disk, each
 * started cold and destroyed 300 ms later. As root, with bubblewrap. Printed, never asserted.
 *
 *   npx tsx bench/environments/destroy.bench.ts
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessDriver } from '../../hosts/drivers/process.js';
import { silentLogger } from '../../lib/log.js';
const N = Number(process.env.BENCH_N ?? 10);
const root = mkdtempSync(join(tmpdir(), 'gw-stall-'));
const driver = new ProcessDriver({ rootDir: join(root, 'environments'), proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_stall', insecure: false, log: silentLogger, sandboxPool: 0 });
await driver.slotsReaped();
const surface = { env: {}, files: {}, connections: {}, caPem: '' };
const lag: number[] = []; const took: number[] = [];
for (let i = 0; i < N; i++) {
  const id = `env_${(0xabc000 + i).toString(16).padStart(24, '0')}`;
  await driver.start({ id, cpus: 1, memoryMib: 512, diskGib: 10 }, surface);
  await new Promise((r) => setTimeout(r, 300));
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t0 = performance.now();
  await driver.destroy(id);
  took.push(performance.now() - t0);
  h.disable();
  lag.push(h.max / 1e6);
}
await driver.close();
rmSync(root, { recursive: true, force: true });
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(1);
console.log(`destroy p50 ${p50(took)} ms; max event-loop delay during it p50 ${p50(lag)} ms (all: ${lag.map((x) => x.toFixed(0)).join(' ')})`);
