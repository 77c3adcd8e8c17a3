import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readlinkSync, readFileSync, renameSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type IncomingMessage, type RequestListener, type Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import type { Logger } from '../../lib/log.js';
import { Cgroups } from '../cgroups.js';
import { peerOf, type Peer } from '../peer.js';
import { OutputCollector, readFileInside, writeFileInside } from './inside.js';
import {
  DATA_DISK, DriverError, type ExecRequest, type ExecResult, type HostCapabilities, type HostDriver, type Surface, type VmSpec, type VmStatus,
} from '../driver.js';

/**
 * The `process` runtime (issue 12, item 2 and 3): each environment is a process tree in its
 * own user, mount, pid, network, ipc, uts and cgroup namespaces (bubblewrap), in its own
 * cgroups (cgroups.ts), with a directory of the host as its data disk at /home/agent.
 *
 * Sealed by construction:
 * - Network: the sandbox's network namespace has a loopback interface and nothing else,
 *   so no address outside exists for it. Its one way out is the Unix socket
 *   /run/service/gateway.sock, which this driver serves by connecting to the gateway
 *   proxy; a relay inside (socat) listens on 127.0.0.1:3128, where HTTPS_PROXY points.
 * - Files: the sandbox's root is a fresh tmpfs holding /usr (read-only), a few named files
 *   of /etc, its own /run/service, /tmp and the data disk. The host's directories are
 *   passed as open file descriptors (`--bind-fd`), so neither DATA_DIR's path nor any other
 *   environment's appears anywhere the sandbox can read (not even in its own command line).
 * - Users: as root, each environment runs as its own unprivileged host uid (200000 +
 *   a hash of its id); even a process that left every namespace could read nothing of
 *   DATA_DIR (0700, root) nor another environment's disk (0700, its own uid). Inside, the
 *   agent is uid 1000 `agent` with no capabilities and no_new_privs.
 * - Variables: the sandbox starts from an empty environment; each process gets only the
 *   surface's variables (placeholders, never secret values).
 *
 * Exec enters the running sandbox's namespaces with nsenter (util-linux) and drops to the
 * agent user with setpriv, in a cgroup of its own under the environment's, so a timeout
 * kills exactly that command's tree.
 */
export interface ProcessDriverOptions {
  /** Where data disks and /run/service trees live (DATA_DIR/environments). */
  rootDir: string;
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
const UID_RANGE = 800_000;

interface Vm {
  spec: VmSpec;
  proc: ChildProcess;
  /** The sandbox's first process, as the host sees it (nsenter's target). */
  initPid: number;
  status: 'running' | 'suspended';
  bridge: Server;
  bridgeSockets: Set<Socket>;
  control: HttpServer | null;
  browser: HttpServer | null;
  /** Set while the host stops it: its exit is not news. */
  expectedExit: boolean;
  exited: Promise<void>;
  execSeq: number;
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

/** Writes a file atomically (readers never see half of it): temp file, then rename. */
function writeAtomic(path: string, data: string | Buffer, mode: number): void {
  const tmp = `${path}.${process.pid}.tmp`;
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

const PRIVATE_MOUNT = 'mount --bind -- "$1" /mnt || exit 124; shift; exec "$@"';
const CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';

/** Runs inside as the agent: a missing cwd or command is told apart from the command's own exit. */
const EXEC_SHIM = 'cd -- "$1" 2>/dev/null || { printf cwd >&3; exit 126; }; shift; command -v -- "$1" >/dev/null 2>&1 || { printf notfound >&3; exit 127; }; exec 3>&-; exec "$@"';

export class ProcessDriver implements HostDriver {
  readonly name = 'process';
  readonly #vms = new Map<string, Vm>();
  readonly #exitListeners: Array<(id: string, info: { code: number | null; signal: string | null }) => void> = [];
  readonly #cgroups: Cgroups;
  readonly #caps: HostCapabilities;
  readonly #root = process.getuid?.() === 0;
  readonly #relay: string[];

  constructor(private readonly opts: ProcessDriverOptions) {
    mkdirSync(opts.rootDir, { recursive: true, mode: 0o700 });
    this.#cgroups = new Cgroups(opts.hostTag, opts.cgroupRoot);
    const missing = [...this.#cgroups.support.missing];
    const namespaces = this.#probeNamespaces(missing);
    const socat = which('socat');
    // Two relays inside: the gateway proxy (127.0.0.1:3128) and the browser pool's CDP
    // endpoints of this environment's leases (127.0.0.1:9222).
    const loop = (port: number, sock: string): string => `while :; do socat TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/service/${sock}; sleep 0.2; done`;
    this.#relay = socat
      ? ['/bin/sh', '-c', `exec </dev/null; (${loop(BROWSER_PORT, 'browser.sock')}) & ${loop(RELAY_PORT, 'gateway.sock')}`]
      : ['/usr/bin/node', '-e', `const n=require('net');for(const [p,s] of [[${RELAY_PORT},'gateway.sock'],[${BROWSER_PORT},'browser.sock']])n.createServer(c=>{const u=n.connect('/run/service/'+s);c.pipe(u).pipe(c);c.on('error',()=>u.destroy());u.on('error',()=>c.destroy())}).listen(p,'127.0.0.1')`];
    if (!this.#root) missing.push('not running as root: every environment shares the service\'s uid (isolation between environments rests on the mount namespace alone)');
    this.#caps = {
      driver: 'process',
      network_sealed: namespaces,
      namespaces,
      cgroup: (({ layout, memory, cpu, pids, freeze, kill }) => ({ layout, memory, cpu, pids, freeze, kill }))(this.#cgroups.support),
      memory_across_host_restart: false,
      disk_quota: false,
      insecure: opts.insecure,
      missing: [...missing, 'disk_gib is not enforced by the process runtime (a directory, not a block device)'],
    };
  }

  /** Whether bubblewrap can make every namespace here (tried, not assumed). */
  #probeNamespaces(missing: string[]): boolean {
    if (!which('bwrap')) {
      missing.push('bubblewrap (bwrap) is not installed: apt-get install bubblewrap');
      return false;
    }
    if (!which('nsenter') || !which('setpriv')) {
      missing.push('nsenter and setpriv (util-linux) are needed to run commands in a sandbox');
      return false;
    }
    const args = ['--unshare-all', '--die-with-parent', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--', '/bin/true'];
    const cmd = this.#root ? ['setpriv', '--reuid=' + BASE_UID, '--regid=' + BASE_UID, '--clear-groups', '--', 'bwrap', ...args] : ['bwrap', ...args];
    const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', timeout: 10_000 });
    if (r.status !== 0) {
      missing.push(`bubblewrap cannot create namespaces here: ${(r.stderr || r.error?.message || '').trim().slice(0, 200)}`);
      return false;
    }
    return true;
  }

  capabilities(): HostCapabilities {
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

  #uid(id: string): number {
    return this.#root ? sandboxUid(id) : process.getuid!();
  }

  async create(spec: VmSpec): Promise<void> {
    const dir = this.#dir(spec.id);
    const disk = join(dir, 'disk');
    mkdirSync(disk, { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, 'service', 'files'), { recursive: true, mode: 0o755 });
    mkdirSync(join(dir, 'service', 'connections'), { recursive: true, mode: 0o755 });
    mkdirSync(join(dir, 'etc'), { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
    chmodSync(join(dir, 'service'), 0o755);
    chmodSync(disk, 0o700);
    if (this.#root) chownSync(disk, this.#uid(spec.id), this.#uid(spec.id));
    const etc = join(dir, 'etc');
    writeAtomic(join(etc, 'passwd'), `root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:${AGENT_UID}:${AGENT_UID}:agent:${AGENT_HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`, 0o644);
    writeAtomic(join(etc, 'group'), `root:x:0:\nagent:x:${AGENT_UID}:\nnogroup:x:65534:\n`, 0o644);
    writeAtomic(join(etc, 'hosts'), '127.0.0.1 localhost\n::1 localhost\n', 0o644);
    writeAtomic(join(etc, 'hostname'), 'env\n', 0o644);
    // No resolver: names are resolved by the gateway, never inside.
    writeAtomic(join(etc, 'resolv.conf'), '', 0o644);
  }

  async applySurface(id: string, s: Surface): Promise<void> {
    const service = join(this.#dir(id), 'service');
    if (!existsSync(service)) return;
    writeAtomic(join(service, 'env'), envFile(s.env), 0o644);
    writeAtomic(join(service, 'ca.pem'), s.caPem, 0o644);
    const sync = (sub: string, want: Record<string, Buffer | string>): void => {
      const d = join(service, sub);
      mkdirSync(d, { recursive: true, mode: 0o755 });
      for (const [name, data] of Object.entries(want)) writeAtomic(join(d, name), data, 0o444);
      for (const name of readdirSync(d)) {
        if (!(name in want)) rmSync(join(d, name), { force: true });
      }
    };
    sync('files', s.files);
    sync('connections', s.connections);
  }

  async start(spec: VmSpec, surface: Surface): Promise<void> {
    if (this.#vms.has(spec.id)) return;
    if (!this.#caps.namespaces) throw new DriverError('start_failed', 'this host cannot create namespaces');
    await this.create(spec);
    await this.applySurface(spec.id, surface);
    const dir = this.#dir(spec.id);
    const service = join(dir, 'service');
    const uid = this.#uid(spec.id);

    // The bridge first, so the relay inside finds the socket the moment it starts.
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
    });
    await new Promise<void>((resolve, reject) => {
      bridge.once('error', reject);
      bridge.listen(sockPath, () => resolve());
    });
    chmodSync(sockPath, 0o666);
    // The control socket: one per environment, so the socket is the identity.
    let control: HttpServer | null = null;
    if (this.opts.control) {
      const ctlPath = join(service, 'control.sock');
      rmSync(ctlPath, { force: true });
      // A caller's process is looked up in the sandbox's own network namespace.
      control = createHttpServer(this.opts.control(spec.id, (socket) => {
        const vm = this.#vms.get(spec.id);
        return vm ? peerOf(socket, vm.initPid) : Promise.resolve(null);
      }));
      control.headersTimeout = 10_000;
      control.requestTimeout = 30_000;
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
      browser.on('upgrade', this.opts.browser(spec.id));
      await new Promise<void>((resolve, reject) => {
        browser!.once('error', reject);
        browser!.listen(brPath, () => resolve());
      });
      chmodSync(brPath, 0o666);
    }

    this.#cgroups.remove(spec.id);
    this.#cgroups.create(spec.id, { cpus: spec.cpus, memoryMib: spec.memoryMib, pidsMax: PIDS_MAX });

    // bwrap runs as the environment's unprivileged uid, which cannot traverse DATA_DIR
    // (0700): the wrapper, still root, makes a private mount namespace where only this
    // environment's directory is bound at /mnt, and bwrap binds from there. No host path
    // appears in the sandbox's command line either.
    const args: string[] = [
      '--unshare-all', '--die-with-parent', '--new-session', '--uid', String(AGENT_UID), '--gid', String(AGENT_UID), '--hostname', 'env', '--info-fd', '3',
      '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/sbin', '/sbin',
    ];
    for (const e of ETC_READ_ONLY) args.push('--ro-bind-try', `/etc/${e}`, `/etc/${e}`);
    for (const e of ['passwd', 'group', 'hosts', 'hostname', 'resolv.conf']) args.push('--ro-bind', `/mnt/etc/${e}`, `/etc/${e}`);
    args.push(
      '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--tmpfs', '/run',
      '--bind', '/mnt/disk', AGENT_HOME,
      '--ro-bind', '/mnt/service', '/run/service',
      '--chdir', AGENT_HOME, '--clearenv', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', AGENT_HOME,
      '--', ...this.#relay,
    );
    const procs = this.#cgroups.procsFiles(spec.id);
    const sandbox = this.#root
      ? ['unshare', '-m', '--propagation', 'private', '--', '/bin/sh', '-c', PRIVATE_MOUNT, 'sh', dir, 'setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'bwrap', ...args]
      : ['unshare', '-U', '-r', '-m', '--propagation', 'private', '--', '/bin/sh', '-c', PRIVATE_MOUNT, 'sh', dir, 'bwrap', ...args];
    const proc = spawn('/bin/sh', ['-c', CGROUP_JOIN, 'sh', String(procs.length), ...procs, ...sandbox], {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' },
    });
    let stderr = '';
    proc.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString('utf8');
    });
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    try {
      const initPid = await this.#readChildPid(proc, () => stderr);
      await this.#waitRelay(initPid, proc, () => stderr);
      const vm: Vm = { spec, proc, initPid, status: 'running', bridge, bridgeSockets, control, browser, expectedExit: false, exited, execSeq: 0 };
      this.#vms.set(spec.id, vm);
      proc.once('exit', (code, signal) => {
        if (this.#vms.get(spec.id) !== vm) return;
        this.#vms.delete(spec.id);
        this.#teardown(spec.id, vm);
        if (!vm.expectedExit) for (const l of this.#exitListeners) l(spec.id, { code, signal });
      });
    } catch (err) {
      proc.kill('SIGKILL');
      await this.#cgroups.kill(spec.id);
      bridge.close();
      control?.close();
      browser?.close();
      this.#cgroups.remove(spec.id);
      // The reason is shown to the developer (failure_reason): no host path in it.
      const message = (err as Error).message.split(this.opts.rootDir).join('<environments>');
      throw new DriverError('start_failed', message);
    }
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

  #teardown(id: string, vm: Vm): void {
    vm.bridge.close();
    vm.control?.close();
    vm.control?.closeAllConnections();
    vm.browser?.close();
    vm.browser?.closeAllConnections();
    for (const s of vm.bridgeSockets) s.destroy();
    this.#cgroups.remove(id);
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
      // Nothing runs (a previous run's leftovers are killed too).
      await this.#cgroups.kill(id);
      this.#cgroups.remove(id);
      return;
    }
    vm.expectedExit = true;
    // Thaw first: a frozen tree cannot die on v1-style freezers, and v2 kills frozen trees anyway.
    await this.#cgroups.freeze(id, false);
    await this.#cgroups.kill(id);
    vm.proc.kill('SIGKILL');
    await vm.exited;
    this.#vms.delete(id);
    this.#teardown(id, vm);
  }

  async destroy(id: string): Promise<void> {
    await this.stop(id);
    rmSync(this.#dir(id), { recursive: true, force: true });
  }

  leftovers(): string[] {
    return this.#cgroups.leftovers().filter((id) => /^env_[0-9a-f]{24}$/.test(id) && !this.#vms.has(id));
  }

  async stats(id: string): Promise<{ memoryBytes: number | null; cpuUsec: number | null }> {
    return this.#cgroups.stats(id);
  }

  /** Runs argv inside the sandbox as the agent (uid 1000, no capabilities, no_new_privs). */
  #spawnInside(vm: Vm, execTag: string, argv: string[], env: Record<string, string>): ChildProcess {
    const procs = this.#cgroups.procsFiles(vm.spec.id, execTag);
    const inner = [
      'nsenter', '-t', String(vm.initPid), '-U', '-m', '-n', '-p', '-i', '-u', '-C', '-r', '-w', '-S', String(AGENT_UID), '-G', String(AGENT_UID), '--',
      // uid 1000 holds no capability after the switch; no_new_privs keeps it that way
      // (no setuid or file-capability binary can give any back).
      '/usr/bin/setpriv', '--no-new-privs', '--',
      ...argv,
    ];
    return spawn('/bin/sh', ['-c', CGROUP_JOIN, 'sh', String(procs.length), ...procs, ...inner], {
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      env,
      detached: true,
    });
  }

  async exec(id: string, req: ExecRequest): Promise<ExecResult> {
    const vm = this.#vm(id);
    if (vm.status !== 'running') throw new DriverError('guest_unavailable', 'the environment is suspended');
    const tag = `x${++vm.execSeq}`;
    const started = performance.now();
    const child = this.#spawnInside(vm, tag, ['/bin/sh', '-c', EXEC_SHIM, 'exec', req.cwd ?? AGENT_HOME, ...req.command], req.env ?? {});
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
    if (marker === 'notfound') throw new DriverError('exec_failed', `command not found in the environment: ${req.command[0]}`);
    if (marker === 'cwd') throw new DriverError('exec_failed', `cwd does not exist in the environment: ${req.cwd}`);
    if (code === 125 && !marker && performance.now() - started < 1000 && out.kept('stdout') === 0) {
      // The cgroup join or nsenter failed before anything of the agent's ran.
      const err = out.text('stderr').toString('utf8');
      if (/nsenter|setpriv|cgroup/.test(err)) throw new DriverError('guest_unavailable', 'the environment could not be entered');
    }
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
    await Promise.all([...this.#vms.keys()].map((id) => this.stop(id).catch(() => {})));
  }
}
