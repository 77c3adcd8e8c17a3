import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fsp, chmodSync, chownSync, existsSync, fstatSync, lchownSync, lstatSync, mkdirSync, openSync, closeSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type IncomingMessage, type RequestListener, type Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { basename, dirname, join, resolve } from 'node:path';
import type { Logger } from '../../lib/log.js';
import { Cgroups } from '../cgroups.js';
import type { Peer } from '../peer.js';
import {
  DATA_DISK, DriverError, type ExecRequest, type ExecResult, type HostCapabilities, type HostDriver, type Surface, type VmSpec, type VmStatus,
} from '../driver.js';
import { ensureGuestImage, pruneGuestImages, recordImageUse, type GuestImage } from './qemu-image.js';
import { connectUnix, GuestChannel, M, Qmp } from './qemu-channel.js';
import { readFileInside, writeFileInside } from './inside.js';
import { sandboxUid, envFile } from './process.js';
import { HOST_ENV } from './enter.js';

/**
 * The `qemu` runtime (issue 16): each environment is a QEMU `microvm` with the in-guest
 * agent as PID 1 (qemu-guest/agent.c), a read-only root image built from Debian's packages
 * (qemu-image.ts), and a LUKS-encrypted qcow2 data disk at /home/agent whose key is
 * random per environment and kept only wrapped by the master key.
 *
 * Sealed by construction, in two layers:
 * - The guest: its one NIC is slirp with `restrict=on` (no packet leaves for the host or
 *   the world) and `guestfwd` rules for 10.0.2.100:3128 (the gateway proxy) and :9222 (the
 *   browser pool's CDP endpoints of its leases). Each forward is a Unix socket of this
 *   driver, like the process sandbox's. The control socket is bridged over the agent's
 *   virtio-serial port. The guest has no other device that reaches the host's files: two
 *   block devices (the root image, read-only, and its own data disk) and that port.
 * - QEMU itself runs in an empty network namespace (even a QEMU escape has no network:
 *   slirp needs none, the forwards are Unix sockets) and a private mount namespace that
 *   shows it only this environment's directory and the image, as the environment's own
 *   unprivileged uid, with no_new_privs and QEMU's seccomp sandbox, in its own cgroup.
 *
 * Suspend is QMP `stop` + `migrate` to a Unix socket this driver pipes into `zstd`
 * (snapshot.zst: the guest's memory, compressed), then QEMU exits: a suspended environment costs disk, no memory, and
 * survives a restart of the host. Resume starts QEMU with the argv stored at first boot
 * (identical devices) and `-incoming`, then `cont`; the agent then gets the host's clock
 * and fresh randomness (RNDADDENTROPY + RNDRESEEDCRNG), so one snapshot restored twice
 * does not repeat its random numbers.
 */
export interface QemuDriverOptions {
  /** Where each environment's directory lives (DATA_DIR/environments). */
  rootDir: string;
  /** Where guest images are built and kept (by content hash). */
  imageDir: string;
  proxy: { host: string; port: number };
  /** Wraps and unwraps disk keys with the master key. */
  keys: { wrap(plain: Buffer, context: string): string; unwrap(blob: string, context: string): Buffer };
  hostTag: string;
  cgroupRoot?: string;
  browser?: (environmentId: string) => (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  control?: (environmentId: string, peer: (socket: Socket) => Promise<Peer | null>) => RequestListener;
  log: Logger;
  /** `kvm` when /dev/kvm can be opened, else `tcg` (probed); forced with this. */
  accel?: 'kvm' | 'tcg';
  /** How long a boot may take before the start fails (TCG boots in ~4 s on these machines). */
  bootTimeoutMs?: number;
}

const QEMU = '/usr/bin/qemu-system-x86_64';
const GUEST_NET = { proxy: 3128, browser: 9222 };
/** Added to the guest's memory for QEMU's own (devices, and under TCG its 128 MiB translation cache). */
const QEMU_OVERHEAD_MIB = { tcg: 384, kvm: 192 } as const;

/** A running microVM (a suspended one is only its snapshot on disk). */
interface Vm {
  proc: ChildProcess;
  channel: GuestChannel;
  qmp: Qmp;
  servers: Array<Server | HttpServer>;
  sockets: Set<Socket>;
  expectedExit: boolean;
  /** Set while its memory goes to the snapshot: its exit then is the suspend's. */
  suspending: boolean;
  exited: Promise<void>;
}

interface VmRecord {
  /** The image this VM booted from: a snapshot restores only on the very same one. */
  imageDir: string;
  /** QEMU's argv after the binary, as first started (paths are inside its mount namespace). */
  argv: string[];
  accel: 'kvm' | 'tcg';
}

function which(cmd: string): string | null {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin']) if (existsSync(join(dir, cmd))) return join(dir, cmd);
  return null;
}

function tscKhz(): number | null {
  try {
    const m = /cpu MHz\s*:\s*([\d.]+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    return m ? Math.round(Number(m[1]) * 1000) : null;
  } catch {
    return null;
  }
}

/**
 * Inside QEMU's namespaces: loopback up (slirp pairs its `guestfwd` commands over a loopback
 * socket pair; the namespace's loopback reaches nothing but itself), a tmpfs /mnt with
 * this environment's directory and the image bound in.
 */
const NAMESPACE = '/usr/bin/ip link set lo up && /usr/bin/mount -t tmpfs -o mode=0755 gw /mnt && /usr/bin/mkdir /mnt/env /mnt/image && /usr/bin/mount --bind -- "$1" /mnt/env && /usr/bin/mount --bind -o ro -- "$2" /mnt/image || exit 124; shift 2; exec "$@"';
const CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';

export class QemuDriver implements HostDriver {
  readonly name = 'qemu';
  readonly #vms = new Map<string, Vm>();
  readonly #starting = new Set<string>();
  readonly #exitListeners: Array<(id: string, info: { code: number | null; signal: string | null }) => void> = [];
  readonly #caps: HostCapabilities;
  readonly #cgroups: Cgroups;
  #accel: 'kvm' | 'tcg';
  #image: GuestImage | null = null;

  constructor(private readonly opts: QemuDriverOptions) {
    mkdirSync(opts.rootDir, { recursive: true, mode: 0o700 });
    // Root's only, also when it was there before (mkdir's mode applies only to a new one):
    // each environment's directory and disk are reached through it, and nothing else guards them.
    if (process.getuid?.() === 0) chmodSync(opts.rootDir, 0o700);
    this.#cgroups = new Cgroups(opts.hostTag, opts.cgroupRoot);
    const missing: string[] = [...this.#cgroups.support.missing];
    if (!existsSync(QEMU)) missing.push('QEMU is not installed: apt-get install qemu-system-x86');
    for (const tool of ['qemu-img', 'socat', 'zstd', 'unshare', 'setpriv']) if (!which(tool)) missing.push(`${tool} is not installed`);
    if (process.getuid?.() !== 0) missing.push('the qemu runtime runs as root (per-environment uids and namespaces for QEMU)');
    this.#accel = opts.accel ?? (QemuDriver.kvmUsable() ? 'kvm' : 'tcg');
    const usable = existsSync(QEMU) && missing.every((m) => !/not installed|runs as root/.test(m));
    this.#caps = {
      driver: 'qemu',
      network_sealed: usable,
      namespaces: usable,
      cgroup: (({ layout, memory, cpu, pids, freeze, kill }) => ({ layout, memory, cpu, pids, freeze, kill }))(this.#cgroups.support),
      memory_across_host_restart: true,
      disk_quota: true,
      insecure: false,
      missing: this.#accel === 'tcg' ? [...missing, 'no usable KVM here: QEMU emulates the CPU (TCG), several times slower than -accel kvm'] : missing,
    };
  }

  /** /dev/kvm opens read-write (QEMU still falls back to TCG if KVM refuses the guest). */
  static kvmUsable(): boolean {
    try {
      closeSync(openSync('/dev/kvm', 'r+'));
      return true;
    } catch {
      return false;
    }
  }

  capabilities(): HostCapabilities {
    return this.#caps;
  }

  isolated(): boolean {
    return this.#caps.namespaces && this.#caps.cgroup.memory && this.#caps.cgroup.kill;
  }

  get accel(): 'kvm' | 'tcg' {
    return this.#accel;
  }

  onExit(listener: (id: string, info: { code: number | null; signal: string | null }) => void): void {
    this.#exitListeners.push(listener);
  }

  /**
   * Builds (or finds) the guest image; the first call may take a minute, and removes the
   * images no VM needs any more (qemu-image.ts pruneGuestImages). Looked up again when the
   * one in hand was removed meanwhile (by another host process sharing the directory).
   */
  image(): GuestImage {
    if (this.#image && existsSync(join(this.#image.dir, 'done'))) return this.#image;
    const first = this.#image === null;
    const image = ensureGuestImage(this.opts.imageDir, (msg) => this.opts.log.info(msg));
    this.#image = image;
    if (first) {
      try {
        const { removed } = pruneGuestImages(this.opts.imageDir, image.dir);
        if (removed.length > 0) this.opts.log.info({ removed }, 'qemu: removed guest images no VM needs any more');
      } catch (err) {
        this.opts.log.warn({ err: (err as Error).message }, 'qemu: could not look for unused guest images');
      }
    }
    return image;
  }

  #dir(id: string): string {
    if (!/^env_[0-9a-f]{24}$/.test(id)) throw new DriverError('start_failed', 'not an environment id');
    return join(this.opts.rootDir, id);
  }

  /**
   * Where a VM's record (the image and QEMU's argv a resume starts it with) is kept: a root-only
   * directory beside the VMs' own. The VM's directory is its uid's, so a record there was the
   * uid's to rewrite: an escaped QEMU chose the next resume's argv, and the image directory root
   * then wrote markers into (a fourth review).
   */
  #recordPath(id: string): string {
    return join(this.opts.rootDir, '.records', `${basename(this.#dir(id))}.json`);
  }

  #record(id: string): VmRecord | null {
    // A record written before it moved (a VM suspended across the upgrade) is read once from
    // the VM's directory, and only if it names an image of this host's image directory.
    for (const path of [this.#recordPath(id), join(this.#dir(id), 'vm.json')]) {
      try {
        const r = JSON.parse(readFileSync(path, 'utf8')) as VmRecord;
        const images = resolve(this.opts.imageDir);
        if (typeof r.imageDir !== 'string' || dirname(resolve(r.imageDir)) !== images || !Array.isArray(r.argv) || !r.argv.every((a) => typeof a === 'string')) return null;
        return r;
      } catch {
        continue;
      }
    }
    return null;
  }

  #writeRecord(id: string, record: VmRecord): string {
    const dir = join(this.opts.rootDir, '.records');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    const path = this.#recordPath(id);
    writeFileSync(`${path}.tmp`, JSON.stringify(record, null, 1), { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
    rmSync(join(this.#dir(id), 'vm.json'), { force: true });
    return path;
  }

  async create(spec: VmSpec): Promise<void> {
    const dir = this.#dir(spec.id);
    const uid = sandboxUid(spec.id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chownSync(dir, uid, uid);
    chmodSync(dir, 0o700);
    const disk = join(dir, 'disk.qcow2');
    if (existsSync(disk)) return;
    const key = randomBytes(32);
    writeFileSync(join(dir, 'disk.key'), this.opts.keys.wrap(key, `disk:${spec.id}`), { mode: 0o600 });
    // The key reaches qemu-img through a FIFO, never in an argv or a file in the clear.
    let stderr = '';
    // LUKS's PBKDF benchmark fails now and then ("Unable to get accurate CPU usage"): its
    // first sample, 2^15 iterations, can end before the thread's CPU time is accounted
    // (QEMU's bug, fixed upstream in 2025, not in Debian's 7.2). CI saw four quick tries in a
    // row fail on a VM whose vCPU was busy elsewhere: the tries are now spread over ~3 s.
    // (SHA-512, whose first sample is longer, would make every create 1.6 s slower.)
    for (let attempt = 0; attempt < 8; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, 100 * attempt));
      const fifo = makeFifo(join(dir, 'key.fifo'), 0);
      const proc = spawn(which('qemu-img') ?? '/usr/bin/qemu-img', [
        'create', '-q', '-f', 'qcow2', '--object', `secret,id=sec0,file=${fifo},format=raw`,
        '-o', 'encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=200', `${disk}.tmp`, `${spec.diskGib}G`,
      ], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...HOST_ENV } });
      stderr = '';
      proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
      const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
      await feedFifo(fifo, key.toString('base64'), proc);
      if ((await exited) === 0) {
        stderr = '';
        break;
      }
      if (!/accurate CPU usage/.test(stderr)) break;
    }
    key.fill(0);
    if (stderr) throw new DriverError('start_failed', `the data disk could not be created: ${stderr.trim().split(this.opts.rootDir).join('<environments>').slice(0, 200)}`);
    chownSync(`${disk}.tmp`, uid, uid);
    renameSync(`${disk}.tmp`, disk);
  }

  async applySurface(id: string, s: Surface): Promise<void> {
    const vm = this.#vms.get(id);
    if (!vm) {
      this.#pendingSurface.set(id, s);
      return;
    }
    await vm.channel.request(M.SURFACE, surfacePayload(s), 30_000);
  }

  readonly #pendingSurface = new Map<string, Surface>();

  #argv(spec: VmSpec): string[] {
    const khz = tscKhz();
    const cmdline = ['console=ttyS0', 'reboot=t', 'panic=-1', 'quiet', 'loglevel=3', 'rootwait', ...(khz ? [`tsc_early_khz=${khz}`, 'tsc=reliable'] : [])].join(' ');
    const sock = (name: string) => `/mnt/env/${name}`;
    const fwd = (port: number, name: string) => `guestfwd=tcp:10.0.2.100:${port}-cmd:socat - UNIX-CONNECT:${sock(name)}`;
    return [
      '-M', 'microvm,x-option-roms=off,isa-serial=on,rtc=on',
      // TCG's translation cache defaults to 1 GiB, which a busy guest fills and the cgroup
      // then OOM-kills QEMU for: bounded here (measured: python + node + find inside).
      '-accel', this.#accel === 'tcg' ? 'tcg,tb-size=128' : 'kvm',
      '-cpu', this.#accel === 'kvm' ? 'host' : 'max',
      '-smp', String(Math.max(1, Math.min(Math.ceil(spec.cpus), 8))),
      '-m', `${spec.memoryMib}M`,
      '-nodefaults', '-no-user-config', '-nographic', '-no-reboot',
      // QEMU's seccomp filter; `elevateprivileges=deny` would also stop slirp spawning the
      // guestfwd relays, and QEMU already runs unprivileged with no_new_privs.
      '-sandbox', 'on,obsolete=deny,resourcecontrol=deny',
      '-kernel', '/mnt/image/vmlinux', '-initrd', '/mnt/image/initrd.cpio', '-append', cmdline,
      '-chardev', `file,id=con,path=${sock('console.log')}`, '-serial', 'chardev:con',
      '-object', 'secret,id=sec0,file=/mnt/env/key.fifo,format=raw',
      '-blockdev', 'driver=file,filename=/mnt/image/rootfs.img,node-name=rootf,read-only=on',
      '-blockdev', 'driver=raw,file=rootf,node-name=root,read-only=on',
      '-device', 'virtio-blk-device,drive=root,serial=root',
      '-blockdev', `driver=file,filename=${sock('disk.qcow2')},node-name=dataf`,
      '-blockdev', 'driver=qcow2,file=dataf,node-name=data,encrypt.format=luks,encrypt.key-secret=sec0',
      '-device', 'virtio-blk-device,drive=data,serial=data',
      // ipv6=off: slirp would otherwise advertise fec0::/64 and a default route (tested: only
      // restrict=on and the empty namespace stood behind it); the guest gets no IPv6 at all.
      '-netdev', `user,id=n0,restrict=on,ipv6=off,net=10.0.2.0/24,host=10.0.2.2,${fwd(GUEST_NET.proxy, 'gateway.sock')},${fwd(GUEST_NET.browser, 'browser.sock')}`,
      '-device', 'virtio-net-device,netdev=n0',
      '-object', 'rng-random,id=rng0,filename=/dev/urandom', '-device', 'virtio-rng-device,rng=rng0',
      '-device', 'virtio-serial-device',
      '-chardev', `socket,id=agent,path=${sock('agent.sock')},server=on,wait=on`,
      '-device', 'virtserialport,chardev=agent,name=agent',
      '-qmp', `unix:${sock('qmp.sock')},server=on,wait=off`,
    ];
  }

  /** The host ends of the guest's forwards (gateway, browser pool) and the control socket's server. */
  async #serve(id: string): Promise<{ servers: Array<Server | HttpServer>; sockets: Set<Socket>; control: HttpServer | null }> {
    const dir = this.#dir(id);
    const sockets = new Set<Socket>();
    const servers: Array<Server | HttpServer> = [];
    const listen = async (srv: Server | HttpServer, name: string): Promise<void> => {
      const path = join(dir, name);
      rmSync(path, { force: true });
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(path, () => resolve());
      });
      ownSocket(path, sandboxUid(id));
      servers.push(srv);
    };
    const gateway = createServer((inside) => {
      const out = connect(this.opts.proxy.port, this.opts.proxy.host);
      sockets.add(inside);
      inside.on('close', () => sockets.delete(inside));
      inside.pipe(out).pipe(inside);
      inside.on('error', () => out.destroy());
      out.on('error', () => inside.destroy());
    });
    await listen(gateway, 'gateway.sock');
    // The control socket's connections come over the agent's port (GuestChannel.onControl),
    // not a listening socket. Which process inside called cannot be known here: no peer.
    let control: HttpServer | null = null;
    if (this.opts.control) {
      control = createHttpServer(this.opts.control(id, async () => null));
      control.headersTimeout = 10_000;
      control.requestTimeout = 30_000;
      servers.push(control);
    }
    const browser = createHttpServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found","message":"CDP endpoints only (WebSocket)"}');
    });
    if (this.opts.browser) browser.on('upgrade', this.opts.browser(id));
    await listen(browser, 'browser.sock');
    return { servers, sockets, control };
  }

  /** Spawns QEMU in its namespaces as the environment's uid; the disk key goes in through a FIFO. */
  #spawn(id: string, record: VmRecord, extra: string[]): ChildProcess {
    const uid = sandboxUid(id);
    const dir = this.#dir(id);
    const key = this.opts.keys.unwrap(readFileSync(join(dir, 'disk.key'), 'utf8'), `disk:${id}`);
    const fifo = makeFifo(join(dir, 'key.fifo'), uid);
    const procs = this.#cgroups.procsFiles(id);
    const argv = [
      '/bin/sh', '-c', CGROUP_JOIN, 'sh', String(procs.length), ...procs,
      which('unshare') ?? '/usr/bin/unshare', '-m', '-n', '--propagation', 'private', '--',
      '/bin/sh', '-c', NAMESPACE, 'sh', dir, record.imageDir,
      which('setpriv') ?? '/usr/bin/setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--no-new-privs', '--pdeathsig', 'SIGKILL', '--',
      QEMU, ...record.argv, ...extra,
    ];
    const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...HOST_ENV } });
    void feedFifo(fifo, key.toString('base64'), proc).catch(() => {});
    key.fill(0);
    return proc;
  }

  async #boot(spec: VmSpec, surface: Surface | null, restore: boolean): Promise<void> {
    const id = spec.id;
    const dir = this.#dir(id);
    let record = this.#record(id);
    if (!record || !restore) {
      const image = this.image();
      record = { imageDir: image.dir, argv: this.#argv(spec), accel: this.#accel };
    }
    // Written (again) where the VM's uid cannot reach it, the legacy copy removed.
    const recordPath = this.#writeRecord(id, record);
    try {
      // Marks the use, so no prune removes the image while this VM may need it.
      recordImageUse(record.imageDir, resolve(recordPath));
    } catch {
      throw new DriverError('start_failed', 'the guest image this VM booted from is gone');
    }
    for (const s of ['agent.sock', 'qmp.sock']) rmSync(join(dir, s), { force: true });
    const { servers, sockets, control } = await this.#serve(id);
    this.#cgroups.remove(id);
    this.#cgroups.create(id, { cpus: spec.cpus, memoryMib: spec.memoryMib + QEMU_OVERHEAD_MIB[record.accel], pidsMax: 512 });
    const snapshot = join(dir, 'snapshot.zst');
    rmSync(join(dir, 'incoming.sock'), { force: true });
    const proc = this.#spawn(id, record, restore ? ['-incoming', 'unix:/mnt/env/incoming.sock'] : []);
    let stderr = '';
    proc.stderr!.on('data', (d: Buffer) => {
      // QEMU's note that it waits for the agent's socket is not news.
      const text = d.toString('utf8').split('\n').filter((l) => !l.includes('QEMU waiting for connection')).join('\n');
      if (stderr.length < 4000) stderr += text;
      this.opts.log.debug({ environment_id: id, qemu: d.toString('utf8').slice(0, 500) }, 'qemu stderr');
    });
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    const alive = () => proc.exitCode === null && proc.signalCode === null;
    let channel: GuestChannel | null = null;
    let qmp: Qmp | null = null;
    const t0 = performance.now();
    const marks: Record<string, number> = {};
    const mark = (k: string) => (marks[k] = Math.round(performance.now() - t0));
    try {
      channel = new GuestChannel(await connectUnix(join(dir, 'agent.sock'), 30_000, alive));
      if (control) channel.onControl = (conn) => control.emit('connection', conn);
      mark('agent_socket');
      qmp = await Qmp.open(await connectUnix(join(dir, 'qmp.sock'), 30_000, alive));
      mark('qmp');
      if (restore) {
        // The driver feeds the snapshot (zstd run here): a snapshot zstd cannot read fails
        // the resume at once, where QEMU would wait for more of it.
        const feed = await this.#feedSnapshot(join(dir, 'incoming.sock'), snapshot, alive);
        await this.#waitStatus(qmp, ['paused', 'running', 'postmigrate'], 120_000, () => alive() && feed.ok());
        mark('loaded');
        await qmp.cmd('cont');
        await channel.request(M.PING, Buffer.alloc(0), 30_000);
        mark('agent');
      } else {
        await channel.waitReady(this.opts.bootTimeoutMs ?? (record.accel === 'kvm' ? 30_000 : 120_000));
        mark('booted');
      }
      await this.#freshen(channel);
      mark('clock_and_seed');
      const s = surface ?? this.#pendingSurface.get(id) ?? null;
      this.#pendingSurface.delete(id);
      if (s) await channel.request(M.SURFACE, surfacePayload(s), 30_000);
    } catch (err) {
      channel?.close();
      qmp?.close();
      proc.kill('SIGKILL');
      await this.#cgroups.kill(id);
      for (const s of servers) s.close();
      this.#cgroups.remove(id);
      // A snapshot that cannot be restored is set aside (not retried forever): the next start
      // boots fresh on the kept disk.
      if (restore && existsSync(snapshot)) renameSync(snapshot, join(dir, 'snapshot.failed.zst'));
      const tail = readTail(join(dir, 'console.log'));
      const msg = `${(err as Error).message}${stderr ? `; qemu: ${stderr.trim().slice(0, 300)}` : ''}${tail ? `; console: ${tail}` : ''}`;
      throw new DriverError('start_failed', msg.split(this.opts.rootDir).join('<environments>'));
    }
    this.opts.log.debug({ environment_id: id, restore, ms: marks }, restore ? 'resumed from a memory snapshot' : 'booted');
    const vm: Vm = { proc, channel, qmp, servers, sockets, expectedExit: false, suspending: false, exited };
    this.#vms.set(id, vm);
    proc.once('exit', (code, signal) => {
      if (this.#vms.get(id) !== vm || vm.suspending) return;
      this.#vms.delete(id);
      this.#teardown(id, vm);
      if (!vm.expectedExit) for (const l of this.#exitListeners) l(id, { code, signal });
    });
    // The restored snapshot (hundreds of MB) unlinked off the event loop, once the VM is
    // registered (its exit is heard whatever happens meanwhile).
    if (restore) await fsp.rm(snapshot, { force: true });
  }

  /** The guest's clock from the host's; new randomness mixed in and the pool reseeded. */
  async #freshen(channel: GuestChannel): Promise<void> {
    const now = Date.now();
    const t = Buffer.alloc(12);
    t.writeBigInt64LE(BigInt(Math.floor(now / 1000)), 0);
    t.writeUInt32LE((now % 1000) * 1_000_000, 8);
    await channel.request(M.SETTIME, t);
    await channel.request(M.SEED, randomBytes(64));
  }

  /**
   * Streams `zstd -dc snapshot` into QEMU's incoming socket (zstd writes to the socket itself,
   * no copy through this process); ok() turns false when zstd fails.
   */
  async #feedSnapshot(sockPath: string, snapshot: string, alive: () => boolean): Promise<{ ok(): boolean }> {
    const sock = await connectUnix(sockPath, 30_000, alive);
    const zstd = spawn(which('zstd') ?? '/usr/bin/zstd', ['-dcq', snapshot], { stdio: ['ignore', sock, 'ignore'], env: { ...HOST_ENV } });
    // The child holds its own copy of the socket; QEMU sees the end of the stream when zstd exits.
    sock.destroy();
    let failed = false;
    zstd.once('close', (code) => {
      if (code !== 0) failed = true;
    });
    zstd.once('error', () => {
      failed = true;
    });
    return { ok: () => !failed };
  }

  async #waitStatus(qmp: Qmp, want: string[], ms: number, alive: () => boolean): Promise<string> {
    const deadline = performance.now() + ms;
    for (;;) {
      const st = String((await qmp.cmd('query-status')).status ?? '');
      if (want.includes(st)) return st;
      if (!alive()) throw new DriverError('start_failed', 'the snapshot could not be restored (QEMU exited, or the snapshot is not readable)');
      if (performance.now() > deadline) throw new DriverError('start_failed', `the snapshot did not load in time (status ${st})`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  #teardown(id: string, vm: Vm): void {
    vm.channel.close();
    vm.qmp.close();
    for (const s of vm.servers) {
      s.close();
      (s as HttpServer).closeAllConnections?.();
    }
    for (const s of vm.sockets) s.destroy();
    this.#cgroups.remove(id);
  }

  async start(spec: VmSpec, surface: Surface): Promise<void> {
    if (this.#vms.has(spec.id) || this.#starting.has(spec.id)) return;
    if (!this.#caps.namespaces) throw new DriverError('start_failed', 'this host cannot run QEMU microVMs');
    this.#starting.add(spec.id);
    try {
      await this.create(spec);
      await fsp.rm(join(this.#dir(spec.id), 'snapshot.zst'), { force: true });
      try {
        await this.#boot(spec, surface, false);
      } catch (err) {
        // /dev/kvm opens on hosts whose KVM cannot run this kernel (nested PVM, say): the
        // probe is a real boot; on failure this host uses TCG from then on, and says so.
        if (this.#accel !== 'kvm' || this.opts.accel === 'kvm') throw err;
        this.opts.log.warn({ err, environment_id: spec.id }, 'a microVM did not boot with -accel kvm; this host falls back to TCG (emulated CPU)');
        this.#accel = 'tcg';
        this.#caps.missing.push('KVM is present but could not boot a microVM: QEMU emulates the CPU (TCG)');
        await this.#boot(spec, surface, false);
      }
    } finally {
      this.#starting.delete(spec.id);
    }
  }

  status(id: string): VmStatus {
    if (this.#vms.has(id)) return 'running';
    try {
      if (existsSync(join(this.#dir(id), 'snapshot.zst'))) return 'suspended';
    } catch { /* not an id */ }
    return 'absent';
  }

  #vm(id: string): Vm {
    const vm = this.#vms.get(id);
    if (!vm) throw new DriverError('guest_unavailable', this.status(id) === 'suspended' ? 'the environment is suspended' : 'the environment is not running on this host');
    return vm;
  }

  /**
   * Memory to disk: the guest syncs its data disk, QEMU stops the vCPUs and migrates to a
   * Unix socket this driver serves, which feeds `zstd` (run by the driver, so the snapshot is
   * whole once zstd exits 0; QEMU's own `exec:` migration may kill its command before it
   * flushed), then QEMU quits. The VM counts as running until the snapshot is in place.
   */
  async suspend(id: string): Promise<void> {
    if (this.status(id) === 'suspended') return;
    const vm = this.#vm(id);
    const dir = this.#dir(id);
    const tmp = join(dir, 'snapshot.zst.tmp');
    const sockPath = join(dir, 'migrate.sock');
    rmSync(tmp, { force: true });
    rmSync(sockPath, { force: true });
    const t0 = performance.now();
    const marks: Record<string, number> = {};
    const mark = (k: string) => (marks[k] = Math.round(performance.now() - t0));
    await vm.channel.request(M.SYNC, Buffer.alloc(0), 30_000).catch(() => {});
    mark('sync');
    const zstd = spawn(which('zstd') ?? '/usr/bin/zstd', ['-q', '-1', '-T1', '-o', tmp], { stdio: ['pipe', 'ignore', 'pipe'], env: { ...HOST_ENV } });
    let zerr = '';
    zstd.stderr!.on('data', (d: Buffer) => (zerr += d.toString('utf8')));
    const zstdDone = new Promise<number | null>((resolve) => zstd.once('close', (code) => resolve(code)));
    const server = createServer((conn) => {
      server.close();
      conn.pipe(zstd.stdin!);
      conn.on('error', () => zstd.stdin!.destroy());
    });
    zstd.stdin!.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(sockPath, () => resolve());
    });
    ownSocket(sockPath, sandboxUid(id), 0o700);
    const fail = async (why: string): Promise<never> => {
      server.close();
      zstd.kill('SIGKILL');
      await vm.qmp.cmd('cont').catch(() => {});
      rmSync(tmp, { force: true });
      throw new DriverError('guest_unavailable', `the memory snapshot failed (${why})`);
    };
    try {
      await vm.qmp.cmd('stop');
      await vm.qmp.cmd('migrate-set-parameters', { 'max-bandwidth': 8 * 1024 * 1024 * 1024 });
      await vm.qmp.cmd('migrate', { uri: 'unix:/mnt/env/migrate.sock' });
    } catch (err) {
      return fail((err as Error).message);
    }
    const deadline = performance.now() + 300_000;
    for (;;) {
      const st = await vm.qmp.cmd('query-migrate');
      if (st.status === 'completed') break;
      if (st.status === 'failed' || st.status === 'cancelled' || performance.now() > deadline) {
        return fail(`${String(st.status)}${st['error-desc'] ? `: ${String(st['error-desc'])}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    mark('migrated');
    vm.suspending = true;
    vm.expectedExit = true;
    await vm.qmp.cmd('quit').catch(() => {});
    const killer = setTimeout(() => vm.proc.kill('SIGKILL'), 10_000);
    await vm.exited;
    clearTimeout(killer);
    mark('exited');
    const code = await zstdDone;
    mark('compressed');
    this.opts.log.debug({ environment_id: id, ms: marks }, 'suspended to a memory snapshot');
    rmSync(sockPath, { force: true });
    this.#vms.delete(id);
    this.#teardown(id, vm);
    if (code !== 0) {
      rmSync(tmp, { force: true });
      // QEMU is gone and its memory with it: the environment is stopped (its disk kept).
      for (const l of this.#exitListeners) l(id, { code: null, signal: null });
      throw new DriverError('guest_unavailable', `the memory snapshot could not be written: ${zerr.trim().slice(0, 200)}`);
    }
    renameSync(tmp, join(dir, 'snapshot.zst'));
  }

  async resume(id: string): Promise<void> {
    if (this.#vms.has(id)) return;
    if (this.status(id) !== 'suspended') throw new DriverError('guest_unavailable', 'the environment has no snapshot to resume');
    const spec = this.#specOf(id);
    await this.#boot(spec, null, true);
  }

  #specOf(id: string): VmSpec {
    const rec = this.#record(id);
    const arg = (flag: string) => rec?.argv[rec.argv.indexOf(flag) + 1] ?? '';
    return { id, cpus: Number(arg('-smp')) || 1, memoryMib: parseInt(arg('-m'), 10) || 256, diskGib: 0 };
  }

  async stop(id: string): Promise<void> {
    const vm = this.#vms.get(id);
    try {
      rmSync(join(this.#dir(id), 'snapshot.zst'), { force: true });
    } catch { /* not an id */ }
    if (!vm) {
      await this.#cgroups.kill(id);
      this.#cgroups.remove(id);
      return;
    }
    vm.expectedExit = true;
    await vm.channel.request(M.SYNC, Buffer.alloc(0), 10_000).catch(() => {});
    await vm.qmp.cmd('quit').catch(() => {});
    const killer = setTimeout(() => vm.proc.kill('SIGKILL'), 5_000);
    await vm.exited;
    clearTimeout(killer);
    await this.#cgroups.kill(id);
    this.#vms.delete(id);
    this.#teardown(id, vm);
  }

  async destroy(id: string): Promise<void> {
    await this.stop(id);
    // Off the event loop: a data disk and a memory snapshot are gigabytes, and unlinking them
    // synchronously blocked everything else of the service (the proxy included) for tens of ms.
    await fsp.rm(this.#dir(id), { recursive: true, force: true });
    rmSync(this.#recordPath(id), { force: true });
  }

  leftovers(): string[] {
    // QEMU dies with the host process (pdeathsig); what is left are snapshots, which are kept.
    return this.#cgroups.leftovers().filter((id) => /^env_[0-9a-f]{24}$/.test(id) && !this.#vms.has(id) && this.status(id) !== 'suspended');
  }

  async stats(id: string): Promise<{ memoryBytes: number | null; cpuUsec: number | null }> {
    return this.#cgroups.stats(id);
  }

  async exec(id: string, req: ExecRequest): Promise<ExecResult> {
    const vm = this.#vm(id);
    return vm.channel.exec(req, req.cwd ?? DATA_DISK);
  }

  /** File calls run inside as the agent (inside.ts), through the in-guest agent's exec. */
  async readFile(id: string, path: string, maxBytes: number): Promise<Buffer> {
    return readFileInside((req) => this.exec(id, req), path, maxBytes);
  }

  async writeFile(id: string, path: string, data: Buffer): Promise<{ path: string; size: number }> {
    return writeFileInside((req) => this.exec(id, req), path, data);
  }

  /** Bytes on the host of one environment: data disk, snapshot (for the bench and usage). */
  sizes(id: string): { diskBytes: number; snapshotBytes: number } {
    const size = (f: string) => {
      try {
        return statSync(join(this.#dir(id), f)).size;
      } catch {
        return 0;
      }
    };
    return { diskBytes: size('disk.qcow2'), snapshotBytes: size('snapshot.zst') };
  }

  async close(): Promise<void> {
    // Running VMs stop (their disks stay); suspended ones keep their snapshots for the next run.
    await Promise.all([...this.#vms.keys()].map((id) => this.stop(id).catch(() => {})));
  }
}

/** The SURFACE frame: `env`, `ca.pem`, `files/<n>`, `connections/<n>`, each name NUL length bytes. */
export function surfacePayload(s: Surface): Buffer {
  const parts: Buffer[] = [];
  const add = (name: string, data: Buffer | string) => {
    const b = Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length, 0);
    parts.push(Buffer.from(`${name}\0`, 'utf8'), len, b);
  };
  add('env', envFile(s.env));
  add('ca.pem', s.caPem);
  for (const [n, d] of Object.entries(s.files)) if (/^[^/\0]+$/.test(n) && n !== '.' && n !== '..') add(`files/${n}`, d);
  for (const [n, d] of Object.entries(s.connections)) if (/^[^/\0]+$/.test(n) && n !== '.' && n !== '..') add(`connections/${n}`, d);
  return Buffer.concat(parts);
}

/** A FIFO only `uid` (and root) may open; any old one is replaced. */
function makeFifo(path: string, uid: number): string {
  rmSync(path, { force: true });
  const r = spawnSync(which('mkfifo') ?? '/usr/bin/mkfifo', ['-m', '0600', path], { env: { ...HOST_ENV } });
  if (r.status !== 0) throw new DriverError('start_failed', 'could not make the key FIFO');
  lchownSync(path, uid, uid);
  return path;
}

/**
 * Hands a socket root just made in the VM's directory to the VM's uid. The directory is that
 * uid's, so an escaped QEMU could swap the socket for a symlink between listen and chown:
 * chown followed it (any host file made the uid's: root; a fourth review). lchown changes a
 * symlink itself, and the mode is set only on what is still a socket.
 */
function ownSocket(path: string, uid: number, mode = 0o600): void {
  if (!lstatSync(path).isSocket()) throw new DriverError('start_failed', `${path} is no longer the socket the driver made`);
  chmodSync(path, mode);
  lchownSync(path, uid, uid);
}

/**
 * Writes `data` into the FIFO once its reader opened it; if the reader dies first, opens
 * the other end itself so the write does not wait forever. The FIFO is then removed.
 */
async function feedFifo(path: string, data: string, proc: ChildProcess): Promise<void> {
  const release = () => {
    try {
      closeSync(openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK));
    } catch { /* gone */ }
  };
  proc.once('exit', release);
  if (proc.exitCode !== null || proc.signalCode !== null) release();
  try {
    const fh = await fsp.open(path, 'w');
    try {
      await fh.writeFile(data);
    } finally {
      await fh.close();
    }
  } finally {
    proc.off('exit', release);
    rmSync(path, { force: true });
  }
}

/**
 * The console's last lines, for a start's failure reason (which the tenant reads). The file is
 * in the VM uid's directory: a symlink to a host file (the master key) was followed and its
 * end shown (a fourth review). Opened without following links, a regular file only, its last
 * 4 KiB read.
 */
export function readTail(path: string): string {
  let fd: number | null = null;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    const st = fstatSync(fd);
    if (!st.isFile()) return '';
    const len = Math.min(st.size, 4096);
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, st.size - len);
    return buf.toString('utf8').trim().split('\n').slice(-3).join(' | ').slice(-400);
  } catch {
    return '';
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
