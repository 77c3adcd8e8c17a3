import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, openSync, readlinkSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type IncomingMessage, type RequestListener, type Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { dirname, join } from 'node:path';
import type { Logger } from '../../lib/log.js';
import { Cgroups, favorDynmods } from '../cgroups.js';
import { allocateUid, pidAlive } from '../../lib/processes.js';
import { peerOf, type Peer } from '../peer.js';
import { OutputCollector, readFileInside, writeFileInside } from './inside.js';
import { DiskImages, IMAGE_MOUNT_OPTIONS, findDiskTools, mountsUnder, run } from './disk-image.js';
import { mountAll, startMountMover, type MountMover, type MountOp } from './mounts.js';
import { ENTER_LAUNCHER, HOST_ENV, PERL, START_LAUNCHER, enterPayload } from './enter.js';
import { sandboxFilter } from './seccomp.js';
import { Spawner, type Helper } from './spawner.js';
import {
  DATA_DISK, DriverError, type ExecRequest, type ExecResult, type HostCapabilities, type HostDriver, type Surface, type VmSpec, type VmStatus,
} from '../driver.js';

/**
 * The `process` runtime (issue 12, items 2 and 3; issue 24): each environment is a process
 * tree in its own user, mount, pid, network, ipc, uts and cgroup namespaces (bubblewrap),
 * in its own cgroups (cgroups.ts), with a filesystem of its own as its data disk at
 * /home/agent.
 *
 * Sealed by construction:
 * - Network: the sandbox's network namespace has a loopback interface and nothing else,
 *   so no address outside exists for it (checked at every start from the host's view of
 *   that namespace, not assumed). Its one way out is the Unix socket
 *   /run/service/gateway.sock, which this driver serves by connecting to the gateway
 *   proxy; a relay inside (socat) listens on 127.0.0.1:3128, where HTTPS_PROXY points.
 * - Files: the sandbox's root is a fresh tmpfs (read-only once set up) holding /usr
 *   (read-only), a few named files of /etc, its own /run/service, /tmp and the data disk.
 *   Nothing it mounts is a directory of the host's filesystem under DATA_DIR: the disk is
 *   an ext4 image of its own (disk-image.ts), /run/service and the generated /etc files are
 *   per-environment tmpfs mounts the host writes into, so /proc/self/mountinfo names no
 *   host path (a bind of a host directory shows that directory's path as its root).
 * - Users: as root, each environment runs as its own unprivileged host uid (200000 +
 *   a hash of its id); even a process that left every namespace could read nothing of
 *   DATA_DIR (0700, root) nor another environment's disk (0700, its own uid). Inside, the
 *   agent is uid 1000 `agent` with no capabilities and no_new_privs.
 * - Kernel surface: no nested user namespace (bubblewrap's --disable-userns) and a seccomp
 *   filter (seccomp.ts) on every process, the sandbox's and every exec's.
 * - Variables: the sandbox starts from an empty environment; each process gets only the
 *   surface's variables (placeholders, never secret values). What a caller gives (exec
 *   `env`, configuration) is applied inside only: every host-side helper runs with a fixed
 *   environment and absolute paths (enter.ts).
 *
 * Exec enters the running sandbox's namespaces through the launcher of enter.ts, which
 * becomes the agent under the sandbox's seccomp filter, in a cgroup of its own under the
 * environment's, so a timeout kills exactly that command's tree.
 */
export interface ProcessDriverOptions {
  /** Where data disks and /run/service trees live (DATA_DIR/environments). */
  rootDir: string;
  /** GATEWAY_DISK_PREALLOCATE: data disk images take their whole size at creation (default), or are sparse (a host that knowingly overcommits). */
  preallocateDisks?: boolean;
  /** The gateway proxy this host's sandboxes reach through their socket. */
  proxy: { host: string; port: number };
  /** Tag for this host's cgroup directories. */
  hostTag: string;
  /** GATEWAY_RUNTIME_INSECURE=1: run without the parts of the isolation the machine lacks. */
  insecure: boolean;
  /** Where the cgroup trees are mounted (default /sys/fs/cgroup). */
  cgroupRoot?: string;
  /** Serves WebSocket upgrades on the environment's /run/service/browser.sock (the agent's CDP endpoints, from inside). */
  browser?: (environmentId: string) => (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Serves the environment's /run/service/control.sock (hosts/control-socket.ts). */
  control?: (environmentId: string, peer: (socket: Socket) => Promise<Peer | null>) => RequestListener;
  /**
   * What must never share a filesystem an environment can fill (the store with its audit
   * log, DATA_DIR with the CA and the master key): checked at start, said in the log and,
   * where disks could fill it, in the capabilities' `missing`.
   */
  protect?: Array<{ what: string; path: string }>;
  /**
   * GATEWAY_SANDBOX_POOL: sandboxes kept started ahead for environments' first starts (as
   * root, with image disks; default 1, 0: none). Each holds a disk of the size last asked for.
   */
  sandboxPool?: number;
  /** The disk size the pool starts with before any environment asked for one (the API's default). */
  poolDiskGib?: number;
  /** GATEWAY_CGROUP_FAVOR_DYNMODS: cgroup2 remounted with favordynmods at start (root; default true; cgroups.ts). */
  favorDynmods?: boolean;
  /** How long an enter launcher started ahead waits unused before it ends (SPARE_ENTRY_MS; tests shorten it). */
  spareLauncherMs?: number;
  /**
   * Exec launchers started by the resident spawner (spawner.ts), not by the service's own
   * spawn (which stops the service's event loop for its fork: ~40 µs per MiB of its RSS).
   * Default true; a spawner that fails falls back to the service's own spawn.
   */
  residentSpawner?: boolean;
  log: Logger;
}

/** Inside the sandbox. */
export const AGENT_HOME = DATA_DISK;
export const RELAY_PORT = 3128;
/** Inside the sandbox: the browser pool's CDP endpoints of this environment's leases. */
export const BROWSER_PORT = 9222;
const AGENT_UID = 1000;
const PIDS_MAX = 4096;
const BASE_UID = 200_000;
/** How long after a start the spare disk and the pool are refilled (#refillSoon). */
const REFILL_DELAY_MS = 100;
/** A sandbox slot's mounts, moved to the environment's directory at its claim. */
const SLOT_MOUNTS = ['disk', 'service', 'etc'];
const UID_RANGE = 800_000;

interface Vm {
  spec: VmSpec;
  proc: ChildProcess;
  /** The sandbox's first process, as the host sees it (the launcher's target). */
  initPid: number;
  /** Its first process's start time (Launched.initStart). */
  initStart: number;
  status: 'running' | 'suspended';
  bridge: Server;
  bridgeSockets: Set<Socket>;
  control: HttpServer | null;
  browser: HttpServer | null;
  /** Set while the host stops it: its exit is not news. */
  expectedExit: boolean;
  exited: Promise<void>;
  execSeq: number;
  /** The data disk's loop device (image disks only). */
  loop: string | null;
  /** The teardown, once: its exit and a stop both ask for it, and a late second unmount would hit the next start's mounts. */
  torn?: Promise<void>;
  /** Its host uid. */
  uid: number;
  /** The enter launcher its pool slot started for its first exec, waiting for the exec's payload (#startSlot). */
  spareEntry?: SpareEntry | null;
  /** The next exec's launcher while it is being started (#armEntry): an exec arriving meanwhile waits for it rather than starting its own. */
  arming?: Promise<void> | null;
}

/** An enter launcher started ahead: it waits on fd 4, outside every environment's cgroups, joining nothing until its payload. */
interface SpareEntry {
  child: Helper;
  timer: NodeJS.Timeout | null;
}

/** A first exec's launcher left unused this long ends (an environment that never execs holds no process for it). */
const SPARE_ENTRY_MS = 30_000;

/** Ends a launcher started ahead: its payload pipe closes empty, and it exits having joined nothing. */
function endEntry(spare: SpareEntry): void {
  if (spare.timer) clearTimeout(spare.timer);
  for (const stream of spare.child.stdio) stream?.destroy();
}

/** A sandbox started and its relay listening. */
interface Launched {
  proc: ChildProcess;
  initPid: number;
  /** Its first process's start time (/proc/<pid>/stat field 22): an exec enters that process only, never the pid's next holder. */
  initStart: number;
  exited: Promise<void>;
}

/** A sandbox started ahead for no environment (issue 29): claimed by one, or destroyed. */
interface Slot {
  name: string;
  dir: string;
  uid: number;
  gib: number;
  loop: string | null;
  launched: Launched;
  bridge: Server;
  bridgeSockets: Set<Socket>;
  /** Moves its three mounts to the claiming environment's directory (started with the slot: no spawn in the claim). */
  mover: MountMover;
  /** The enter launcher for the first exec of the environment that claims it (started with the slot: no spawn in that exec). */
  entry: SpareEntry;
  /** Its exit before a claim: out of the pool, destroyed. */
  onExit: () => void;
}

/** The pid of the process that started a slot (its name: `slot_<pid, 8 hex><16 random hex>`), or null: not a slot's name. */
function slotPid(name: string): number | null {
  const hex = /^slot_([0-9a-f]{8})[0-9a-f]{16}$/.exec(name)?.[1];
  return hex ? parseInt(hex, 16) : null;
}

/** The uid recorded for an environment whose sandbox was a slot (its directory's `uid`), or null. */
function recordedUid(envDir: string): number | null {
  try {
    const n = Number(readFileSync(join(envDir, 'uid'), 'utf8').trim());
    return Number.isInteger(n) && n >= BASE_UID && n < BASE_UID + UID_RANGE ? n : null;
  } catch {
    return null;
  }
}

/** The unprivileged host uid an environment runs as (root only). */
export function sandboxUid(envId: string): number {
  return BASE_UID + (createHash('sha256').update(envId).digest().readUInt32BE(0) % UID_RANGE);
}

function which(cmd: string): string | null {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']) {
    if (existsSync(join(dir, cmd))) return join(dir, cmd);
  }
  return null;
}

/** Host /etc entries the sandbox may read: what dynamic linking, TLS and tools need; no secrets. */
const ETC_READ_ONLY = [
  'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'ssl', 'ca-certificates', 'localtime',
  'nsswitch.conf', 'protocols', 'services', 'mime.types', 'os-release', 'debian_version', 'profile', 'bash.bashrc',
];

/**
 * Writes a file atomically (readers never see half of it): temp file, then rename. The temp
 * name is short whatever the file's: `<255-character name>.<pid>.tmp` passed the file system's
 * limit, and the failed write stopped every later environment's surface refresh (a fourth review).
 */
function writeAtomic(path: string, data: string | Buffer, mode: number): void {
  const tmp = join(dirname(path), `.tmp-${randomBytes(8).toString('hex')}`);
  writeFileSync(tmp, data, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, path);
}

/** `export NAME='value'` lines: values never hold a single quote (service.md, Limits). */
export function envFile(env: Record<string, string>): string {
  return Object.entries(env)
    .filter(([, v]) => !v.includes("'"))
    .map(([k, v]) => `export ${k}='${v}'\n`)
    .join('');
}

/**
 * A network namespace is sealed when, seen from the host (/proc/<pid>/net/*), it has the
 * loopback interface and no other, and no IPv4 route (the table's header line only).
 */
export function netSealed(dev: string, route: string): boolean {
  const ifaces = dev.split('\n').slice(2).map((l) => l.split(':')[0]!.trim()).filter(Boolean);
  const routes = route.split('\n').slice(1).filter((l) => l.trim());
  return ifaces.length === 1 && ifaces[0] === 'lo' && routes.length === 0;
}

/**
 * Not root (no uid of its own, no image disks): what START_LAUNCHER (enter.ts) does as root,
 * in a user namespace of the service's uid made by `unshare -U -r -m`: binds this
 * environment's directory at /mnt, for bwrap to bind from, then lets go of every
 * environment's mounts the private copy holds.
 * $1: the environment's directory; then the command.
 */
const PRIVATE_MOUNT = `/usr/bin/mount --rbind -- "$1" /mnt || exit 124; shift
/usr/bin/awk '$5 ~ /\\/(env|slot)_[0-9a-f]+\\/(disk|service|etc|disk[.]migrate)$/ { print $5 }' /proc/self/mountinfo | /usr/bin/sort -r | /usr/bin/xargs -r -d '\\n' /usr/bin/umount -l --
exec "$@"`;
const CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';

/** Per-environment tmpfs mounts the host writes into (sizes: configuration is at most 20 files of 256 KiB). */
const SERVICE_TMPFS = 'size=16m,nr_inodes=4096,mode=0755,nodev,nosuid,noexec';
const ETC_TMPFS = 'size=1m,nr_inodes=64,mode=0755,nodev,nosuid,noexec';

/**
 * Connections one environment may hold open at once on each socket of its /run/service
 * (past it a new one is closed at once): gateway.sock carries every outbound connection of
 * the agent (a browser or a crawler opens a few hundred at most); the control and browser
 * sockets far fewer.
 */
export const MAX_SOCKET_CONNECTIONS = { gateway: 1024, control: 64, browser: 64 } as const;

export class ProcessDriver implements HostDriver {
  readonly name = 'process';
  readonly #vms = new Map<string, Vm>();
  readonly #exitListeners: Array<(id: string, info: { code: number | null; signal: string | null }) => void> = [];
  readonly #cgroups: Cgroups;
  readonly #caps: HostCapabilities;
  readonly #root = process.getuid?.() === 0;
  readonly #relay: string[];
  /** The seccomp filter every process of a sandbox runs under (seccomp.ts). */
  readonly #filter = sandboxFilter();
  /** Image disks (root, with e2fsprogs and util-linux): disk_gib is enforced. */
  readonly #images: DiskImages | null;
  /** bubblewrap here takes --disable-userns and --seccomp (0.8 and later; probed). */
  #hardened = false;
  /** Sandboxes started ahead, each for one environment's first start (issue 29): ready, the one starting, how many to keep. */
  readonly #slots: Slot[] = [];
  #filling: Promise<void> | null = null;
  #refillTimer: NodeJS.Timeout | null = null;
  /** Uids of slots being started (not in #slots yet), kept from any other allocation. */
  readonly #startingSlotUids = new Set<number>();
  /** Slots a process that is gone left (a crash): killed and unmounted before any new slot starts. */
  readonly #reaped: Promise<void>;
  readonly #poolSize: number;
  #closed = false;
  #spawner: Spawner | null = null;
  /** Slot destructions (#destroySlot) and environment teardowns (#teardownOnce) under way, awaited by close(). */
  readonly #destroying = new Set<Promise<void>>();

  constructor(private readonly opts: ProcessDriverOptions) {
    mkdirSync(opts.rootDir, { recursive: true, mode: 0o700 });
    // Root's only, also when it was there before (mkdir's mode applies only to a new one):
    // each environment's directory and disk are reached through it, and nothing else guards them.
    if (process.getuid?.() === 0) chmodSync(opts.rootDir, 0o700);
    this.#cgroups = new Cgroups(opts.hostTag, opts.cgroupRoot);
    if (this.#root && opts.favorDynmods !== false && this.#cgroups.support.layout !== 'none') {
      const f = favorDynmods(opts.cgroupRoot);
      if (f.on) opts.log.info('cgroup2 has favordynmods: a process moves between cgroups without waiting for an RCU grace period');
      else opts.log.warn({ why: f.why }, 'cgroup2 without favordynmods: every start and exec waits ~10 ms for an RCU grace period when it joins its cgroups');
    }
    const missing = [...this.#cgroups.support.missing];
    const { namespaces, networkSealed } = this.#probe(missing);
    const socat = which('socat');
    // Two relays inside: the gateway proxy (127.0.0.1:3128) and the browser pool's CDP
    // endpoints of this environment's leases (127.0.0.1:9222).
    const loop = (port: number, sock: string): string => `while :; do ${socat} TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/service/${sock}; sleep 0.2; done`;
    this.#relay = socat
      ? ['/bin/sh', '-c', `exec </dev/null; (${loop(BROWSER_PORT, 'browser.sock')}) & ${loop(RELAY_PORT, 'gateway.sock')}`]
      : ['/usr/bin/node', '-e', `const n=require('net');for(const [p,s] of [[${RELAY_PORT},'gateway.sock'],[${BROWSER_PORT},'browser.sock']])n.createServer(c=>{const u=n.connect('/run/service/'+s);c.pipe(u).pipe(c);c.on('error',()=>u.destroy());u.on('error',()=>c.destroy())}).listen(p,'127.0.0.1')`];
    if (!this.#root) {
      missing.push('not running as root: every environment shares the service\'s uid (isolation between environments rests on the mount namespace alone)');
      missing.push('not running as root: disk_gib is not enforced (no loop devices) and the sandbox\'s mounts are host directories, whose paths show in its /proc/self/mountinfo');
    }
    let images: DiskImages | null = null;
    if (this.#root) {
      const tools = findDiskTools();
      if (tools.tools) images = new DiskImages(tools.tools, undefined, opts.preallocateDisks ?? true, join(opts.rootDir, '.spare'));
      else missing.push(tools.missing!);
    }
    this.#images = images;
    this.#poolSize = this.#root && images ? Math.max(0, opts.sandboxPool ?? 1) : 0;
    this.#reaped = this.#reapSlots();
    this.#checkShared(missing);
    this.#caps = {
      driver: 'process',
      network_sealed: networkSealed,
      namespaces,
      cgroup: (({ layout, memory, cpu, pids, freeze, kill }) => ({ layout, memory, cpu, pids, freeze, kill }))(this.#cgroups.support),
      memory_across_host_restart: false,
      disk_quota: images !== null,
      insecure: opts.insecure,
      missing,
    };
  }

  /**
   * Whether bubblewrap can make every namespace here, hardened (no nested user namespace,
   * the seccomp filter), and whether the network namespace it makes is really sealed:
   * a sandbox is started and its view of the network read (tried, not assumed).
   */
  #probe(missing: string[]): { namespaces: boolean; networkSealed: boolean } {
    const bwrap = which('bwrap');
    if (!bwrap) {
      missing.push('bubblewrap (bwrap) is not installed: apt-get install bubblewrap');
      return { namespaces: false, networkSealed: false };
    }
    if (!which('setpriv') || !which('unshare') || !existsSync(PERL)) {
      missing.push('setpriv and unshare (util-linux) and /usr/bin/perl (perl-base) are needed to run commands in a sandbox');
      return { namespaces: false, networkSealed: false };
    }
    const filterFile = join(this.opts.rootDir, '.probe-seccomp.bpf');
    writeFileSync(filterFile, this.#filter, { mode: 0o644 });
    const fd = openSync(filterFile, 'r');
    try {
      const attempt = (hardened: boolean) => {
        const args = [
          '--unshare-all', '--unshare-user', ...(hardened ? ['--disable-userns', '--seccomp', '4'] : []), '--die-with-parent',
          '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev',
          '--', '/bin/cat', '/proc/net/dev', '/proc/net/route',
        ];
        const cmd = this.#root ? [which('setpriv')!, '--reuid=' + BASE_UID, '--regid=' + BASE_UID, '--clear-groups', '--', bwrap, ...args] : [bwrap, ...args];
        return spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', timeout: 10_000, env: { ...HOST_ENV }, stdio: ['ignore', 'pipe', 'pipe', 'ignore', fd] });
      };
      let r = attempt(true);
      if (r.status === 0) this.#hardened = true;
      else {
        const why = (r.stderr || r.error?.message || '').trim().slice(0, 200);
        r = attempt(false);
        if (r.status === 0) missing.push(`bubblewrap cannot disable nested user namespaces or load a seccomp filter here (0.8 or later is needed): the agent can make user namespaces and reach every system call (${why})`);
      }
      if (r.status !== 0) {
        missing.push(`bubblewrap cannot create namespaces here: ${(r.stderr || r.error?.message || '').trim().slice(0, 200)}`);
        return { namespaces: false, networkSealed: false };
      }
      const [dev, route] = splitNetFiles(r.stdout);
      const sealed = netSealed(dev, route);
      if (!sealed) missing.push('the sandbox\'s network namespace has an interface other than loopback, or a route');
      return { namespaces: true, networkSealed: sealed };
    } finally {
      closeSync(fd);
      rmSync(filterFile, { force: true });
    }
  }

  /** The store, the CA and the audit log on the filesystem the environments' disks are on? */
  #checkShared(missing: string[]): void {
    let rootDev: number;
    try {
      rootDev = statSync(this.opts.rootDir).dev;
    } catch {
      return;
    }
    const shared = (this.opts.protect ?? []).filter((p) => {
      try {
        return statSync(p.path).dev === rootDev;
      } catch {
        return false;
      }
    }).map((p) => p.what);
    if (!shared.length) return;
    if (!this.#images) {
      const msg = `the environments' disks are directories on the filesystem of ${shared.join(' and ')}: an agent can fill it, and the audit log then fails closed for every environment (put GATEWAY_ENVIRONMENTS_DIR on a filesystem of its own)`;
      missing.push(msg);
      this.opts.log.warn({ shared, environments_dir: this.opts.rootDir }, msg);
    } else if (this.#images.sparse) {
      const msg = `the environments' sparse disk images share a filesystem with ${shared.join(' and ')}: together they can fill it, and the audit log then fails closed for every environment (preallocate them, or put GATEWAY_ENVIRONMENTS_DIR on a filesystem of its own)`;
      missing.push(msg);
      this.opts.log.warn({ shared, environments_dir: this.opts.rootDir }, msg);
    } else {
      // Preallocated images cannot grow into it; a new disk takes its size at creation, refused below the reserve.
      this.opts.log.info({ shared, environments_dir: this.opts.rootDir }, `the environments' disk images share a filesystem with ${shared.join(' and ')}: each is preallocated (no environment can fill it), and a new disk is refused when it would leave less than the reserve free`);
    }
  }

  capabilities(): HostCapabilities {
    if (this.#images?.sparse && !this.#caps.missing.some((m) => m.startsWith('disk images are sparse'))) {
      const msg = this.opts.preallocateDisks === false
        ? 'disk images are sparse (GATEWAY_DISK_PREALLOCATE=0): environments can together overcommit the host\'s disk'
        : 'disk images are sparse here (the filesystem does not support fallocate): environments can together overcommit the host\'s disk';
      this.#caps.missing.push(msg);
      this.opts.log.warn({ environments_dir: this.opts.rootDir }, msg);
    }
    return this.#caps;
  }

  /** The isolation this driver needs to call itself sealed. */
  isolated(): boolean {
    const c = this.#caps;
    return c.namespaces && c.cgroup.memory && c.cgroup.freeze && c.cgroup.kill;
  }

  onExit(listener: (id: string, info: { code: number | null; signal: string | null }) => void): void {
    this.#exitListeners.push(listener);
  }

  #dir(id: string): string {
    if (!/^env_[0-9a-f]{24}$/.test(id)) throw new DriverError('start_failed', 'not an environment id');
    return join(this.opts.rootDir, id);
  }

  /** The environment's host uid: recorded at a slot's claim, else hashed from its id (root); the service's otherwise. */
  #uid(id: string): number {
    if (!this.#root) return process.getuid!();
    return this.#vms.get(id)?.uid ?? recordedUid(this.#dir(id)) ?? sandboxUid(id);
  }

  /** The first start after the host's own is a first start too: the pool fills once the host runs. */
  warmUp(): void {
    if (this.#poolSize) this.#refillSoon();
  }

  /** The slots ready for a claim: their uids and disk sizes (tests, and the host's own view). */
  readySlots(): Array<{ name: string; uid: number; gib: number }> {
    return this.#slots.map((s) => ({ name: s.name, uid: s.uid, gib: s.gib }));
  }

  /** The host uid a running environment's processes run as (tests find them by it). */
  uidOf(id: string): number | null {
    return this.#vms.get(id)?.uid ?? null;
  }

  /** Host paths never reach the developer (failure_reason). */
  #scrub(message: string): string {
    return message.split(this.opts.rootDir).join('<environments>');
  }

  async create(spec: VmSpec): Promise<void> {
    const dir = this.#dir(spec.id);
    const disk = join(dir, 'disk');
    mkdirSync(disk, { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, 'service'), { recursive: true, mode: 0o755 });
    mkdirSync(join(dir, 'etc'), { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
    // A new environment (no disk yet, nothing recorded) gets a uid allocated and recorded, so
    // no two environments of this host share one; one with a disk keeps the uid its files
    // have (recorded, or hashed from its id as before uids were recorded).
    if (this.#root && !existsSync(join(dir, 'disk.img')) && recordedUid(dir) === null && readdirSync(disk).length === 0) {
      writeAtomic(join(dir, 'uid'), `${this.#allocateUid()}\n`, 0o644);
    }
    if (this.#images) {
      try {
        await this.#migrate(spec, await this.#images.ensure(join(dir, 'disk.img'), spec.diskGib, this.#uid(spec.id)));
      } catch (err) {
        throw new DriverError('start_failed', this.#scrub((err as Error).message));
      }
      return;
    }
    chmodSync(disk, 0o700);
    if (this.#root) chownSync(disk, this.#uid(spec.id), this.#uid(spec.id));
  }

  /**
   * A disk made before disks were images (a directory with the agent's files): its files
   * move into the new image once. If they do not fit, the image is removed and the
   * environment does not start (the directory is kept as it was).
   */
  async #migrate(spec: VmSpec, created: boolean): Promise<void> {
    const dir = this.#dir(spec.id);
    const disk = join(dir, 'disk');
    if (!created || mountsUnder(dir).includes(disk) || readdirSync(disk).length === 0) return;
    const stage = join(dir, 'disk.migrate');
    mkdirSync(stage, { recursive: true, mode: 0o700 });
    const img = join(dir, 'disk.img');
    await this.#images!.mount(img, stage);
    const cp = await run('/usr/bin/cp', ['-a', '--', `${disk}/.`, `${stage}/`], 600_000);
    await this.#images!.release(img, [stage]);
    rmSync(stage, { recursive: true, force: true });
    if (cp.code !== 0) {
      rmSync(img, { force: true });
      throw new Error(`the disk's files do not fit in ${spec.diskGib} GiB: ${cp.stderr.trim().slice(0, 200)}`);
    }
    for (const name of readdirSync(disk)) rmSync(join(disk, name), { recursive: true, force: true });
    this.opts.log.info({ environment_id: spec.id }, 'data disk moved from a directory into its image');
  }

  /**
   * Mounts what the sandbox binds: the data disk's image (grown to disk_gib when that grew)
   * and fresh tmpfs for /run/service and the generated /etc files. Not root: directories.
   */
  async #mountAll(spec: VmSpec): Promise<string | null> {
    const dir = this.#dir(spec.id);
    if (!this.#root) {
      mkdirSync(join(dir, 'service', 'files'), { recursive: true, mode: 0o755 });
      mkdirSync(join(dir, 'service', 'connections'), { recursive: true, mode: 0o755 });
      chmodSync(join(dir, 'service'), 0o755);
      return null;
    }
    // Whatever a previous run left mounted here goes first (a crash; the stale tmpfs).
    for (const m of mountsUnder(dir)) await run('/usr/bin/umount', ['-l', '--', m]);
    const img = this.#images ? join(dir, 'disk.img') : null;
    // Grown before it is mounted: offline, which needs no more than root.
    if (img) await this.#grow(spec, img, null);
    return this.#mountInto(dir, img);
  }

  /** The two tmpfs and the image (when disks are images) mounted under `dir`, in one helper process (mounts.ts); the loop device. */
  async #mountInto(dir: string, img: string | null): Promise<string | null> {
    const tmpfs: MountOp[] = [
      { kind: 'tmpfs', source: 'service', at: join(dir, 'service'), options: SERVICE_TMPFS },
      { kind: 'tmpfs', source: 'etc', at: join(dir, 'etc'), options: ETC_TMPFS },
    ];
    let loop: string | null = null;
    if (!img || !this.#images) await mountAll(tmpfs);
    else {
      const disk = join(dir, 'disk');
      const device = await this.#images.boundDevice(img);
      try {
        loop = await mountAll([...tmpfs, { kind: 'image', img, at: disk, options: IMAGE_MOUNT_OPTIONS, device }]);
        this.#images.mounted(img, disk);
      } catch (err) {
        // The device reused went away in between: the tmpfs are mounted, the disk is attached afresh.
        if (!device || !(err as Error).message.startsWith(`mount ${device}`)) throw err;
        loop = await this.#images.mount(img, disk);
      }
    }
    mkdirSync(join(dir, 'service', 'files'), { mode: 0o755 });
    mkdirSync(join(dir, 'service', 'connections'), { mode: 0o755 });
    return loop;
  }

  async #grow(spec: VmSpec, img: string, loop: string | null): Promise<void> {
    const r = await this.#images!.grow(img, loop, spec.diskGib);
    if (r === 'grown') this.opts.log.info({ environment_id: spec.id, disk_gib: spec.diskGib }, 'data disk grown');
    if (r === 'deferred') this.opts.log.warn({ environment_id: spec.id, disk_gib: spec.diskGib }, 'the data disk could not be grown while it runs (the host\'s root lacks CAP_SYS_RESOURCE): it grows at its next start');
    if (r === 'busy') this.opts.log.warn({ environment_id: spec.id, disk_gib: spec.diskGib }, 'the data disk is still held by its previous run (a loop device not yet let go): it grows at a later start');
    if (r === 'refused') {
      this.opts.log.warn({ environment_id: spec.id, disk_gib: spec.diskGib, disk_bytes: this.#images!.size(img) }, 'disk_gib is below the disk\'s size: a disk is never shrunk (its data could not be kept safely); it keeps its size');
    }
  }

  /** Unmounts what #mountAll mounted (lazily: a closing socket may hold it a moment) and lets go of the loop device. */
  async #unmountAll(id: string): Promise<void> {
    const dir = this.#dir(id);
    const mounted = mountsUnder(dir);
    if (this.#images) await this.#images.release(join(dir, 'disk.img'), mounted);
    else for (const m of mounted) await run('/usr/bin/umount', ['-l', '--', m]);
  }

  #writeEtc(dir: string): void {
    const etc = join(dir, 'etc');
    writeAtomic(join(etc, 'passwd'), `root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:${AGENT_UID}:${AGENT_UID}:agent:${AGENT_HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`, 0o644);
    writeAtomic(join(etc, 'group'), `root:x:0:\nagent:x:${AGENT_UID}:\nnogroup:x:65534:\n`, 0o644);
    writeAtomic(join(etc, 'hosts'), '127.0.0.1 localhost\n::1 localhost\n', 0o644);
    writeAtomic(join(etc, 'hostname'), 'env\n', 0o644);
    // No resolver: names are resolved by the gateway, never inside.
    writeAtomic(join(etc, 'resolv.conf'), '', 0o644);
  }

  async applySurface(id: string, s: Surface): Promise<void> {
    await this.#writeSurface(join(this.#dir(id), 'service'), s);
  }

  async #writeSurface(service: string, s: Surface): Promise<void> {
    if (!existsSync(join(service, 'files'))) return;
    writeAtomic(join(service, 'env'), envFile(s.env), 0o644);
    writeAtomic(join(service, 'ca.pem'), s.caPem, 0o644);
    const sync = (sub: string, want: Record<string, Buffer | string>): void => {
      const d = join(service, sub);
      mkdirSync(d, { recursive: true, mode: 0o755 });
      for (const [name, data] of Object.entries(want)) writeAtomic(join(d, name), data, 0o444);
      for (const name of readdirSync(d)) {
        // Own keys only: `in` also found `constructor`, `toString`, ... on Object.prototype, so a
        // file of such a name was never removed (a fourth review).
        if (!Object.hasOwn(want, name)) rmSync(join(d, name), { force: true });
      }
    };
    sync('files', s.files);
    sync('connections', s.connections);
  }

  async start(spec: VmSpec, surface: Surface): Promise<void> {
    if (this.#vms.has(spec.id)) return;
    if (!this.#caps.namespaces) throw new DriverError('start_failed', 'this host cannot create namespaces');
    const slot = this.#takeSlot(spec);
    if (slot) {
      try {
        await this.#claim(spec, surface, slot);
        return;
      } finally {
        this.#refillSoon();
      }
    }
    await this.create(spec);
    const dir = this.#dir(spec.id);
    let loop: string | null;
    try {
      loop = await this.#mountAll(spec);
    } catch (err) {
      await this.#unmountAll(spec.id);
      throw new DriverError('start_failed', this.#scrub((err as Error).message));
    }
    this.#writeEtc(dir);
    await this.applySurface(spec.id, surface);
    const service = join(dir, 'service');
    const uid = this.#uid(spec.id);
    // The bridge first, so the relay inside finds the socket the moment it starts.
    const { bridge, bridgeSockets } = await this.#bridge(service);
    const { control, browser } = await this.#environmentSockets(spec.id, service);
    this.#cgroups.remove(spec.id);
    this.#cgroups.create(spec.id, { cpus: spec.cpus, memoryMib: spec.memoryMib, pidsMax: PIDS_MAX });
    let sandbox: Launched | null = null;
    try {
      sandbox = await this.#launch(dir, spec.id, uid);
      const vm: Vm = {
        spec, proc: sandbox.proc, initPid: sandbox.initPid, initStart: sandbox.initStart, status: 'running', bridge, bridgeSockets, control, browser, expectedExit: false, exited: sandbox.exited, execSeq: 0, loop, uid,
      };
      this.#running(vm);
      this.#refillSoon();
    } catch (err) {
      bridge.close();
      control?.close();
      browser?.close();
      this.#cgroups.remove(spec.id);
      await this.#unmountAll(spec.id);
      // The reason is shown to the developer (failure_reason): no host path in it.
      throw new DriverError('start_failed', this.#scrub((err as Error).message));
    }
  }

  /** A running sandbox's record: its exit is news (unless the host stops it), and its teardown happens once. */
  #running(vm: Vm): void {
    const id = vm.spec.id;
    this.#vms.set(id, vm);
    vm.proc.once('exit', (code, signal) => {
      if (this.#vms.get(id) !== vm) return;
      this.#vms.delete(id);
      void this.#teardownOnce(id, vm).then(() => {
        if (!vm.expectedExit) for (const l of this.#exitListeners) l(id, { code, signal });
      });
    });
  }

  /** /run/service/gateway.sock: the sandbox's one way out, to the gateway proxy (no identity: the agent's proxy credentials are). */
  async #bridge(service: string): Promise<{ bridge: Server; bridgeSockets: Set<Socket> }> {
    const sockPath = join(service, 'gateway.sock');
    rmSync(sockPath, { force: true });
    const bridgeSockets = new Set<Socket>();
    const bridge = createServer((inside) => {
      const out = connect(this.opts.proxy.port, this.opts.proxy.host);
      bridgeSockets.add(inside);
      inside.on('close', () => bridgeSockets.delete(inside));
      inside.pipe(out).pipe(inside);
      inside.on('error', () => out.destroy());
      out.on('error', () => inside.destroy());
      // The proxy's side gone: the inside one goes too once written out (not half-open for
      // as long as the agent keeps it, each one a file descriptor of the service).
      out.on('close', () => inside.destroySoon());
    });
    // Each connection is up to three of the service's file descriptors (this one, the
    // proxy's client and its accepted socket): an agent opening them without end took the
    // service to its limit, and every tenant's requests and starts failed (EMFILE).
    bridge.maxConnections = MAX_SOCKET_CONNECTIONS.gateway;
    await new Promise<void>((resolve, reject) => {
      bridge.once('error', reject);
      bridge.listen(sockPath, () => resolve());
    });
    chmodSync(sockPath, 0o666);
    return { bridge, bridgeSockets };
  }

  /** The environment's control and browser sockets: one pair per environment, so the socket is the identity. */
  async #environmentSockets(id: string, service: string): Promise<{ control: HttpServer | null; browser: HttpServer | null }> {
    let control: HttpServer | null = null;
    if (this.opts.control) {
      const ctlPath = join(service, 'control.sock');
      rmSync(ctlPath, { force: true });
      // A caller's process is looked up in the sandbox's own namespaces.
      control = createHttpServer(this.opts.control(id, (socket) => {
        const vm = this.#vms.get(id);
        return vm ? peerOf(socket, vm.initPid) : Promise.resolve(null);
      }));
      control.headersTimeout = 10_000;
      control.requestTimeout = 30_000;
      control.maxConnections = MAX_SOCKET_CONNECTIONS.control;
      await new Promise<void>((resolve, reject) => {
        control!.once('error', reject);
        control!.listen(ctlPath, () => resolve());
      });
      chmodSync(ctlPath, 0o666);
    }
    // The browser socket: WebSocket upgrades only, for this environment's leases.
    let browser: HttpServer | null = null;
    if (this.opts.browser) {
      const brPath = join(service, 'browser.sock');
      rmSync(brPath, { force: true });
      browser = createHttpServer((_req, res) => {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found","message":"CDP endpoints only (WebSocket)"}');
      });
      browser.on('upgrade', this.opts.browser(id));
      browser.maxConnections = MAX_SOCKET_CONNECTIONS.browser;
      await new Promise<void>((resolve, reject) => {
        browser!.once('error', reject);
        browser!.listen(brPath, () => resolve());
      });
      chmodSync(brPath, 0o666);
    }
    return { control, browser };
  }

  /**
   * Starts bubblewrap on `dir` (its disk, /run/service and /etc mounted there) in the
   * cgroups named `cgroup`, as host uid `uid`; resolves once the relay inside listens
   * (running means an exec reaches the gateway). On failure the tree is killed and gone.
   */
  async #launch(dir: string, cgroup: string, uid: number): Promise<Launched> {
    // bwrap runs as the environment's unprivileged uid, which cannot traverse DATA_DIR
    // (0700): the launcher, still root, makes a private mount namespace where only this
    // directory is bound at /mnt, and bwrap binds from there. The sources are filesystems
    // of their own (image, tmpfs), so their roots inside are `/`.
    const args: string[] = [
      '--unshare-all', '--unshare-user', ...(this.#hardened ? ['--disable-userns', '--seccomp', '4'] : []),
      '--die-with-parent', '--new-session', '--uid', String(AGENT_UID), '--gid', String(AGENT_UID), '--hostname', 'env', '--info-fd', '3',
      '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/sbin', '/sbin',
    ];
    for (const e of ETC_READ_ONLY) args.push('--ro-bind-try', `/etc/${e}`, `/etc/${e}`);
    for (const e of ['passwd', 'group', 'hosts', 'hostname', 'resolv.conf']) args.push('--ro-bind', `/mnt/etc/${e}`, `/etc/${e}`);
    args.push(
      '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--tmpfs', '/run',
      '--bind', '/mnt/disk', AGENT_HOME,
      '--ro-bind', '/mnt/service', '/run/service',
      // The root tmpfs (/, /etc, the /lib symlinks) is the agent's uid's: read-only, so no
      // /etc/ld.so.preload or replaced /lib64 can be planted for whatever runs there next.
      '--remount-ro', '/',
      '--chdir', AGENT_HOME, '--clearenv', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', AGENT_HOME,
      '--', ...this.#relay,
    );
    const procs = this.#cgroups.procsFiles(cgroup);
    const [unshare, bwrap] = [which('unshare')!, which('bwrap')!];
    const argv = this.#root
      ? [PERL, '-e', START_LAUNCHER, String(procs.length), ...procs, dir, String(uid), bwrap, ...args]
      : ['/bin/sh', '-c', CGROUP_JOIN, 'sh', String(procs.length), ...procs, unshare, '-U', '-r', '-m', '--propagation', 'private', '--', '/bin/sh', '-c', PRIVATE_MOUNT, 'sh', dir, bwrap, ...args];
    const proc = spawn(argv[0]!, argv.slice(1), {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...HOST_ENV },
    });
    // bwrap reads the filter from fd 4 to its end.
    (proc.stdio[4] as NodeJS.WritableStream).on('error', () => {});
    (proc.stdio[4] as NodeJS.WritableStream).end(this.#hardened ? this.#filter : Buffer.alloc(0));
    let stderr = '';
    proc.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString('utf8');
    });
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    try {
      const initPid = await this.#readChildPid(proc, () => stderr);
      const initStart = startTime(initPid);
      this.#checkSealed(initPid);
      await this.#waitRelay(initPid, proc, () => stderr);
      return { proc, initPid, initStart, exited };
    } catch (err) {
      proc.kill('SIGKILL');
      await this.#cgroups.kill(cgroup);
      await exited;
      throw err;
    }
  }

  /**
   * A ready slot for this start (issue 29), taken out of the pool at once (a slot serves one
   * environment, ever): only for an environment's first start (no disk yet: the slot's disk
   * becomes its disk) of the slot's disk size.
   */
  #takeSlot(spec: VmSpec): Slot | null {
    if (!this.#slots.length || existsSync(join(this.#dir(spec.id), 'disk.img'))) return null;
    const at = this.#slots.findIndex((s) => s.gib === spec.diskGib);
    if (at < 0) return null;
    return this.#slots.splice(at, 1)[0]!;
  }

  /**
   * Makes a ready slot the environment's. In order: its uid recorded as the environment's
   * (first: no later start may take another), its disk image renamed into the environment's
   * directory and its three mounts moved there (MS_MOVE: the sandbox's own copy keeps them,
   * the host's paths become the environment's as for any start), its cgroups become the
   * environment's, processes and all, with the environment's limits (Cgroups.adopt), the
   * environment's surface and sockets in its /run/service. The slot ran nothing but its
   * relay, as that uid, in a sealed network namespace (checked again): from here it is the
   * environment's as if started for it. A slot that cannot be claimed is destroyed, its
   * fresh disk with it, and the start fails.
   */
  async #claim(spec: VmSpec, surface: Surface, slot: Slot): Promise<void> {
    const dir = this.#dir(spec.id);
    // Its exit is the claim's to see from here (the checks below), not the pool's.
    slot.launched.proc.off('exit', slot.onExit);
    let sockets: { control: HttpServer | null; browser: HttpServer | null } = { control: null, browser: null };
    try {
      for (const sub of ['disk', 'service', 'etc']) mkdirSync(join(dir, sub), { recursive: true, mode: sub === 'disk' ? 0o700 : 0o755 });
      chmodSync(dir, 0o755);
      writeAtomic(join(dir, 'uid'), `${slot.uid}\n`, 0o644);
      renameSync(join(slot.dir, 'disk.img'), join(dir, 'disk.img'));
      if (slot.mover.ready()) await slot.mover.move(dir);
      else await mountAll(SLOT_MOUNTS.map((sub) => ({ kind: 'move' as const, from: join(slot.dir, sub), at: join(dir, sub) })));
      this.#cgroups.remove(spec.id);
      this.#cgroups.adopt(slot.name, spec.id);
      this.#cgroups.create(spec.id, { cpus: spec.cpus, memoryMib: spec.memoryMib, pidsMax: PIDS_MAX });
      this.#checkSealed(slot.launched.initPid);
      if (slot.launched.proc.exitCode !== null || slot.launched.proc.signalCode !== null) throw new Error('the sandbox exited before its claim');
      await this.applySurface(spec.id, surface);
      sockets = await this.#environmentSockets(spec.id, join(dir, 'service'));
    } catch (err) {
      sockets.control?.close();
      sockets.browser?.close();
      await this.#cgroups.kill(spec.id);
      this.#cgroups.remove(spec.id);
      await this.#destroySlot(slot);
      await this.#unmountAll(spec.id);
      await rm(join(dir, 'disk.img'), { force: true });
      rmSync(join(dir, 'uid'), { force: true });
      throw new DriverError('start_failed', this.#scrub((err as Error).message));
    }
    // Its mounts moved away: empty directories (never a recursive delete through a mount).
    if (!mountsUnder(slot.dir).length) rmSync(slot.dir, { recursive: true, force: true });
    const vm: Vm = {
      spec, proc: slot.launched.proc, initPid: slot.launched.initPid, initStart: slot.launched.initStart, status: 'running', bridge: slot.bridge, bridgeSockets: slot.bridgeSockets, ...sockets,
      expectedExit: false, exited: slot.launched.exited, execSeq: 0, loop: slot.loop, uid: slot.uid,
    };
    this.#running(vm);
    // The slot's launcher serves the environment's first exec, or ends unused after a while.
    const timer = setTimeout(() => {
      if (vm.spareEntry?.child === slot.entry.child) this.#dropEntry(vm);
    }, this.#spareLauncherMs);
    timer.unref();
    vm.spareEntry = { child: slot.entry.child, timer };
    this.opts.log.info({ environment_id: spec.id, slot: slot.name }, 'environment started from a sandbox slot');
    if (slot.launched.proc.exitCode !== null || slot.launched.proc.signalCode !== null) {
      // It died between the check and the listener: its exit is the environment's now.
      this.#vms.delete(spec.id);
      await this.#teardownOnce(spec.id, vm);
      throw new DriverError('start_failed', 'the sandbox exited at start');
    }
  }

  /**
   * The spare disk and the pool's slots, made again a moment after a start: not while the
   * environment's first exec runs (on a small host their processes would take its CPU).
   */
  #refillSoon(): void {
    if (this.#closed || this.#refillTimer) return;
    this.#refillTimer = setTimeout(() => {
      this.#refillTimer = null;
      if (!this.#closed) void this.#images?.refill().then(() => this.#refillSlots());
    }, REFILL_DELAY_MS);
    this.#refillTimer.unref();
  }

  /** Starts slots until the pool has its size (one at a time, in the background; never throws). */
  #refillSlots(): void {
    if (this.#filling || this.#closed || !this.#images || !this.#root) return;
    const gib = this.#images.lastGib() ?? this.opts.poolDiskGib ?? null;
    if (gib === null) return;
    // Slots of a size no longer asked for make room for the size that is.
    for (const stale of this.#slots.filter((s) => s.gib !== gib)) {
      this.#slots.splice(this.#slots.indexOf(stale), 1);
      stale.launched.proc.off('exit', stale.onExit);
      void this.#destroySlot(stale).catch(() => {});
    }
    if (this.#slots.length >= this.#poolSize) return;
    this.#filling = this.#reaped.then(() => this.#startSlot(gib))
      .catch((err: Error) => this.opts.log.warn({ err: this.#scrub(err.message) }, 'a sandbox slot could not be started'))
      .finally(() => {
        this.#filling = null;
        if (this.#slots.length < this.#poolSize && !this.#closed) setImmediate(() => this.#refillSlots());
      });
  }

  /** A sandbox started ahead for no environment yet (its own uid, allocated; cgroups; disk of `gib`; /etc; relay), into the pool. */
  async #startSlot(gib: number): Promise<void> {
    const name = `slot_${process.pid.toString(16).padStart(8, '0')}${randomBytes(8).toString('hex')}`;
    const dir = join(this.opts.rootDir, name);
    const uid = this.#allocateUid();
    this.#startingSlotUids.add(uid);
    const img = join(dir, 'disk.img');
    let loop: string | null = null;
    let bridged: { bridge: Server; bridgeSockets: Set<Socket> } | null = null;
    let mover: MountMover | null = null;
    try {
      mkdirSync(join(dir, 'disk'), { recursive: true, mode: 0o700 });
      mkdirSync(join(dir, 'service'), { mode: 0o755 });
      mkdirSync(join(dir, 'etc'), { mode: 0o755 });
      chmodSync(dir, 0o755);
      await this.#images!.ensure(img, gib, uid);
      loop = await this.#mountInto(dir, img);
      this.#writeEtc(dir);
      bridged = await this.#bridge(join(dir, 'service'));
      // Until its claim, the slot's own small limits (the relay needs a few MiB).
      this.#cgroups.create(name, { cpus: 1, memoryMib: 64, pidsMax: 64 });
      mover = startMountMover(dir, SLOT_MOUNTS);
      const launched = await this.#launch(dir, name, uid);
      const entry: SpareEntry = { child: await this.#launcher(launched.initPid, launched.initStart), timer: null };
      const slot: Slot = { name, dir, uid, gib, loop, launched, ...bridged, mover, entry, onExit: () => {} };
      slot.onExit = () => {
        const at = this.#slots.indexOf(slot);
        if (at >= 0) this.#slots.splice(at, 1);
        this.#destroySlot(slot).catch((err: Error) => this.opts.log.warn({ err: this.#scrub(err.message) }, 'a sandbox slot could not be removed'));
      };
      launched.proc.once('exit', slot.onExit);
      if (this.#closed) await this.#destroySlot(slot);
      else this.#slots.push(slot);
    } catch (err) {
      mover?.cancel();
      bridged?.bridge.close();
      this.#cgroups.remove(name);
      await this.#images!.release(img, mountsUnder(dir));
      await removeUnmounted(dir);
      throw err;
    } finally {
      this.#startingSlotUids.delete(uid);
    }
  }

  /** Resolves once the slots a previous run left are removed (the constructor starts it). */
  slotsReaped(): Promise<void> {
    return this.#reaped;
  }

  async #reapSlots(): Promise<void> {
    let names: string[];
    try {
      names = readdirSync(this.opts.rootDir);
    } catch {
      return;
    }
    // Cgroups of slots whose process is gone (their directories already were, or never were).
    for (const name of this.#cgroups.leftovers()) {
      const pid = slotPid(name);
      if (pid === null || pidAlive(pid) || names.includes(name)) continue;
      await this.#cgroups.kill(name);
      this.#cgroups.remove(name);
    }
    for (const name of names) {
      const pid = slotPid(name);
      if (pid === null || pidAlive(pid)) continue;
      const dir = join(this.opts.rootDir, name);
      try {
        await this.#cgroups.kill(name);
        this.#cgroups.remove(name);
        const mounted = mountsUnder(dir);
        if (this.#images) await this.#images.release(join(dir, 'disk.img'), mounted);
        else for (const m of mounted) await run('/usr/bin/umount', ['-l', '--', m]);
        await removeUnmounted(dir);
        this.opts.log.info({ slot: name }, 'a sandbox slot a previous run left was removed');
      } catch (err) {
        this.opts.log.warn({ slot: name, err: this.#scrub((err as Error).message) }, 'a sandbox slot a previous run left could not be removed');
      }
    }
  }

  /**
   * Kills a slot that no environment has (or whose claim failed), unmounts what is still
   * mounted in its directory and deletes it. close() waits for every one under way: a slot
   * whose sandbox died (a SIGTERM to the service's whole process group reaches it first) is
   * destroyed from its exit handler, which nothing else awaits.
   */
  #destroySlot(slot: Slot): Promise<void> {
    const done = this.#unmakeSlot(slot).finally(() => this.#destroying.delete(done));
    this.#destroying.add(done);
    return done;
  }

  async #unmakeSlot(slot: Slot): Promise<void> {
    slot.mover.cancel();
    endEntry(slot.entry);
    slot.launched.proc.kill('SIGKILL');
    await this.#cgroups.kill(slot.name);
    await slot.launched.exited;
    slot.bridge.close();
    for (const s of slot.bridgeSockets) s.destroy();
    this.#cgroups.remove(slot.name);
    await this.#images!.release(join(slot.dir, 'disk.img'), mountsUnder(slot.dir));
    await removeUnmounted(slot.dir);
  }

  /**
   * A host uid no environment and no process uses (a slot's, recorded as its environment's
   * at the claim): random in the environments' range, not the hashed uid of any environment
   * of this host's directory, not recorded for one, not any live process's (environments'
   * browsers have a range of their own).
   */
  #allocateUid(): number {
    const taken = new Set<number>([...this.#slots.map((s) => s.uid), ...this.#startingSlotUids]);
    for (const vm of this.#vms.values()) taken.add(vm.uid);
    for (const name of readdirSync(this.opts.rootDir)) {
      if (!/^env_[0-9a-f]{24}$/.test(name)) continue;
      taken.add(sandboxUid(name));
      const recorded = recordedUid(join(this.opts.rootDir, name));
      if (recorded !== null) taken.add(recorded);
    }
    return allocateUid(taken, BASE_UID, UID_RANGE);
  }

  /** The sandbox's own network namespace, as the host sees it: loopback only, no route. */
  #checkSealed(initPid: number): void {
    if (!sealedAt(initPid)) throw new DriverError('start_failed', 'the sandbox\'s network namespace is not sealed (an interface other than loopback, or a route)');
  }

  /** Whether a running environment's network namespace is sealed now (read from it, not remembered); false when it is not running. */
  networkSealed(id: string): boolean {
    const vm = this.#vms.get(id);
    return vm ? sealedAt(vm.initPid) : false;
  }

  #readChildPid(proc: ChildProcess, stderr: () => string): Promise<number> {
    return new Promise((resolve, reject) => {
      let buf = '';
      const info = proc.stdio[3] as NodeJS.ReadableStream;
      const timer = setTimeout(() => done(new DriverError('start_failed', 'the sandbox did not start within 30 s')), 30_000);
      const done = (err: Error | null, pid?: number): void => {
        clearTimeout(timer);
        info.removeAllListeners('data');
        proc.off('exit', onExit);
        if (err) reject(err);
        else resolve(pid!);
      };
      const onExit = (code: number | null): void => {
        done(new DriverError('start_failed', `the sandbox exited at start (${code}): ${stderr().trim().slice(0, 300)}`));
      };
      proc.once('exit', onExit);
      info.on('data', (d: Buffer) => {
        buf += d.toString('utf8');
        const m = /"child-pid":\s*(\d+)/.exec(buf);
        if (m) done(null, Number(m[1]));
      });
    });
  }

  /** Running means the relay listens: an exec right after start reaches the gateway. */
  async #waitRelay(initPid: number, proc: ChildProcess, stderr: () => string): Promise<void> {
    const hex = `:${RELAY_PORT.toString(16).toUpperCase().padStart(4, '0')} `;
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new DriverError('start_failed', `the sandbox exited at start: ${stderr().trim().slice(0, 300)}`);
      }
      let tcp = '';
      try {
        tcp = readFileSync(`/proc/${initPid}/net/tcp`, 'utf8');
      } catch { /* not yet */ }
      // State 0A is LISTEN.
      if (tcp.split('\n').some((l) => l.includes(hex) && / 0A /.test(l))) return;
      await new Promise((r) => setTimeout(r, 2));
    }
    throw new DriverError('start_failed', 'the gateway relay inside the sandbox did not start');
  }

  /**
   * close() waits for every teardown under way, as for slots: a sandbox that ended by itself
   * (a SIGTERM to the service's whole process group reaches it first) is torn down from its
   * exit handler, which nothing else awaits, and a service that exited before its unmounts
   * ran would leave the disk mounted for the next start to reap.
   */
  #teardownOnce(id: string, vm: Vm): Promise<void> {
    if (!vm.torn) {
      const torn = this.#teardown(id, vm).finally(() => this.#destroying.delete(torn));
      this.#destroying.add(torn);
      vm.torn = torn;
    }
    return vm.torn;
  }

  async #teardown(id: string, vm: Vm): Promise<void> {
    this.#dropEntry(vm);
    vm.bridge.close();
    vm.control?.close();
    vm.control?.closeAllConnections();
    vm.browser?.close();
    vm.browser?.closeAllConnections();
    for (const s of vm.bridgeSockets) s.destroy();
    this.#cgroups.remove(id);
    await this.#unmountAll(id);
  }

  status(id: string): VmStatus {
    return this.#vms.get(id)?.status ?? 'absent';
  }

  #vm(id: string): Vm {
    const vm = this.#vms.get(id);
    if (!vm) throw new DriverError('guest_unavailable', 'the environment is not running on this host');
    return vm;
  }

  async suspend(id: string): Promise<void> {
    const vm = this.#vm(id);
    if (vm.status === 'suspended') return;
    if (!(await this.#cgroups.freeze(id, true))) {
      if (!this.opts.insecure) throw new DriverError('guest_unavailable', 'the cgroup could not be frozen');
      for (const pid of this.#treePids(vm)) this.#signal(pid, 'SIGSTOP');
    }
    vm.status = 'suspended';
    // A suspended environment holds no process outside its frozen cgroup.
    this.#dropEntry(vm);
  }

  async resume(id: string): Promise<void> {
    const vm = this.#vm(id);
    if (vm.status === 'running') return;
    if (!(await this.#cgroups.freeze(id, false))) {
      for (const pid of this.#treePids(vm)) this.#signal(pid, 'SIGCONT');
    }
    vm.status = 'running';
  }

  #signal(pid: number, sig: NodeJS.Signals): void {
    try {
      process.kill(pid, sig);
    } catch { /* gone */ }
  }

  /** Fallback without cgroups: the sandbox's processes, found by their pid namespace. */
  #treePids(vm: Vm): number[] {
    const fromCgroup = this.#cgroups.pids(vm.spec.id);
    if (fromCgroup.length) return fromCgroup;
    let ns: string;
    try {
      ns = readlinkSync(`/proc/${vm.initPid}/ns/pid`);
    } catch {
      return [];
    }
    const out: number[] = [];
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      try {
        if (readlinkSync(`/proc/${p}/ns/pid`) === ns) out.push(Number(p));
      } catch { /* gone */ }
    }
    return out;
  }

  async stop(id: string): Promise<void> {
    const vm = this.#vms.get(id);
    if (!vm) {
      // Nothing runs (a previous run's leftovers are killed and unmounted too).
      await this.#cgroups.kill(id);
      this.#cgroups.remove(id);
      await this.#unmountAll(id);
      return;
    }
    vm.expectedExit = true;
    // Thaw first: a frozen tree cannot die on v1-style freezers, and v2 kills frozen trees anyway.
    await this.#cgroups.freeze(id, false);
    await this.#cgroups.kill(id);
    vm.proc.kill('SIGKILL');
    await vm.exited;
    if (this.#vms.get(id) === vm) this.#vms.delete(id);
    await this.#teardownOnce(id, vm);
  }

  async destroy(id: string): Promise<void> {
    await this.stop(id);
    const dir = this.#dir(id);
    // Never a recursive delete through a mount: it would reach into whatever is mounted.
    if (mountsUnder(dir).length) await this.#unmountAll(id);
    if (mountsUnder(dir).length) throw new DriverError('guest_unavailable', 'the environment\'s disk could not be unmounted');
    await removeUnmounted(dir);
  }

  /** Grows a running environment's disk to disk_gib (a resources update; host-agent.ts). */
  async resize(spec: VmSpec): Promise<void> {
    const vm = this.#vms.get(spec.id);
    if (!vm) return;
    // cpus and memory_mib: the cgroup's limits, at once (a tree over a lowered memory limit is reclaimed, then OOM-killed).
    if (vm.spec.cpus !== spec.cpus || vm.spec.memoryMib !== spec.memoryMib) {
      this.#cgroups.create(spec.id, { cpus: spec.cpus, memoryMib: spec.memoryMib, pidsMax: PIDS_MAX });
      vm.spec = { ...vm.spec, cpus: spec.cpus, memoryMib: spec.memoryMib };
    }
    if (!vm.loop || !this.#images || vm.spec.diskGib === spec.diskGib) return;
    vm.spec = { ...vm.spec, diskGib: spec.diskGib };
    await this.#grow(spec, join(this.#dir(spec.id), 'disk.img'), vm.loop);
  }

  leftovers(): string[] {
    const ids = new Set(this.#cgroups.leftovers());
    // Mounts a crashed run left on the host (disk, /run/service, /etc of an environment),
    // and loop devices still bound to one of its images.
    for (const m of mountsUnder(this.opts.rootDir)) ids.add(m.slice(this.opts.rootDir.length + 1).split('/')[0]!);
    if (this.#images) {
      const list = spawnSync(which('losetup') ?? '/usr/sbin/losetup', ['--list', '--noheadings', '--raw', '--output', 'BACK-FILE'], { encoding: 'utf8', env: { ...HOST_ENV } }).stdout ?? '';
      for (const file of list.split('\n')) {
        if (file.startsWith(`${this.opts.rootDir}/`)) ids.add(file.slice(this.opts.rootDir.length + 1).split('/')[0]!);
      }
    }
    return [...ids].filter((id) => /^env_[0-9a-f]{24}$/.test(id) && !this.#vms.has(id));
  }

  async stats(id: string): Promise<{ memoryBytes: number | null; cpuUsec: number | null }> {
    return this.#cgroups.stats(id);
  }

  /**
   * An enter launcher into the sandbox whose first process is `initPid` (enter.ts): it waits
   * for its payload on fd 4. Started by the resident spawner, or by the service itself when
   * the spawner is off or failed.
   */
  async #launcher(initPid: number, initStart: number): Promise<Helper> {
    const args = ['-e', ENTER_LAUNCHER, String(initPid), String(initStart), String(AGENT_UID), String(AGENT_UID)];
    if (this.opts.residentSpawner !== false && !this.#closed) {
      try {
        this.#spawner ??= new Spawner({ ...HOST_ENV });
        const child = await this.#spawner.spawn(PERL, args, { n: 5, env: { ...HOST_ENV }, detached: true });
        for (const s of child.stdio) s?.on('error', () => {});
        child.on('error', () => {});
        return child;
      } catch (err) {
        this.opts.log.warn({ err: this.#scrub((err as Error).message) }, 'the resident spawner failed; an exec launcher is started by the service itself');
      }
    }
    const child = spawn(PERL, args, { stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'], env: { ...HOST_ENV }, detached: true });
    (child.stdio[4] as NodeJS.WritableStream).on('error', () => {});
    child.on('error', () => {});
    return child as unknown as Helper;
  }

  /** The launcher started ahead, if it is still waiting (taken: no one else gets it). */
  #takeEntry(vm: Vm): Helper | null {
    const spare = vm.spareEntry;
    vm.spareEntry = null;
    if (!spare) return null;
    if (spare.timer) clearTimeout(spare.timer);
    if (spare.child.exitCode === null && spare.child.signalCode === null && spare.child.pid !== undefined) return spare.child;
    endEntry(spare);
    return null;
  }

  /**
   * Starts the environment's next enter launcher ahead (after an exec took one): it waits for
   * the next exec's payload, joined to nothing, and ends unused after SPARE_ENTRY_MS, at
   * suspend, or with the sandbox (#teardown). One at most per environment.
   */
  async #armEntry(vm: Vm): Promise<void> {
    if (vm.arming) return;
    const arming = this.#startEntry(vm);
    vm.arming = arming;
    try {
      await arming;
    } finally {
      if (vm.arming === arming) vm.arming = null;
    }
  }

  async #startEntry(vm: Vm): Promise<void> {
    const wanted = (): boolean => !vm.spareEntry && vm.status === 'running' && !vm.torn && !this.#closed && this.#vms.get(vm.spec.id) === vm;
    if (!wanted()) return;
    const child = await this.#launcher(vm.initPid, vm.initStart);
    // The environment may have moved on while it started (suspended, stopped, another armed).
    if (!wanted()) return endEntry({ child, timer: null });
    const timer = setTimeout(() => {
      if (vm.spareEntry?.child === child) this.#dropEntry(vm);
    }, this.#spareLauncherMs);
    timer.unref();
    vm.spareEntry = { child, timer };
  }

  get #spareLauncherMs(): number {
    return this.opts.spareLauncherMs ?? SPARE_ENTRY_MS;
  }

  /** Ends the environment's launcher started ahead, if it still has one. */
  #dropEntry(vm: Vm): void {
    const spare = vm.spareEntry;
    vm.spareEntry = null;
    if (spare) endEntry(spare);
  }

  async exec(id: string, req: ExecRequest): Promise<ExecResult> {
    const vm = this.#vm(id);
    if (vm.status !== 'running') throw new DriverError('guest_unavailable', 'the environment is suspended');
    const tag = `x${++vm.execSeq}`;
    const started = performance.now();
    let payload: Buffer;
    try {
      payload = enterPayload(this.#hardened ? this.#filter : ALLOW_ALL, req.command, req.env ?? {}, req.cwd ?? AGENT_HOME, this.#cgroups.entry(id, tag));
    } catch (err) {
      this.#cgroups.removeExec(id, tag);
      throw new DriverError('exec_failed', (err as Error).message);
    }
    // A launcher being started ahead is nearer than a new one (seen under load: an exec that
    // came while it started began its own, and the one started ahead waited unused).
    if (vm.arming) await vm.arming.catch(() => {});
    const child = this.#takeEntry(vm) ?? (await this.#launcher(vm.initPid, vm.initStart));
    (child.stdio[4] as NodeJS.WritableStream).end(payload);
    const out = new OutputCollector(req);
    for (const stream of ['stdout', 'stderr'] as const) child[stream]!.on('data', (d: Buffer) => out.add(stream, d));
    let marker = '';
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => {
      marker += d.toString('utf8');
    });
    child.stdin!.on('error', () => {});
    if (req.stdin !== undefined && req.stdin.length) child.stdin!.end(req.stdin);
    else child.stdin!.end();

    let timedOut = false;
    const killTree = async (): Promise<void> => {
      await this.#cgroups.kill(id, tag);
      // Its process group only while the launcher lives: once it has exited (a command that
      // left a setsid'd process holding its output), its pid may be another process's group
      // on the host by now, and root's SIGKILL would go there. The cgroup covers the tree.
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch { /* gone */ }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      void killTree();
    }, req.timeoutMs);
    const onAbort = (): void => void killTree();
    req.signal?.addEventListener('abort', onAbort);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
      child.once('close', (c, s) => resolve([c, s]));
      child.once('error', () => resolve([null, null]));
    });
    clearTimeout(timer);
    req.signal?.removeEventListener('abort', onAbort);
    this.#cgroups.removeExec(id, tag);
    // The next exec's launcher starts once this one's answer is on its way: Node's spawn (the
    // event loop blocked 4-7 ms on a small VM) and Perl's start are then off both execs' paths
    // (an agent's next command comes after its model has read this one's output).
    if (!marker) setImmediate(() => void this.#armEntry(vm).catch(() => {}));
    if (marker === 'notfound') throw new DriverError('exec_failed', `command not found in the environment: ${req.command[0]}`);
    if (marker === 'cwd') throw new DriverError('exec_failed', `cwd does not exist in the environment: ${req.cwd}`);
    if (marker === 'enter') throw new DriverError('guest_unavailable', 'the environment could not be entered');
    return out.result(code, signal, started, timedOut);
  }

  /** File calls run inside as the agent (inside.ts): a symlink can only lead to what the agent may read anyway. */
  async readFile(id: string, path: string, maxBytes: number): Promise<Buffer> {
    return readFileInside((req) => this.exec(id, req), path, maxBytes);
  }

  async writeFile(id: string, path: string, data: Buffer): Promise<{ path: string; size: number }> {
    return writeFileInside((req) => this.exec(id, req), path, data);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#spawner?.close();
    if (this.#refillTimer) clearTimeout(this.#refillTimer);
    await this.#filling;
    const slots = this.#slots.splice(0);
    await Promise.all([
      ...slots.map((slot) => {
        slot.launched.proc.off('exit', slot.onExit);
        return this.#destroySlot(slot).catch(() => {});
      }),
      ...[...this.#vms.keys()].map((id) => this.stop(id).catch((err) => {
        this.opts.log.warn({ environment_id: id, err: this.#scrub((err as Error).message) }, 'an environment could not be stopped cleanly as the host stops: the next start reaps what it left');
      })),
    ]);
    await Promise.all([...this.#destroying].map((d) => d.catch(() => {})));
  }
}

/**
 * Deletes an environment's or a slot's directory once nothing is mounted in it (never a
 * recursive delete through a mount; a directory still mounted in is kept whole, its image
 * with it, for the next start's reap to release): its disk image first, off the event loop
 * (unlinking a preallocated image frees its extents: 19-213 ms for 10 GiB on a 2-core VM,
 * during which every request of the service waited), then what is left.
 */
async function removeUnmounted(dir: string): Promise<void> {
  if (mountsUnder(dir).length) return;
  await rm(join(dir, 'disk.img'), { force: true });
  if (!mountsUnder(dir).length) rmSync(dir, { recursive: true, force: true });
}

/** A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it names one process. */
export function startTime(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const n = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`no start time for process ${pid}`);
  return n;
}

function sealedAt(pid: number): boolean {
  try {
    return netSealed(readFileSync(`/proc/${pid}/net/dev`, 'utf8'), readFileSync(`/proc/${pid}/net/route`, 'utf8'));
  } catch {
    return false;
  }
}

/** `cat /proc/net/dev /proc/net/route` as one text: the two files, told apart by route's header. */
function splitNetFiles(out: string): [string, string] {
  const at = out.indexOf('Iface\t');
  return at < 0 ? [out, ''] : [out.slice(0, at), out.slice(at)];
}

/** Where bubblewrap cannot load a filter (missing says so), exec loads one that allows everything: ret ALLOW. */
const ALLOW_ALL = Buffer.from([0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f]);
