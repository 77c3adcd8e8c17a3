import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';

/**
 * The resident spawner (docs/performance.md, the section on Node's `spawn`): Node's
 * `spawn` returns only after libuv's fork(), which copies the page tables of the whole
 * service (~40 µs per MiB of its RSS on a 2-core VM: 7-9 ms at the gateway's 200-250 MiB,
 * during which no request of the proxy is served). This small Node child of the service
 * (~45 MiB) starts the driver's helper processes instead: the service writes a request on
 * its IPC channel (held by the service alone; the spawner runs as the service does and starts
 * exactly the argv and environment asked for, as `spawn` would) and gets back the helper's pid
 * and its stdio, handed over with Node's documented handle passing (libuv makes a child's
 * stdio pipes as socketpairs), then its exit. A helper's stdio never passes through the
 * spawner after that.
 */
const PROGRAM = `
const { spawn } = require('node:child_process');
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  if (!m || typeof m.id !== 'number') return;
  let c;
  try {
    c = spawn(m.file, m.args, { stdio: Array(m.n).fill('pipe'), env: m.env, detached: Boolean(m.detached) });
  } catch (e) {
    process.send({ id: m.id, error: String(e && e.message) });
    return;
  }
  if (c.pid === undefined) {
    c.once('error', (e) => process.send({ id: m.id, error: String(e && e.message) }));
    return;
  }
  c.on('error', () => {});
  // Not read here: a pipe is handed over whole (handles go one at a time, each after the
  // service's acknowledgement; a pipe read to its end meanwhile would be closed, not sent).
  for (const s of c.stdio) if (s && s._handle && s._handle.readStop) { s._handle.readStop(); s._handle.reading = false; }
  process.send({ id: m.id, pid: c.pid });
  c.stdio.forEach((s, fd) => process.send({ id: m.id, fd }, s));
  c.once('exit', (code, signal) => process.send({ id: m.id, exit: [code, signal] }));
});
`;

/** What the driver uses of a helper process: the shape of a ChildProcess with `n` stdio pipes. */
export interface Helper extends EventEmitter {
  readonly pid: number | undefined;
  readonly stdio: Array<Socket | null>;
  readonly stdin: Socket | null;
  readonly stdout: Socket | null;
  readonly stderr: Socket | null;
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
}

class RemoteHelper extends EventEmitter implements Helper {
  pid: number | undefined;
  readonly stdio: Array<Socket | null>;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  #closesNeeded: number;
  #exited = false;

  constructor(readonly n: number) {
    super();
    this.stdio = Array.from({ length: n }, () => null);
    // As ChildProcess: 'close' once it exited (1) and every stdio pipe but stdin closed (n - 1).
    this.#closesNeeded = n;
  }

  get stdin(): Socket | null {
    return this.stdio[0] ?? null;
  }
  get stdout(): Socket | null {
    return this.stdio[1] ?? null;
  }
  get stderr(): Socket | null {
    return this.stdio[2] ?? null;
  }

  attach(fd: number, socket: Socket): void {
    this.stdio[fd] = socket;
    if (fd > 0) socket.once('close', () => this.#closed());
  }

  exited(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#exited) return;
    this.#exited = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.emit('exit', code, signal);
    this.#closed();
  }

  #closed(): void {
    if (--this.#closesNeeded === 0) this.emit('close', this.exitCode, this.signalCode);
  }
}

/** What the spawner says of a helper: its pid, one of its pipes (with the socket), its exit, or why it could not start. */
interface SpawnerMessage {
  id: number;
  pid?: number;
  fd?: number;
  exit?: [number | null, NodeJS.Signals | null];
  error?: string;
}

interface Pending {
  helper: RemoteHelper;
  resolve(h: Helper): void;
  reject(err: Error): void;
  handles: number;
}

export class Spawner {
  #proc: ChildProcess | null = null;
  #seq = 0;
  readonly #starting = new Map<number, Pending>();
  readonly #running = new Map<number, RemoteHelper>();
  #closed = false;

  constructor(private readonly env: Record<string, string>) {}

  /** Starts a helper with `n` stdio pipes; resolves once its pid and every pipe are here. */
  spawn(file: string, args: string[], opts: { n: number; env: Record<string, string>; detached?: boolean }): Promise<Helper> {
    const proc = this.#ensure();
    const id = ++this.#seq;
    const helper = new RemoteHelper(opts.n);
    return new Promise<Helper>((resolve, reject) => {
      this.#starting.set(id, { helper, resolve, reject, handles: 0 });
      proc.send({ id, file, args, n: opts.n, env: opts.env, detached: Boolean(opts.detached) }, (err) => {
        if (err) this.#fail(id, err);
      });
    });
  }

  /**
   * Ends the spawner (its helpers are not touched: each ends on its own, or by its owner).
   * What it was still starting fails now, and the spawner process is killed, not only
   * disconnected: one that was handing over a pipe when its channel closed waits for the
   * acknowledgement forever (Node postpones a disconnect until the handles queued are sent),
   * so it would neither exit nor report, and a spawn in flight (a driver closing while a
   * slot starts) would never settle. Its exit then reports its helpers ended, as any end of
   * the spawner does.
   */
  close(): void {
    this.#closed = true;
    const proc = this.#proc;
    this.#proc = null;
    for (const id of [...this.#starting.keys()]) this.#fail(id, new Error('the spawner is closed'));
    if (proc) {
      if (proc.connected) proc.disconnect();
      proc.kill('SIGKILL');
    }
  }

  #ensure(): ChildProcess {
    if (this.#closed) throw new Error('the spawner is closed');
    if (this.#proc) return this.#proc;
    const proc = spawn(process.execPath, ['-e', PROGRAM], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: this.env });
    proc.on('error', () => {});
    // It never keeps the service up: it ends when the service's end closes its channel.
    proc.unref();
    proc.channel?.unref();
    proc.on('message', (m: SpawnerMessage, socket?: Socket) => this.#message(m, socket));
    proc.once('exit', () => {
      if (this.#proc === proc) this.#proc = null;
      // What it was starting failed. What it started may go on, but its exit will not be
      // heard: its pipes are closed (a launcher still waiting for its payload ends on that)
      // and it is reported ended with no code, so no caller waits forever. No signal is sent:
      // its pid may already be another process's.
      for (const id of [...this.#starting.keys()]) this.#fail(id, new Error('the spawner ended'));
      for (const [id, h] of this.#running) {
        this.#running.delete(id);
        for (const sock of h.stdio) sock?.destroy();
        h.exited(null, null);
      }
    });
    this.#proc = proc;
    return proc;
  }

  #message(m: SpawnerMessage, socket?: Socket): void {
    const p = this.#starting.get(m.id);
    if (m.error !== undefined) return this.#fail(m.id, new Error(m.error));
    if (m.pid !== undefined && p) {
      p.helper.pid = m.pid;
      return;
    }
    if (m.fd !== undefined && p && socket) {
      p.helper.attach(m.fd, socket);
      if (++p.handles === p.helper.n) {
        this.#starting.delete(m.id);
        this.#running.set(m.id, p.helper);
        p.resolve(p.helper);
      }
      return;
    }
    if (m.exit) {
      const h = p?.helper ?? this.#running.get(m.id);
      this.#running.delete(m.id);
      h?.exited(m.exit[0], m.exit[1]);
    }
  }

  #fail(id: number, err: Error): void {
    const p = this.#starting.get(id);
    if (!p) return;
    this.#starting.delete(id);
    // Its pipes that arrived are closed: a launcher waiting for its payload ends on that.
    for (const s of p.helper.stdio) s?.destroy();
    p.reject(err);
  }
}
