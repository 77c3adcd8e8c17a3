import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

let built: string | null = null;

/**
 * `gateway` as `npm start` runs it: dist/bin/gateway.js, built first when dist/ is missing or
 * older than a source (bin/build-if-stale.mjs, once per test process). The tests' service
 * and CLI processes run it with node: each of them started through tsx spent ~1.1 s more
 * compiling the sources (2.0 against 0.9 s for `keys list`, ~40 processes per run).
 */
export function gatewayJs(): string {
  if (!built) {
    const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'build-if-stale.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
    if (r.status !== 0) throw new Error(`could not build dist/: ${r.stderr || r.error?.message}`);
    built = join(ROOT, 'dist', 'bin', 'gateway.js');
  }
  return built;
}

export interface ChildService {
  child: ChildProcess;
  /** The parsed ready line: `{msg: 'ready', api_url, proxy_url, base_url}`. */
  ready: { api_url: string; proxy_url: string; base_url: string; [k: string]: unknown };
  /** Every line the process wrote so far (stdout lines and stderr chunks). */
  lines: string[];
  /** SIGTERM, resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Resolves with the exit code once the process exits. */
  exited: Promise<number | null>;
}

/** SIGKILL to a detached child's whole process group (the service and what it started, as a crash would take them). */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

/**
 * Starts `gateway start` (or `host`) as `npm start` does (node dist/bin/gateway.js, built
 * when stale) with the given environment on top of this process's, and resolves once it
 * logged its ready line.
 */
export function startChildService(env: Record<string, string>, opts: { cwd?: string; timeoutMs?: number; detached?: boolean; command?: 'start' | 'host' } = {}): Promise<ChildService> {
  // detached: a process group of its own, for killGroup (the service and whatever it started).
  // `gateway host` serves /healthz and /readyz on 8082 by default: a free port here, unless the test chose one.
  const defaults = opts.command === 'host' ? { GATEWAY_HEALTH_PORT: '0' } : {};
  const child = spawn(process.execPath, [gatewayJs(), opts.command ?? 'start'], { cwd: opts.cwd ?? ROOT, env: { ...defaults, ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
  const lines: string[] = [];
  let exited: number | null | undefined;
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r((exited = code))));
  const stop = async () => {
    if (exited === undefined) child.kill('SIGTERM');
    return exit;
  };
  return new Promise((res, rej) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      rej(new Error(`no ready line: ${lines.join('\n')}`));
    }, opts.timeoutMs ?? 20000);
    void exit.then((code) => {
      clearTimeout(timer);
      rej(new Error(`exited ${code} before ready: ${lines.join('\n')}`));
    });
    // Keep reading stdout for the life of the process, or a full pipe would block its logging.
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      let rec: { msg?: string } | null = null;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      if (rec?.msg === 'ready') {
        clearTimeout(timer);
        res({ child, ready: rec as ChildService['ready'], lines, stop, exited: exit });
      }
    });
    child.stderr!.on('data', (d) => lines.push(String(d)));
  });
}
