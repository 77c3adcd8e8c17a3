/**
 * The benchmark's process plumbing. Every server under test (the upstream, raw
 * http-mitm-proxy, our gateway) runs in a child process of its own, so the CPU time it
 * reports (process.cpuUsage(), asked for over IPC around each measured window) is its own
 * and nothing else's: the load generator, the upstream and the proxy share two cores.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export interface ProcStats {
  /** process.cpuUsage() of the child: user + system, microseconds. */
  cpuUs: number;
  rss: number;
  heapUsed: number;
}

type Handler = (arg: any) => unknown;

/** Child side: answers `{id, cmd, arg}` messages with `{id, ok, value|error}`. `stats` is built in. */
export function serveIpc(handlers: Record<string, Handler>): void {
  const all: Record<string, Handler> = {
    stats: (): ProcStats => {
      const c = process.cpuUsage();
      const m = process.memoryUsage();
      return { cpuUs: c.user + c.system, rss: m.rss, heapUsed: m.heapUsed };
    },
    ...handlers,
  };
  process.on('message', (msg: { id: number; cmd: string; arg?: unknown }) => {
    const h = all[msg.cmd];
    Promise.resolve()
      .then(() => {
        if (!h) throw new Error(`unknown command ${msg.cmd}`);
        return h(msg.arg);
      })
      .then(
        (value) => process.send!({ id: msg.id, ok: true, value }),
        (err: unknown) => process.send!({ id: msg.id, ok: false, error: err instanceof Error ? err.stack ?? err.message : String(err) }),
      );
  });
  // The parent went away (Ctrl-C, crash): do not linger.
  process.on('disconnect', () => process.exit(0));
}

/** Child side: tells the parent it is up, with whatever it needs to know. */
export function ready(info: Record<string, unknown>): void {
  process.send!({ ready: true, info });
}

export interface Child<I = Record<string, any>> {
  name: string;
  pid: number;
  info: I;
  logFile: string;
  call<T = unknown>(cmd: string, arg?: unknown): Promise<T>;
  stats(): Promise<ProcStats>;
  /** Asks the child to exit (so --cpu-prof writes its profile) and waits; kills it after timeoutMs. */
  stop(timeoutMs?: number): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Starts `<root>/bench/gateway/<file>` (root: this checkout) under node + tsx with stdout/stderr to `logFile`, and waits
 * for its ready message (at most readyTimeoutMs).
 */
export async function startChild<I = Record<string, any>>(
  name: string,
  file: string,
  opts: { env?: Record<string, string>; nodeArgs?: string[]; logFile: string; readyTimeoutMs?: number; root?: string; compiled?: boolean },
): Promise<Child<I>> {
  const fd = openSync(opts.logFile, 'a');
  const root = opts.root ?? path.resolve(here, '..', '..');
  // Compiled (what `npm start` runs: dist/, no tsx and its per-closure __name wrappers) when
  // asked for and built in that checkout; else the sources under tsx.
  const built = path.join(root, 'dist', 'bench', 'gateway', file.replace(/\.ts$/, '.js'));
  const entry = opts.compiled && existsSync(built) ? [built] : ['--import', 'tsx', path.join(root, 'bench', 'gateway', file)];
  const proc: ChildProcess = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...entry], {
    cwd: root,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', fd, fd, 'ipc'],
  });
  closeSync(fd);
  let nextId = 1;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let exited = false;
  const exitedP = new Promise<void>((resolve) => proc.once('exit', () => {
    exited = true;
    for (const p of pending.values()) p.reject(new Error(`${name} exited`));
    pending.clear();
    resolve();
  }));
  const info = await new Promise<I>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${opts.readyTimeoutMs ?? 60_000} ms (see ${opts.logFile})`)), opts.readyTimeoutMs ?? 60_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before it was ready (see ${opts.logFile})`));
    });
    proc.on('message', (m: any) => {
      if (m?.ready) {
        clearTimeout(timer);
        resolve(m.info as I);
        return;
      }
      const p = pending.get(m?.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(new Error(`${name}: ${m.error}`));
    });
  });
  const call = <T>(cmd: string, arg?: unknown): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error(`${name} exited`));
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      proc.send({ id, cmd, arg });
    });
  return {
    name,
    pid: proc.pid!,
    info,
    logFile: opts.logFile,
    call,
    stats: () => call<ProcStats>('stats'),
    async stop(timeoutMs = 20_000) {
      if (exited) return;
      call('exit').catch(() => undefined);
      const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      await exitedP;
      clearTimeout(t);
    },
  };
}
