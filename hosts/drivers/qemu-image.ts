import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, lstatSync, statSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HOST_ENV } from './enter.js';
import { pidAlive } from '../../lib/processes.js';

/**
 * The guest image of the qemu runtime (issue 16), built on this machine from Debian's
 * packages, never downloaded from elsewhere:
 *
 *  - `vmlinux`: the uncompressed kernel of Debian's `linux-image-amd64` (fetched with
 *    `apt-get download`; microvm boots its ELF through the PVH entry, no firmware);
 *  - `initrd.cpio`: the static in-guest agent (qemu-guest/agent.c, PID 1) and the kernel
 *    modules it loads (virtio-mmio, -blk, -net, -console, ext4 and their dependencies);
 *  - `rootfs.img`: a read-only ext4 image of the Debian packages the agent's tools come from
 *    (sh, coreutils, curl, python3, node, socat, procps, e2fsprogs, ...), copied from this
 *    machine's installed packages (`dpkg -L`), with an /etc of its own (no host secrets:
 *    passwd/group name only root, agent and nobody; hosts, an empty resolv.conf).
 *
 * The image directory is named by a hash of what went in (agent source, the kernel package
 * and its version, every package of the closure with its installed version, this builder's
 * own source), so a change rebuilds and an unchanged one is reused: a security update of
 * the host's curl or of the kernel within its ABI gives the next VMs a new image. A VM
 * keeps the image it booted from (its snapshot restores only on that one); images no VM
 * needs any more are removed (pruneGuestImages).
 */
const BUILDER_VERSION = '1';
const HERE = dirname(fileURLToPath(import.meta.url));
/** The agent's C source sits beside this file under hosts/drivers/qemu-guest (also from dist/). */
function agentSource(): string {
  for (const p of [join(HERE, 'qemu-guest', 'agent.c'), join(HERE, '..', '..', '..', 'hosts', 'drivers', 'qemu-guest', 'agent.c')]) {
    if (existsSync(p)) return p;
  }
  throw new Error('hosts/drivers/qemu-guest/agent.c is missing');
}

/** Packages whose files make the guest's userland (with their dependencies). */
export const ROOTFS_PACKAGES = [
  'base-files', 'dash', 'bash', 'coreutils', 'grep', 'sed', 'findutils', 'procps', 'curl', 'ca-certificates', 'python3', 'socat',
  'e2fsprogs', 'tar', 'gzip', 'util-linux', 'nodejs', 'diffutils', 'hostname', 'mawk', 'iproute2',
];
/** Kernel modules the agent loads, dependencies resolved from each module's modinfo. */
const MODULES = ['virtio_mmio', 'virtio_blk', 'virtio_net', 'virtio_console', 'virtio_rng', 'ext4', 'crc32c_generic'];

export interface GuestImage {
  dir: string;
  kernel: string;
  initrd: string;
  rootfs: string;
  kernelVersion: string;
}

/**
 * The environment of every tool the image build runs (issue 24, item 1: no host helper
 * inherits the service's variables): the fixed one (a system PATH, through which the tool
 * names below resolve; no LD_*, no GCC_EXEC_PREFIX, no APT_CONFIG; C locale, so apt's
 * output parses the same everywhere), plus the proxy variables `apt-get download` may need.
 */
function buildEnv(): Record<string, string> {
  const env: Record<string, string> = { ...HOST_ENV };
  for (const k of ['http_proxy', 'https_proxy', 'no_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY']) {
    const v = process.env[k];
    if (v) env[k] = v;
  }
  return env;
}

function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Buffer {
  return execFileSync(cmd, args, { cwd: opts.cwd, maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'pipe'], env: buildEnv() });
}

/** The kernel package `linux-image-amd64` points at, and the version `apt-get download` fetches. */
function kernelPackage(): { name: string; version: string } {
  const out = run('apt-cache', ['depends', 'linux-image-amd64']).toString('utf8');
  const m = /Depends: (linux-image-[0-9][^\s]*)/.exec(out);
  if (!m) throw new Error('apt-cache knows no linux-image-amd64 (is this Debian with its package lists? apt-get update)');
  const candidate = /Candidate: (\S+)/.exec(run('apt-cache', ['policy', m[1]!]).toString('utf8'))?.[1];
  if (!candidate || candidate === '(none)') throw new Error(`apt-cache has no candidate version of ${m[1]!}`);
  return { name: m[1]!, version: candidate };
}

/**
 * The directory name of an image: a hash of everything that goes into it. Package
 * versions are part of it, so an updated package is a new image, never a stale one.
 */
export function imageKey(parts: { kernel: { name: string; version: string }; packages: ReadonlyMap<string, string>; agentSource: Buffer; builderSource: Buffer }): string {
  const h = createHash('sha256').update(`builder ${BUILDER_VERSION}\n`).update(`kernel ${parts.kernel.name}=${parts.kernel.version}\n`);
  for (const name of [...parts.packages.keys()].sort()) h.update(`package ${name}=${parts.packages.get(name)!}\n`);
  return h.update(parts.agentSource).update(parts.builderSource).digest('hex').slice(0, 16);
}

/** The installed packages of ROOTFS_PACKAGES and everything they depend on, by name, with their installed versions. */
function packageClosure(): Map<string, string> {
  // One dpkg-query for every package's status (a call per package costs seconds).
  const installed = new Map<string, string>();
  for (const line of run('dpkg-query', ['-W', '-f=${Package} ${Version} ${Status}\n']).toString('utf8').split('\n')) {
    const [name, version, ...status] = line.split(' ');
    if (name && version && status.join(' ') === 'install ok installed') installed.set(name, version);
  }
  const missing = ROOTFS_PACKAGES.filter((p) => !installed.has(p));
  if (missing.length) throw new Error(`the guest image needs these Debian packages installed on the host: ${missing.join(' ')} (apt-get install -y ${missing.join(' ')})`);
  const out = run('apt-cache', ['depends', '--recurse', '--installed', '--no-recommends', '--no-suggests', '--no-conflicts', '--no-breaks', '--no-replaces', '--no-enhances', ...ROOTFS_PACKAGES]).toString('utf8');
  const closure = new Map<string, string>();
  for (const line of out.split('\n')) {
    const name = line.trim();
    if (line && !line.startsWith(' ') && !line.startsWith('<') && installed.has(name)) closure.set(name, installed.get(name)!);
  }
  return closure;
}

/** The ELF inside a bzImage compressed with xz (Debian's): the data from the xz magic on, decompressed. */
export function extractVmlinux(bzImage: Buffer): Buffer {
  const magic = Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]);
  for (let at = bzImage.indexOf(magic); at !== -1; at = bzImage.indexOf(magic, at + 1)) {
    const r = spawnSync('xz', ['-dc', '--single-stream'], { input: bzImage.subarray(at), maxBuffer: 1 << 30, env: buildEnv() });
    if (r.stdout && r.stdout.length > 4 && r.stdout.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) return r.stdout;
  }
  throw new Error('no xz-compressed ELF kernel inside the bzImage');
}

function modinfoDepends(ko: Buffer): string[] {
  const m = /depends=([A-Za-z0-9_,-]*)\0/.exec(ko.toString('latin1'));
  return m && m[1] ? m[1].split(',').filter(Boolean) : [];
}

/** newc cpio: what the kernel unpacks as the initramfs. */
export function cpio(entries: Array<{ name: string; mode: number; data?: Buffer; rdev?: [number, number] }>): Buffer {
  const parts: Buffer[] = [];
  const pad = (n: number) => Buffer.alloc((4 - (n % 4)) % 4);
  let ino = 1;
  const hex = (n: number) => n.toString(16).padStart(8, '0');
  for (const e of [...entries, { name: 'TRAILER!!!', mode: 0 }] as Array<{ name: string; mode: number; data?: Buffer; rdev?: [number, number] }>) {
    const data = e.data ?? Buffer.alloc(0);
    const name = Buffer.from(`${e.name}\0`);
    const header = `070701${hex(e.name === 'TRAILER!!!' ? 0 : ino++)}${hex(e.mode)}${hex(0)}${hex(0)}${hex(1)}${hex(0)}${hex(data.length)}${hex(0)}${hex(0)}${hex(e.rdev?.[0] ?? 0)}${hex(e.rdev?.[1] ?? 0)}${hex(name.length)}${hex(0)}`;
    parts.push(Buffer.from(header), name, pad(110 + name.length), data, pad(data.length));
  }
  return Buffer.concat(parts);
}

function buildInitrd(modulesRoot: string, agentBin: Buffer): Buffer {
  const byName = new Map<string, string>();
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith('.ko')) byName.set(e.name.slice(0, -3).replace(/-/g, '_'), join(d, e.name));
    }
  };
  walk(modulesRoot);
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (name: string): void => {
    const key = name.replace(/-/g, '_');
    if (seen.has(key)) return;
    seen.add(key);
    const path = byName.get(key);
    if (!path) return; // built into the kernel
    for (const dep of modinfoDepends(readFileSync(path))) visit(dep);
    order.push(key);
  };
  for (const m of MODULES) visit(m);
  const entries: Array<{ name: string; mode: number; data?: Buffer; rdev?: [number, number] }> = [
    { name: 'dev', mode: 0o040755 },
    { name: 'dev/console', mode: 0o020600, rdev: [5, 1] },
    { name: 'init', mode: 0o100755, data: agentBin },
    { name: 'modules', mode: 0o040755 },
    { name: 'modules/order', mode: 0o100644, data: Buffer.from(order.map((m) => `${m}.ko\n`).join('')) },
    ...order.map((m) => ({ name: `modules/${m}.ko`, mode: 0o100644, data: readFileSync(byName.get(m)!) })),
    { name: 'newroot', mode: 0o040755 },
  ];
  return cpio(entries);
}

const SKIP_PREFIXES = ['/usr/share/doc/', '/usr/share/man/', '/usr/share/info/', '/usr/share/locale/', '/usr/share/lintian/', '/etc/'];

function buildRootfs(work: string, packages: string[], out: string): void {
  const root = join(work, 'root');
  mkdirSync(root, { recursive: true });
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64']) mkdirSync(join(root, d), { recursive: true });
  for (const [l, t] of [['bin', 'usr/bin'], ['sbin', 'usr/sbin'], ['lib', 'usr/lib'], ['lib64', 'usr/lib64']]) {
    spawnSync('ln', ['-s', t!, join(root, l!)], { env: buildEnv() });
  }
  const files = new Set<string>();
  for (const pkg of packages) {
    const list = spawnSync('dpkg', ['-L', pkg], { encoding: 'utf8', maxBuffer: 1 << 28, env: buildEnv() }).stdout ?? '';
    for (const f of list.split('\n')) {
      if (!f.startsWith('/') || SKIP_PREFIXES.some((p) => f.startsWith(p))) continue;
      const st = lstatSync(f, { throwIfNoEntry: false });
      if (st && !st.isDirectory()) files.add(f.slice(1));
    }
  }
  // Symlinks and files as they are; paths through /bin etc. land in usr/ via the links above.
  const tar = spawnSync('/bin/sh', ['-c', `tar -C / --no-recursion -cf - -T - | tar -C "${root}" --keep-directory-symlink -xf -`], { input: [...files].join('\n'), maxBuffer: 1 << 20, env: buildEnv() });
  if (tar.status !== 0) throw new Error(`copying the packages' files failed: ${String(tar.stderr).slice(0, 300)}`);
  // /etc: what the tools need, nothing of the host's own configuration or secrets.
  const etc = join(root, 'etc');
  mkdirSync(etc, { recursive: true });
  const copyTree = (from: string, to: string): void => {
    if (!existsSync(from)) return;
    const r = spawnSync('cp', ['-a', from, to], { env: buildEnv() });
    if (r.status !== 0) throw new Error(`cp ${from}: ${String(r.stderr)}`);
  };
  copyTree('/etc/ssl', join(etc, 'ssl'));
  copyTree('/etc/alternatives', join(etc, 'alternatives'));
  for (const f of ['ld.so.conf', 'nsswitch.conf', 'protocols', 'services', 'mime.types', 'os-release', 'debian_version', 'profile', 'bash.bashrc', 'localtime']) copyTree(`/etc/${f}`, join(etc, f));
  copyTree('/etc/ld.so.conf.d', join(etc, 'ld.so.conf.d'));
  // Commands managed by update-alternatives (awk, pager, ...): the link, where its program is in.
  for (const d of ['usr/bin', 'usr/sbin']) {
    for (const name of readdirSync(`/${d}`)) {
      let target: string;
      try {
        target = readlinkSync(`/${d}/${name}`);
      } catch {
        continue;
      }
      if (!target.startsWith('/etc/alternatives/') || existsSync(join(root, d, name))) continue;
      let final: string;
      try {
        final = realpathSync(`/${d}/${name}`);
      } catch {
        continue;
      }
      if (existsSync(join(root, final))) symlinkSync(target, join(root, d, name));
    }
  }
  // awk is mawk (Debian's required one) when the host's choice (gawk, say) is not in the image.
  if (!existsSync(join(root, 'usr/bin/awk')) && existsSync(join(root, 'usr/bin/mawk'))) symlinkSync('mawk', join(root, 'usr/bin/awk'));
  writeFileSync(join(etc, 'passwd'), 'root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:1000:1000:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n');
  writeFileSync(join(etc, 'group'), 'root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n');
  writeFileSync(join(etc, 'hosts'), '127.0.0.1 localhost\n::1 localhost\n');
  writeFileSync(join(etc, 'hostname'), 'env\n');
  writeFileSync(join(etc, 'resolv.conf'), ''); // names are resolved by the gateway, never inside
  writeFileSync(join(etc, 'mtab'), '');
  spawnSync('ldconfig', ['-r', root], { env: buildEnv() });
  for (const d of ['dev', 'proc', 'sys', 'run', 'tmp', 'var/tmp', 'home/agent', 'root', 'mnt']) mkdirSync(join(root, d), { recursive: true });
  chmodSync(join(root, 'tmp'), 0o1777);
  chmodSync(join(root, 'root'), 0o700); // as Debian has it: the agent (uid 1000) cannot list it
  const du = Number(spawnSync('du', ['-sm', root], { encoding: 'utf8', env: buildEnv() }).stdout.split('\t')[0]);
  const sizeMib = Math.ceil(du * 1.15) + 64;
  const mk = spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-O', '^has_journal', '-L', 'gw-root', '-d', root, out, `${sizeMib}M`], { encoding: 'utf8', env: buildEnv() });
  if (mk.status !== 0) throw new Error(`mke2fs -d failed: ${mk.stderr}`);
}

/** The image for this host, built when missing (takes a minute: kernel download, rootfs copy). */
export function ensureGuestImage(baseDir: string, log: (msg: string) => void = () => {}): GuestImage {
  // Fast path (every host start): nothing that goes in changed since the last look, when the
  // package database and lists, the agent and this builder are as they were.
  const stat = (f: string) => {
    try {
      const st = statSync(f);
      return `${st.size}:${st.mtimeMs}`;
    } catch {
      return '-';
    }
  };
  const fingerprint = createHash('sha256').update(readFileSync(agentSource())).update(readFileSync(fileURLToPath(import.meta.url)))
    .update(stat('/var/lib/dpkg/status')).update(stat('/var/lib/apt/lists')).digest('hex');
  const pointer = join(baseDir, `last-${fingerprint.slice(0, 16)}`);
  if (existsSync(pointer)) {
    const found = readImage(readFileSync(pointer, 'utf8').trim());
    if (found) return found.image;
  }
  let image: GuestImage;
  try {
    image = resolveGuestImage(baseDir, log);
  } catch (err) {
    // A new image could not be built (the mirror unreachable for a new kernel, say): the
    // newest complete one of this very agent and builder keeps the host running (an image
    // of another agent would not speak this driver's protocol), and the next start tries again.
    const fallback = newestImage(baseDir, buildId());
    if (!fallback) throw err;
    log(`could not build a new guest image (${(err as Error).message.slice(0, 300)}); booting from the newest one there is, ${fallback.dir}`);
    return fallback;
  }
  writeFileSync(pointer, `${image.dir}\n`);
  return image;
}

/** The files of the image in `dir`, whose kernel came from the package `kernelPackageName`. */
function imageIn(dir: string, kernelPackageName: string): GuestImage {
  return { dir, kernel: join(dir, 'vmlinux'), initrd: join(dir, 'initrd.cpio'), rootfs: join(dir, 'rootfs.img'), kernelVersion: kernelPackageName.replace('linux-image-', '') };
}

/** A complete image (one with `done`) and the lines of its `done` (kernel package, packages, build), or null. */
function readImage(dir: string): { image: GuestImage; done: string[] } | null {
  try {
    const done = readFileSync(join(dir, 'done'), 'utf8').split('\n');
    return { image: imageIn(dir, done[0]!), done };
  } catch {
    return null;
  }
}

/** What an image's agent and builder are (the last line of its `done`): images of the same build differ only in package versions. */
function buildId(): string {
  return createHash('sha256').update(readFileSync(agentSource())).update(readFileSync(fileURLToPath(import.meta.url))).digest('hex').slice(0, 16);
}

/** The most recently built complete image in `baseDir` of build `build`, or null. */
export function newestImage(baseDir: string, build: string): GuestImage | null {
  let best: { image: GuestImage; at: number } | null = null;
  let names: string[] = [];
  try {
    names = readdirSync(baseDir).filter((n) => /^[0-9a-f]{16}$/.test(n));
  } catch {
    return null;
  }
  for (const name of names) {
    const found = readImage(join(baseDir, name));
    if (!found?.done.includes(`build ${build}`)) continue;
    const at = statSync(join(found.image.dir, 'done')).mtimeMs;
    if (!best || at > best.at) best = { image: found.image, at };
  }
  return best?.image ?? null;
}

function resolveGuestImage(baseDir: string, log: (msg: string) => void): GuestImage {
  const kernel = kernelPackage();
  const kpkg = kernel.name;
  const closure = packageClosure();
  const packages = [...closure.keys()].sort();
  const key = imageKey({ kernel, packages: closure, agentSource: readFileSync(agentSource()), builderSource: readFileSync(fileURLToPath(import.meta.url)) });
  const dir = join(baseDir, key);
  const image = imageIn(dir, kpkg);
  if (existsSync(join(dir, 'done'))) return image;
  log(`building the guest image in ${dir} (${kpkg}, ${packages.length} packages)`);
  mkdirSync(baseDir, { recursive: true, mode: 0o755 });
  const work = mkdtempSync(join(tmpdir(), 'gw-vm-image-'));
  const stage = `${dir}.tmp-${process.pid}`;
  try {
    rmSync(stage, { recursive: true, force: true });
    mkdirSync(stage, { recursive: true });
    run('apt-get', ['download', '-q', `${kpkg}=${kernel.version}`], { cwd: work });
    const deb = readdirSync(work).find((f) => f.startsWith(kpkg) && f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${kpkg} gave no .deb`);
    run('dpkg-deb', ['-x', join(work, deb), join(work, 'k')]);
    const vmlinuz = readdirSync(join(work, 'k', 'boot')).find((f) => f.startsWith('vmlinuz-'))!;
    writeFileSync(join(stage, 'vmlinux'), extractVmlinux(readFileSync(join(work, 'k', 'boot', vmlinuz))));
    const kver = readdirSync(join(work, 'k', 'lib', 'modules'))[0]!;
    const agentBin = join(work, 'agent');
    run('gcc', ['-static', '-O2', '-o', agentBin, agentSource()]);
    writeFileSync(join(stage, 'initrd.cpio'), buildInitrd(join(work, 'k', 'lib', 'modules', kver, 'kernel'), readFileSync(agentBin)));
    buildRootfs(work, packages, join(stage, 'rootfs.img'));
    const fd = openSync(join(stage, 'done'), 'w');
    writeSync(fd, `${kpkg}\n${packages.join(' ')}\nbuild ${buildId()}\n`);
    closeSync(fd);
    for (const f of ['vmlinux', 'initrd.cpio', 'rootfs.img', 'done']) chmodSync(join(stage, f), 0o644);
    chmodSync(stage, 0o755);
    rmSync(dir, { recursive: true, force: true });
    renameSync(stage, dir);
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(stage, { recursive: true, force: true });
  }
  return image;
}

/**
 * Marks that the VM whose record is `recordPath` (its vm.json) uses the image at `imageDir`:
 * a marker in the image's `users/` naming the record, and the image's `used` file touched.
 * Throws (ENOENT) when the image is gone; never recreates a removed image's directory.
 */
export function recordImageUse(imageDir: string, recordPath: string): void {
  const users = join(imageDir, 'users');
  try {
    mkdirSync(users, { mode: 0o755 }); // not recursive: a removed image stays removed
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  writeFileSync(join(users, createHash('sha256').update(recordPath).digest('hex').slice(0, 24)), `${recordPath}\n`, { mode: 0o644 });
  writeFileSync(join(imageDir, 'used'), '', { mode: 0o644 });
}

/**
 * Whether an image is still needed: built or used within `graceMs`, or named by a VM
 * record through a marker (a marker whose record is gone or names another image is stale
 * and removed).
 */
function imageNeeded(dir: string, nowMs: number, graceMs: number): boolean {
  const recent = (f: string) => {
    const st = statSync(f, { throwIfNoEntry: false });
    return st !== undefined && nowMs - st.mtimeMs < graceMs;
  };
  if (recent(join(dir, 'done')) || recent(join(dir, 'used'))) return true;
  const users = join(dir, 'users');
  let markers: string[] = [];
  try {
    markers = readdirSync(users);
  } catch {
    /* never used */
  }
  let needed = false;
  for (const m of markers) {
    const marker = join(users, m);
    let imageDir: unknown;
    try {
      imageDir = (JSON.parse(readFileSync(readFileSync(marker, 'utf8').trim(), 'utf8')) as { imageDir?: unknown }).imageDir;
    } catch {
      imageDir = undefined; // the record is gone or unreadable
    }
    if (typeof imageDir === 'string' && resolve(imageDir) === resolve(dir)) needed = true;
    else rmSync(marker, { force: true });
  }
  return needed;
}

/**
 * Removes the guest images no VM needs any more, so updates do not pile images up (each is
 * a few hundred MiB): an image goes when it is not `current`, no VM record names it (a
 * suspended VM restores only on the image it booted from; a running one reads it), and it
 * was neither built nor used within `graceMs` (default a day: another host process sharing
 * the directory may have started before an update and still boot new VMs from an older
 * image; each boot marks its use). Also removes pointers (`last-*`) to images that are
 * gone, and the build and removal directories of processes that are gone. Best effort:
 * what cannot be removed now is looked at again on the next start.
 */
export function pruneGuestImages(baseDir: string, current: string, opts: { nowMs?: number; graceMs?: number } = {}): { removed: string[]; kept: string[] } {
  const nowMs = opts.nowMs ?? Date.now();
  const graceMs = opts.graceMs ?? 24 * 3600_000;
  const removed: string[] = [];
  const kept: string[] = [];
  let names: string[];
  try {
    names = readdirSync(baseDir);
  } catch {
    return { removed, kept };
  }
  for (const name of names) {
    const path = join(baseDir, name);
    const leftover = /^(?:[0-9a-f]{16}\.tmp|\.trash-[0-9a-f]{16})-(\d+)$/.exec(name);
    if (leftover) {
      if (!pidAlive(Number(leftover[1]))) {
        rmSync(path, { recursive: true, force: true });
        removed.push(path);
      }
      continue;
    }
    if (!/^[0-9a-f]{16}$/.test(name) || resolve(path) === resolve(current)) continue;
    if (imageNeeded(path, nowMs, graceMs)) {
      kept.push(path);
      continue;
    }
    // Out of the way in one rename, then deleted: nobody sees half an image.
    const trash = join(baseDir, `.trash-${name}-${process.pid}`);
    try {
      renameSync(path, trash);
    } catch {
      continue;
    }
    rmSync(trash, { recursive: true, force: true });
    removed.push(path);
  }
  for (const name of names) {
    if (!name.startsWith('last-')) continue;
    const pointer = join(baseDir, name);
    try {
      if (!existsSync(join(readFileSync(pointer, 'utf8').trim(), 'done'))) rmSync(pointer, { force: true });
    } catch {
      /* gone meanwhile */
    }
  }
  return { removed, kept };
}
