import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
export const GATEWAY = join(ROOT, 'bin', 'gateway.ts');

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

/** SIGKILL to a detached child's whole process group (tsx and the service, as a crash would take them). */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

/**
 * Starts `gateway start` exactly as `npm start` does (`tsx bin/gateway.ts start`) with the
 * given environment on top of this process's, and resolves once it logged its ready line.
 */
export function startChildService(env: Record<string, string>, opts: { cwd?: string; timeoutMs?: number; detached?: boolean; command?: 'start' | 'host' } = {}): Promise<ChildService> {
  // detached: a process group of its own, for killGroup (tsx runs the service in a child node process).
  // `gateway host` serves /healthz and /readyz on 8082 by default: a free port here, unless the test chose one.
  const defaults = opts.command === 'host' ? { GATEWAY_HEALTH_PORT: '0' } : {};
  const child = spawn(TSX, [GATEWAY, opts.command ?? 'start'], { cwd: opts.cwd ?? ROOT, env: { ...defaults, ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
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
