/**
 * What the benches of issue 29 share: `gateway start` as a child process on a temp DATA_DIR
 * and SQLite, as `npm start` runs it (tsx), optionally with bench/traced-gateway.ts in front
 * (BENCH_TRACE=1: a timeline of helpers, SQL and driver calls), and small statistics.
 * Never imported by the service or the tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';

export const ROOT = resolve(import.meta.dirname, '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

export interface Gateway {
  apiUrl: string;
  hostId: string | null;
  key: string;
  dataDir: string;
  /** Where the traced child writes its timeline (BENCH_TRACE=1), else null. */
  traceFile: string | null;
  child: ChildProcess;
  lines: string[];
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** SIGTERM, waits for the exit (SIGKILL to the group after 20 s), removes the data dir. */
  stop(): Promise<void>;
}

export async function startGateway(extra: Record<string, string> = {}): Promise<Gateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-bench-felt-'));
  const key = `sk_${randomBytes(20).toString('hex')}`;
  const traced = process.env.BENCH_TRACE === '1';
  const traceFile = traced ? join(dataDir, 'trace.jsonl') : null;
  const entry = traced ? join(ROOT, 'bench', 'traced-gateway.ts') : join(ROOT, 'bin', 'gateway.ts');
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATA_DIR: dataDir, DATABASE_URL: `sqlite:${join(dataDir, 'gateway.sqlite')}`, API_PORT: '0', PROXY_PORT: '0', GATEWAY_HEALTH_PORT: '0',
    GATEWAY_RUNTIME: 'process', GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'info',
    ...(traceFile ? { BENCH_TRACE_FILE: traceFile } : {}),
    ...extra,
  };
  // A process group of its own: tsx runs the service in a child node process. BENCH_NODE_ARGS:
  // node flags for it (--trace-gc, --cpu-prof; NODE_OPTIONS refuses some).
  const child = spawn(TSX, [...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []), entry, 'start'], { cwd: dataDir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const lines: string[] = [];
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const ready = await new Promise<Record<string, any>>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no ready line:\n${lines.join('\n')}`)), 60_000);
    void exited.then(() => rej(new Error(`exited before ready:\n${lines.join('\n')}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (lines.length < 5000) lines.push(line);
      if (line.includes('"msg":"ready"')) {
        clearTimeout(timer);
        res(JSON.parse(line));
      }
    });
    child.stderr!.on('data', (d) => lines.push(String(d)));
  });
  const apiUrl = String(ready.api_url);
  const headers = { authorization: `Bearer ${key}` };
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${apiUrl}${path}`, {
      method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch { /* as text */ }
    return { status: r.status, body: parsed as any };
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch { /* gone */ }
      }, 20_000);
      await exited;
      clearTimeout(t);
    }
    // tsx's child (the service) ends with tsx; anything of the group left is killed.
    try {
      process.kill(-child.pid!, 0);
      await new Promise((r) => setTimeout(r, 500));
      process.kill(-child.pid!, 'SIGKILL');
    } catch { /* the group is gone */ }
    if (!process.env.BENCH_KEEP) rmSync(dataDir, { recursive: true, force: true });
  };
  return { apiUrl, hostId: ready.host_id ?? null, key, dataDir, traceFile, child, lines, api, stop };
}

/** Nearest-rank percentile. */
export function pct(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export const ms = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-').padStart(7);

export function loadavg(): string {
  return readFileSync('/proc/loadavg', 'utf8').trim();
}

/** Epoch milliseconds with sub-millisecond precision (comparable with the traced child's). */
export const wall = (): number => performance.timeOrigin + performance.now();

export function readTrace(file: string | null): Array<Record<string, any>> {
  if (!file || !existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** PSS and USS (KiB) of the processes whose real uid is `uid` (an environment's or its browser's host uid). */
export function pssOfUid(uid: number): { kb: number; ussKb: number; procs: number } {
  let kb = 0;
  let ussKb = 0;
  let procs = 0;
  for (const p of readdirSafe('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const status = readFileSync(`/proc/${p}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) !== uid) continue;
      const smaps = readFileSync(`/proc/${p}/smaps_rollup`, 'utf8');
      kb += Number(/^Pss:\s+(\d+)/m.exec(smaps)?.[1] ?? 0);
      // USS: pages this process alone has (what one more such process costs at least).
      ussKb += Number(/^Private_Clean:\s+(\d+)/m.exec(smaps)?.[1] ?? 0) + Number(/^Private_Dirty:\s+(\d+)/m.exec(smaps)?.[1] ?? 0);
      procs++;
    } catch { /* gone */ }
  }
  return { kb, ussKb, procs };
}

function readdirSafe(d: string): string[] {
  try {
    return readdirSync(d);
  } catch {
    return [];
  }
}
