import { connect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { DriverError, type ExecRequest, type ExecResult } from '../driver.js';
import { OutputCollector } from './inside.js';

/**
 * The host's end of the in-guest agent's virtio-serial port (qemu-guest/agent.c), and a
 * minimal QMP client. Frames: u32 payload length (LE), u8 type, u32 id (LE), payload.
 */
export const M = {
  EXEC: 1, KILL: 2, SETTIME: 3, SEED: 4, PING: 5, SYNC: 6, SURFACE: 7, CDATA: 8, CCLOSE: 9,
  READY: 64, STDOUT: 65, STDERR: 66, EXIT: 67, ERROR: 68, PONG: 69, ACK: 70,
  COPEN: 71, CDATA_UP: 72, CCLOSE_UP: 73,
} as const;

const SIGNALS: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 13: 'SIGPIPE', 14: 'SIGALRM', 15: 'SIGTERM' };

interface Pending {
  onFrame(type: number, payload: Buffer): boolean; // true: done
  fail(err: Error): void;
}

/** Connects to a Unix socket QEMU serves, retrying while QEMU creates it. */
export async function connectUnix(path: string, timeoutMs: number, alive: () => boolean): Promise<Socket> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(path);
        s.once('connect', () => {
          s.off('error', reject);
          resolve(s);
        });
        s.once('error', reject);
      });
    } catch (err) {
      if (!alive()) throw new DriverError('start_failed', 'QEMU exited before it served its sockets');
      if (performance.now() > deadline) throw new DriverError('start_failed', `QEMU did not serve ${path.split('/').pop()} in time: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * One connection to the guest's /run/service/control.sock, bridged over the agent's port:
 * a stream the control socket's HTTP server takes as a socket.
 */
export class ControlConnection extends Duplex {
  constructor(private readonly channel: GuestChannel, readonly id: number) {
    super({ allowHalfOpen: false });
  }

  override _read(): void {}

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    try {
      this.channel.send(M.CDATA, this.id, chunk);
      cb();
    } catch (err) {
      cb(err as Error);
    }
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.#close();
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.#close();
    cb(err);
  }

  #closed = false;
  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.channel.controls.delete(this.id);
    try {
      this.channel.send(M.CCLOSE, this.id);
    } catch { /* the channel is gone */ }
  }

  /** What node's HTTP server calls on a socket. */
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
}

export class GuestChannel {
  /** Open control-socket connections by id. */
  readonly controls = new Map<number, ControlConnection>();
  /** Given each new connection to the guest's control socket. */
  onControl: ((conn: ControlConnection) => void) | null = null;

  #buf: Buffer = Buffer.alloc(0);
  #seq = 1;
  readonly #pending = new Map<number, Pending>();
  #closed: Error | null = null;
  #ready: Array<() => void> = [];
  readyCount = 0;

  constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => this.#data(d));
    const end = () => this.#fail(new DriverError('guest_unavailable', 'the connection to the VM\'s agent closed'));
    socket.on('close', end);
    socket.on('error', end);
  }

  #fail(err: Error): void {
    if (this.#closed) return;
    this.#closed = err;
    for (const p of this.#pending.values()) p.fail(err);
    this.#pending.clear();
    for (const c of this.controls.values()) c.destroy();
    this.controls.clear();
  }

  close(): void {
    this.#fail(new DriverError('guest_unavailable', 'the VM is going away'));
    this.socket.destroy();
  }

  #data(d: Buffer): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
    while (this.#buf.length >= 9) {
      const len = this.#buf.readUInt32LE(0);
      if (this.#buf.length < 9 + len) break;
      const type = this.#buf[4]!;
      const id = this.#buf.readUInt32LE(5);
      const payload = this.#buf.subarray(9, 9 + len);
      this.#buf = this.#buf.subarray(9 + len);
      if (type === M.COPEN) {
        const conn = new ControlConnection(this, id);
        this.controls.set(id, conn);
        if (this.onControl) this.onControl(conn);
        else conn.destroy();
        continue;
      }
      if (type === M.CDATA_UP) {
        this.controls.get(id)?.push(Buffer.from(payload));
        continue;
      }
      if (type === M.CCLOSE_UP) {
        const conn = this.controls.get(id);
        this.controls.delete(id);
        conn?.push(null);
        continue;
      }
      if (type === M.READY) {
        this.readyCount++;
        for (const r of this.#ready.splice(0)) r();
        continue;
      }
      const p = this.#pending.get(id);
      if (p && p.onFrame(type, payload)) this.#pending.delete(id);
    }
  }

  send(type: number, id: number, payload: Buffer = Buffer.alloc(0)): void {
    if (this.#closed) throw this.#closed;
    const h = Buffer.alloc(9);
    h.writeUInt32LE(payload.length, 0);
    h[4] = type;
    h.writeUInt32LE(id, 5);
    this.socket.write(payload.length ? Buffer.concat([h, payload]) : h);
  }

  /** Resolves at the agent's READY (sent once it serves, after boot). */
  waitReady(timeoutMs: number): Promise<void> {
    if (this.readyCount > 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new DriverError('start_failed', `the VM's agent did not come up within ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
      this.#ready.push(() => {
        clearTimeout(t);
        resolve();
      });
      this.socket.once('close', () => {
        clearTimeout(t);
        reject(new DriverError('start_failed', 'the VM stopped while booting'));
      });
    });
  }

  /** A request answered by ACK or PONG. */
  request(type: number, payload: Buffer = Buffer.alloc(0), timeoutMs = 10_000): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#seq++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#pending.delete(id);
        reject(new DriverError('guest_unavailable', 'the VM\'s agent did not answer'));
      }, timeoutMs);
      this.#pending.set(id, {
        onFrame: (ft) => {
          if (ft !== M.ACK && ft !== M.PONG) return false;
          clearTimeout(t);
          resolve();
          return true;
        },
        fail: (err) => {
          clearTimeout(t);
          reject(err);
        },
      });
      this.send(type, id, payload);
    });
  }

  exec(req: ExecRequest, cwd: string): Promise<ExecResult> {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#seq++;
    const stdin = req.stdin === undefined ? Buffer.alloc(0) : Buffer.isBuffer(req.stdin) ? req.stdin : Buffer.from(req.stdin, 'utf8');
    const strs = [cwd, ...req.command.map((a) => `a${a}`), ...Object.entries(req.env ?? {}).map(([k, v]) => `e${k}=${v}`)];
    if (strs.some((s) => s.includes('\0'))) return Promise.reject(new DriverError('exec_failed', 'an argument or variable holds a NUL byte'));
    const len = Buffer.alloc(4);
    len.writeUInt32LE(stdin.length, 0);
    const payload = Buffer.concat([len, stdin, Buffer.from(strs.map((s) => `${s}\0`).join(''), 'utf8')]);
    const started = performance.now();
    const out = new OutputCollector(req);
    let timedOut = false;
    return new Promise((resolve, reject) => {
      const kill = () => {
        try {
          this.send(M.KILL, id);
        } catch { /* gone */ }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, req.timeoutMs);
      req.signal?.addEventListener('abort', kill);
      const done = () => {
        clearTimeout(timer);
        req.signal?.removeEventListener('abort', kill);
      };
      this.#pending.set(id, {
        onFrame: (type, p) => {
          if (type === M.STDOUT || type === M.STDERR) {
            out.add(type === M.STDOUT ? 'stdout' : 'stderr', Buffer.from(p));
            return false;
          }
          if (type === M.ERROR) {
            done();
            const kind = p.toString('utf8');
            if (kind === 'notfound') reject(new DriverError('exec_failed', `command not found in the environment: ${req.command[0]}`));
            else if (kind === 'cwd') reject(new DriverError('exec_failed', `cwd does not exist in the environment: ${cwd}`));
            else reject(new DriverError('exec_failed', `the command could not be started (${kind})`));
            return true;
          }
          if (type === M.EXIT) {
            done();
            const code = p.readInt32LE(0);
            const sig = p.readInt32LE(4);
            resolve(out.result(sig ? null : code, sig ? (SIGNALS[sig] ?? `SIG${sig}`) : null, started, timedOut));
            return true;
          }
          return false;
        },
        fail: (err) => {
          done();
          reject(err);
        },
      });
      this.send(M.EXEC, id, payload);
    });
  }
}

/** QMP over a Unix socket: one command at a time, events ignored. */
export class Qmp {
  #buf = '';
  #waiters: Array<(msg: Record<string, unknown>) => void> = [];
  #chain: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.#buf += d;
      let i: number;
      while ((i = this.#buf.indexOf('\n')) !== -1) {
        const line = this.#buf.slice(0, i).trim();
        this.#buf = this.#buf.slice(i + 1);
        if (!line) continue;
        let msg: Record<string, unknown>;
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if ('event' in msg) continue;
        this.#waiters.shift()?.(msg);
      }
    });
    socket.on('close', () => {
      this.#closed = true;
      for (const w of this.#waiters.splice(0)) w({ error: { desc: 'QMP connection closed' } });
    });
    socket.on('error', () => {});
  }

  static async open(socket: Socket): Promise<Qmp> {
    const q = new Qmp(socket);
    await q.#next(); // greeting
    await q.cmd('qmp_capabilities');
    return q;
  }

  #next(): Promise<Record<string, unknown>> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  cmd(execute: string, args?: Record<string, unknown>): Promise<Record<string, unknown>> {
    const run = async () => {
      // QEMU gone: no answer will ever come.
      if (this.#closed) throw new DriverError('guest_unavailable', `QMP ${execute}: QEMU is gone`);
      const answer = this.#next();
      this.socket.write(`${JSON.stringify(args ? { execute, arguments: args } : { execute })}\n`);
      const msg = await answer;
      if (msg.error) throw new DriverError('guest_unavailable', `QMP ${execute}: ${(msg.error as { desc?: string }).desc ?? 'failed'}`);
      return (msg.return ?? {}) as Record<string, unknown>;
    };
    const p = this.#chain.then(run, run);
    this.#chain = p.catch(() => {});
    return p;
  }

  close(): void {
    this.socket.destroy();
  }
}
