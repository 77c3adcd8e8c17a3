/**
 * Start-up of `gateway start`: time from spawn to the ready line, and idle RSS a few
 * seconds after ready, for each way of running it. Printed, never asserted
 * (docs/performance.md, "Start-up: tsx vs compiled").
 *
 *   npx tsx bench/startup/start.bench.ts            # every mode whose entry point exists
 *   BENCH_MODES=tsx BENCH_RUNS=5 npx tsx bench/startup/start.bench.ts
 *
 * Modes: `tsx` (node_modules/.bin/tsx bin/gateway.ts start, what `npm start` ran before),
 * `compiled` (node dist/bin/gateway.js start, needs `npm run build`), `npm start` (npm
 * itself and whatever the start script runs, prestart included). Each mode is
 * measured on an empty data dir (first start: migrations, CA, master key) and on a
 * restart (the same data dir again). Idle RSS is VmRSS from /proc/<pid>/status of the
 * process that runs the service, read BENCH_IDLE_MS after the ready line, plus the sum
 * over its process tree (tsx's CLI runs the service in a child node process).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = resolve(import.meta.dirname, '..', '..');
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 3000);

const MODES: Record<string, { cmd: string; args: string[]; entry: string }> = {
  tsx: { cmd: join(ROOT, 'node_modules', '.bin', 'tsx'), args: [join(ROOT, 'bin', 'gateway.ts'), 'start'], entry: join(ROOT, 'bin', 'gateway.ts') },
  compiled: { cmd: process.execPath, args: [join(ROOT, 'dist', 'bin', 'gateway.js'), 'start'], entry: join(ROOT, 'dist', 'bin', 'gateway.js') },
  // What a user types: npm itself, plus whatever `npm start` runs (and its prestart).
  'npm start': { cmd: 'npm', args: ['start', '--silent', '--prefix', ROOT], entry: join(ROOT, 'package.json') },
};

function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

function children(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const t of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) {
      out.push(Number(t), ...children(Number(t)));
    }
  } catch {
    /* gone */
  }
  return out;
}

interface Sample { readyMs: number; serviceRssMb: number; treeRssMb: number }

async function once(mode: string, dataDir: string): Promise<Sample> {
  const m = MODES[mode]!;
  const env = {
    ...process.env,
    API_PORT: '0',
    PROXY_PORT: '0',
    DATA_DIR: dataDir,
    DATABASE_URL: `sqlite:${join(dataDir, 'gateway.sqlite')}`,
    GATEWAY_BOOTSTRAP_API_KEY: `sk_${'ab'.repeat(20)}`,
  };
  const t0 = process.hrtime.bigint();
  // A process group of its own: tsx and npm run the service in a child process, and a
  // SIGTERM to the parent alone would leave it running.
  const child = spawn(m.cmd, m.args, { cwd: dataDir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stderr!.resume();
  const readyMs = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${mode}: no ready line`)), 30_000);
    child.once('exit', (code) => rej(new Error(`${mode}: exited ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('"msg":"ready"')) {
        clearTimeout(timer);
        res(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    });
  });
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const tree = [child.pid!, ...children(child.pid!)];
  // The service is the deepest node process of the tree (the child itself for `compiled`).
  const serviceRssMb = rssKb(tree[tree.length - 1]!) / 1024;
  const treeRssMb = tree.reduce((s, p) => s + rssKb(p), 0) / 1024;
  await new Promise<void>((r) => {
    child.removeAllListeners('exit');
    child.once('exit', () => r());
    process.kill(-child.pid!, 'SIGTERM');
  });
  return { readyMs, serviceRssMb, treeRssMb };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const modes = (process.env.BENCH_MODES ?? Object.keys(MODES).join(',')).split(',').filter((m) => MODES[m] && existsSync(MODES[m].entry));
console.log(`node ${process.version}, ${RUNS} runs each, idle RSS read ${IDLE_MS} ms after ready`);
console.log('| mode | start | ready ms (median, min-max) | service RSS MiB | tree RSS MiB |');
console.log('|---|---|---:|---:|---:|');
for (const mode of modes) {
  for (const kind of ['first start', 'restart'] as const) {
    const samples: Sample[] = [];
    for (let i = 0; i < RUNS; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'gw-start-bench-'));
      try {
        if (kind === 'restart') await once(mode, dir);
        samples.push(await once(mode, dir));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const r = samples.map((s) => s.readyMs);
    console.log(
      `| ${mode} | ${kind} | ${median(r).toFixed(0)} (${Math.min(...r).toFixed(0)}-${Math.max(...r).toFixed(0)}) | ` +
        `${median(samples.map((s) => s.serviceRssMb)).toFixed(1)} | ${median(samples.map((s) => s.treeRssMb)).toFixed(1)} |`,
    );
  }
}
