/**
 * `gateway start`, with a timeline of what it does, for the benches of issue 29 (never used
 * in production, never imported by the service): BENCH_TRACE_FILE=<path> npx tsx
 * bench/traced-gateway.ts start. Before the service is imported, this wraps (in its own
 * process only, nothing of the source changes):
 *
 * - child_process spawn / execFile / spawnSync: every host-side helper the service runs
 *   (mount, losetup, mkfs, the sandbox's sh → unshare → setpriv → bwrap, exec's launcher,
 *   the browser's bwrap): when it was spawned, when its first byte on fd 3 came (bwrap's
 *   info-fd: the sandbox's pid), when it exited;
 * - fs.readFileSync of /proc/<pid>/net/tcp: the driver's wait for the relay's LISTEN socket
 *   (how many polls, first and last);
 * - knex's Client#query: every SQL statement's start and end;
 * - ProcessDriver's start, exec, stats, applySurface and DiskImages' ensure, mount, grow,
 *   and the browser's startBrowserSandbox / EnvBrowser methods: start and end.
 *
 * Timestamps are epoch milliseconds with sub-millisecond precision (performance.timeOrigin
 * + performance.now()), comparable with the bench process's own. The records are written as
 * JSON lines to BENCH_TRACE_FILE every 200 ms and at exit.
 */
import cp from 'node:child_process';
import fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';

const file = process.env.BENCH_TRACE_FILE;
if (!file) throw new Error('BENCH_TRACE_FILE is required');
const now = (): number => performance.timeOrigin + performance.now();
let buf: string[] = [];
export function rec(r: Record<string, unknown>): void {
  buf.push(JSON.stringify(r));
}
const flush = (): void => {
  if (!buf.length) return;
  fs.appendFileSync(file, `${buf.join('\n')}\n`);
  buf = [];
};
setInterval(flush, 200).unref();
process.on('exit', flush);

/** A short name for a helper's command line. */
function label(cmd: string, args: readonly string[]): string {
  const all = [cmd, ...args].join(' ');
  if (all.includes('--info-fd')) return 'sandbox (sh cgroup-join → unshare → sh mount → setpriv → bwrap → relay)';
  if (all.includes('chromium')) return 'browser sandbox (sh cgroup-join → setpriv → bwrap → socat, chromium)';
  if (/perl -e/.test(all) || args.includes('-e') && cmd === '/bin/sh' && all.includes('perl')) return 'exec launcher (sh cgroup-join → perl setns → sh shim → command)';
  const base = cmd.split('/').pop()!;
  if (base === 'mount') return args.includes('tmpfs') ? 'mount tmpfs' : 'mount (the disk image, loop)';
  const sub = args.find((a) => !a.startsWith('-')) ?? '';
  return `${base}${['mount', 'umount', 'losetup'].includes(base) && args[0] ? ` ${args[0]}` : ''}${base === 'sh' ? ` ${sub.slice(0, 30)}` : ''}`;
}

const origSpawn = cp.spawn;
const origExecFile = cp.execFile;
const origSpawnSync = cp.spawnSync;
(cp as any).spawn = function spawn(cmd: string, args: any, opts: any) {
  const t0 = now();
  const child = (origSpawn as any).call(cp, cmd, args, opts);
  const r: Record<string, unknown> = { k: 'spawn', what: label(cmd, Array.isArray(args) ? args : []), t0, pid: child.pid };
  const fd3 = child.stdio?.[3];
  if (fd3 && typeof fd3.once === 'function' && r.what !== 'exec launcher (sh cgroup-join → perl setns → sh shim → command)') {
    fd3.once('data', () => { r.fd3 = now(); });
  }
  child.once('exit', () => { r.exit = now(); });
  child.once('close', () => { r.close = now(); rec(r); });
  return child;
};
(cp as any).execFile = function execFile(cmd: string, args: any, opts: any, cb: any) {
  const t0 = now();
  const callback = typeof opts === 'function' ? opts : cb;
  const wrapped = (...a: unknown[]) => {
    rec({ k: 'spawn', what: label(cmd, Array.isArray(args) ? args : []), t0, close: now() });
    return callback?.(...a);
  };
  return typeof opts === 'function' ? (origExecFile as any).call(cp, cmd, args, wrapped) : (origExecFile as any).call(cp, cmd, args, opts, wrapped);
};
(cp as any).spawnSync = function spawnSync(cmd: string, args: any, opts: any) {
  const t0 = now();
  const r = (origSpawnSync as any).call(cp, cmd, args, opts);
  rec({ k: 'spawn', what: `${label(cmd, Array.isArray(args) ? args : [])} (sync)`, t0, close: now() });
  return r;
};
const origRead = fs.readFileSync;
const polls = new Map<string, { first: number; last: number; n: number }>();
(fs as any).readFileSync = function readFileSync(path: any, ...rest: any[]) {
  if (typeof path === 'string' && /^\/proc\/\d+\/net\/tcp$/.test(path)) {
    const t = now();
    const p = polls.get(path) ?? { first: t, last: t, n: 0 };
    p.last = t;
    p.n++;
    polls.set(path, p);
    try {
      const out = (origRead as any).call(fs, path, ...rest);
      if (/:0C38 [^\n]* 0A /.test(String(out))) {
        rec({ k: 'relay-poll', path, first: p.first, last: now(), n: p.n });
        polls.delete(path);
      }
      return out;
    } catch (err) {
      throw err;
    }
  }
  return (origRead as any).call(fs, path, ...rest);
};
syncBuiltinESMExports();

// knex: every statement.
const require = createRequire(import.meta.url);
const Client = require('knex/lib/client.js');
const origQuery = Client.prototype.query;
Client.prototype.query = async function query(this: unknown, conn: unknown, q: any) {
  const t0 = now();
  try {
    return await origQuery.call(this, conn, q);
  } finally {
    const sql = typeof q === 'string' ? q : String(q?.sql ?? '');
    rec({ k: 'sql', sql: sql.replace(/\s+/g, ' ').slice(0, 90), t0, t1: now() });
  }
};

/** Wraps async methods of a prototype: start and end of each call (with the first argument when it is an id). */
function wrap(proto: any, cls: string, names: string[]): void {
  for (const name of names) {
    const orig = proto[name];
    if (typeof orig !== 'function') continue;
    proto[name] = async function (this: unknown, ...args: any[]) {
      const t0 = now();
      const id = typeof args[0] === 'string' ? args[0] : args[0]?.id ?? args[0]?.environmentId;
      try {
        return await orig.apply(this, args);
      } finally {
        rec({ k: 'call', what: `${cls}.${name}`, id, t0, t1: now() });
      }
    };
  }
}
const { ProcessDriver } = await import('../hosts/drivers/process.js');
wrap(ProcessDriver.prototype, 'driver', ['start', 'exec', 'stats', 'applySurface', 'create']);
const { DiskImages } = await import('../hosts/drivers/disk-image.js');
wrap(DiskImages.prototype, 'disk', ['ensure', 'mount', 'grow', 'attach', 'fsSize', 'release']);
const { EnvBrowser } = await import('../browser/env-browser.js');
wrap(EnvBrowser.prototype, 'envBrowser', ['openContext', 'closeContext']);
// Static: called once the sandboxed Chromium answered Browser.getVersion (target discovery follows).
wrap(EnvBrowser, 'EnvBrowser', ['start']);
const { ChromiumBroker } = await import('../browser/chromium-broker.js');
wrap(ChromiumBroker.prototype, 'broker', ['open', 'close']);

await import('../bin/gateway.js');
