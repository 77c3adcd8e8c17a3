import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, rmdirSync, statSync, statfsSync, truncateSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { releaseAll } from './mounts.js';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { HOST_ENV } from './enter.js';
import { pidAlive } from '../../lib/processes.js';

/**
 * The process sandbox's data disk as a filesystem of its own (issue 24, item 4): an ext4
 * image of `disk_gib` on a loop device, mounted at `<environment>/disk` while the
 * environment runs. Writing past it is the agent's ENOSPC; the host's filesystem is not
 * touched, because the image is **preallocated** (fallocate): its blocks are the
 * environment's from creation, so no number of environments filling their disks can take
 * the space the store and the audit log write into.
 *
 * Measured on the development machine (ext4 on virtio, kernel 6.18): fallocate of 10 GiB
 * 23 ms, mkfs.ext4 of it (lazy inode tables) 28 ms, losetup + mount 18 ms, umount 9 ms.
 * A sparse image costs the same time and nothing until written, but then N environments
 * overcommit the host's disk, and the first to find it full gets EIO inside its filesystem
 * while the store gets ENOSPC: the failure this change exists to remove. So disks are
 * reservations, and creating one is refused when it would leave the filesystem with less
 * than `reserveBytes` free. Only where fallocate is not supported (some network
 * filesystems) is an image sparse, and the driver lists that in its capabilities.
 *
 * - mkfs: `-m 0` (no root reserve: the agent is the only user), `root_owner` (the disk's
 *   root is the environment's uid from the first byte), `nodiscard` (for a file, mke2fs's
 *   discard punches holes: it would undo the preallocation), lazy inode tables, and the
 *   mount's `noinit_itable` (the fallocated blocks read as zeros already: the background
 *   zeroing would only write 2.5 % of the disk for nothing).
 * - The loop device uses direct I/O (no second copy of the disk in the host's page cache).
 * - A loop device already bound to the image is reused: a filesystem some other mount
 *   namespace of the host still holds (a copy made while the environment ran) is then
 *   mounted again as the same superblock, never a second one on the same bytes.
 * - Resize: the image is extended (fallocate) and the filesystem grown: online while the
 *   environment runs (`losetup -c`, `resize2fs` through the kernel, which needs
 *   CAP_SYS_RESOURCE), else offline at its next start (`e2fsck -f`, `resize2fs`; the
 *   development machine's root lacks CAP_SYS_RESOURCE, so there a grow waits for a
 *   restart). Shrinking is refused: ext4 cannot shrink while mounted, and offline it risks
 *   the data; the disk keeps its size and the driver says so in its log.
 * - A spare (issue 29): making an image is ~30 ms of a first start (fallocate, mkfs), so
 *   one image of the size last asked for is made ahead, in a root-only directory, and a new
 *   disk of that size is that spare, renamed into the environment's directory: one rename,
 *   atomic, so two starts (or two host processes on one directory) never get the same
 *   spare. A spare was never mounted nor seen by any environment: it is what `ensure` would
 *   make, but with its root owned by root; the first mount gives that root to the
 *   environment's uid. At most one spare exists (one disk's worth of the host's disk, kept
 *   inside the reserve check like any disk); a request of another size removes it, and a
 *   spare of the new size follows.
 */

export interface DiskTools {
  mkfs: string;
  losetup: string;
  resize2fs: string;
  e2fsck: string;
  dumpe2fs: string;
  mount: string;
  umount: string;
  fallocate: string;
}

const GIB = 1024 ** 3;

/** How a disk image is mounted: no devices, no setuid; the fallocated blocks read as zeros already (no background zeroing). */
export const IMAGE_MOUNT_OPTIONS = 'nodev,nosuid,noinit_itable';

function tool(name: string): string | null {
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  return null;
}

/** The tools an image disk needs, at absolute paths; or what is missing. */
export function findDiskTools(): { tools: DiskTools | null; missing: string | null } {
  const found = {
    mkfs: tool('mkfs.ext4'), losetup: tool('losetup'), resize2fs: tool('resize2fs'), e2fsck: tool('e2fsck'), dumpe2fs: tool('dumpe2fs'),
    mount: tool('mount'), umount: tool('umount'), fallocate: tool('fallocate'),
  };
  const absent = Object.entries(found).filter(([, p]) => !p).map(([k]) => k);
  if (absent.length) return { tools: null, missing: `disk_gib is not enforced: ${absent.join(', ')} not found (e2fsprogs, util-linux)` };
  return { tools: found as DiskTools, missing: null };
}

/** Runs a host-side helper: absolute path, the fixed environment, nothing of the caller's. */
export function run(cmd: string, args: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...HOST_ENV }, timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr || (err && code === -1 ? err.message : '')) });
    });
  });
}

async function must(cmd: string, args: string[], what: string): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${what}: ${(r.stderr || r.stdout).trim().slice(0, 300)}`);
  return r.stdout;
}

/** Mount points under `dir` in this process's mount namespace (deepest first). */
export function mountsUnder(dir: string): string[] {
  const prefix = `${dir.replace(/\/+$/, '')}/`;
  const out: string[] = [];
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    const at = line.split(' ')[4];
    if (!at) continue;
    // mountinfo escapes space, tab, newline and backslash as octal.
    const path = at.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (path.startsWith(prefix)) out.push(path);
  }
  return out.sort((a, b) => b.length - a.length);
}

/** The largest disk a spare (and the process sandbox's pool slots) is kept ready of. */
export const MAX_SPARE_GIB = 32;

export class DiskImages {
  /** Set once an image could not be preallocated here: disks then overcommit. */
  sparse = false;

  /**
   * `preallocate` false (GATEWAY_DISK_PREALLOCATE=0): images are sparse on purpose, for hosts
   * that knowingly overcommit (and test machines); the limit inside holds the same.
   */
  /**
   * Images this process made or took as a spare and has not mounted yet, with the uid their
   * root goes to at the first mount (null: mkfs gave it already). Such an image is known: no
   * loop device can hold it and its filesystem has the size asked for, so the start skips
   * `losetup --list` and `dumpe2fs` (~8 ms).
   */
  readonly #fresh = new Map<string, number | null>();
  /** The size a spare is kept of (the last asked for), and the spare being made. */
  #spareGib: number | null = null;
  #making: Promise<void> | null = null;

  /**
   * `spares`: a root-only directory for the spare image (null: none is kept). It must be on
   * the filesystem of the environments' directories (a spare is renamed into one).
   */
  constructor(
    private readonly tools: DiskTools,
    private readonly reserve: (fsBytes: number) => number = (b) => Math.max(2 * GIB, Math.floor(b * 0.02)),
    private readonly preallocate = true,
    private readonly spares: string | null = null,
  ) {
    if (!preallocate) this.sparse = true;
    if (spares) {
      mkdirSync(spares, { recursive: true, mode: 0o700 });
      // Half-made spares of a process that is gone; a complete one says which size to keep.
      for (const name of readdirSync(spares)) {
        const pid = /^\d+g\.(\d+)\.[0-9a-f]+\.img\.new$/.exec(name)?.[1];
        if (pid && !pidAlive(Number(pid))) rmSync(join(spares, name), { force: true });
        const gib = /^(\d+)g\.[0-9a-f.]+\.img$/.exec(name)?.[1];
        if (gib) this.#spareGib = Number(gib);
      }
    }
  }

  /** Creates the image (absent only: an existing disk is kept, whatever its size): the spare of that size when there is one. */
  async ensure(img: string, gib: number, owner: number): Promise<boolean> {
    if (existsSync(img)) return false;
    if (await this.#takeSpare(img, gib)) {
      this.#fresh.set(img, owner);
      return true;
    }
    await this.#make(img, gib, owner, dirname(img));
    this.#fresh.set(img, null);
    return true;
  }

  /** Makes an image of `gib` at `img`, its root `owner`'s, refused below the reserve of `room`'s filesystem. */
  async #make(img: string, gib: number, owner: number, room: string): Promise<void> {
    const bytes = gib * GIB;
    const fs = statfsSync(room);
    const free = fs.bavail * fs.bsize;
    const keep = this.reserve(fs.blocks * fs.bsize);
    if (free - (this.preallocate ? bytes : 0) < keep) {
      throw new Error(`this host has no room for a ${gib} GiB disk (${Math.floor(free / GIB)} GiB free, ${Math.ceil(keep / GIB)} GiB kept for the service)`);
    }
    // Made under another name and renamed: a crash never leaves a half-made disk as the disk.
    const tmp = `${img}.new`;
    await rm(tmp, { force: true });
    try {
      const f = this.preallocate ? await run(this.tools.fallocate, ['-l', String(bytes), '--', tmp]) : { code: 1, stdout: '', stderr: 'not supported: sparse by configuration' };
      if (f.code !== 0) {
        if (!/not supported/i.test(f.stderr)) throw new Error(`fallocate: ${f.stderr.trim().slice(0, 300)}`);
        this.sparse = true;
        writeFileSync(tmp, '', { mode: 0o600 });
        truncateSync(tmp, bytes);
      }
      chmodSync(tmp, 0o600);
      await must(this.tools.mkfs, ['-q', '-F', '-m', '0', '-E', `lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=${owner}:${owner}`, '--', tmp], 'mkfs.ext4');
      renameSync(tmp, img);
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** The spare of `gib`, renamed to `img` (true), or none; a spare of another size is removed (its room is the new disk's). */
  async #takeSpare(img: string, gib: number): Promise<boolean> {
    if (!this.spares) return false;
    // A large disk is made for its environment, but no spare (nor pool slot) of its size
    // follows: one request of 200 GiB kept 200 GiB preallocated twice over, and other
    // tenants' starts found no room (a fourth review). The spare stays at the size before.
    if (gib > MAX_SPARE_GIB) return false;
    this.#spareGib = gib;
    let took = false;
    for (const name of readdirSync(this.spares)) {
      const m = /^(\d+)g\.[0-9a-f.]+\.img$/.exec(name);
      if (!m) continue;
      const spare = join(this.spares, name);
      if (took || Number(m[1]) !== gib) {
        await rm(spare, { force: true });
        continue;
      }
      try {
        renameSync(spare, img);
      } catch {
        continue; // another start took it first
      }
      if (this.size(img) === gib * GIB) took = true;
      else await rm(img, { force: true });
    }
    return took;
  }

  /** The disk size last asked for (a spare's, and the process sandbox's slots'), or null before any. */
  lastGib(): number | null {
    return this.#spareGib;
  }

  /**
   * Makes the spare of the size last asked for, when there is none and none is being made
   * (in the background after a start; never throws: no room is no spare).
   */
  refill(): Promise<void> {
    const gib = this.#spareGib;
    if (!this.spares || gib === null || this.#making) return this.#making ?? Promise.resolve();
    try {
      if (readdirSync(this.spares).some((n) => n.startsWith(`${gib}g.`) && n.endsWith('.img'))) return Promise.resolve();
    } catch {
      return Promise.resolve(); // the directory is gone (the host is closing)
    }
    const name = join(this.spares, `${gib}g.${process.pid}.${randomBytes(4).toString('hex')}`);
    this.#making = this.#make(`${name}.img`, gib, 0, this.spares)
      .then(async () => {
        // Asked for another size meanwhile: this one is no use.
        if (this.#spareGib !== gib) await rm(`${name}.img`, { force: true });
      })
      .catch(() => {})
      .finally(() => {
        this.#making = null;
      });
    return this.#making;
  }

  /** Whether no loop device is bound to the image, waiting up to `ms` for a lazy detach to finish. */
  async #released(img: string, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    for (;;) {
      if ((await this.boundDevice(img)) === null) return true;
      if (Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A loop device already bound to the image (to be reused), or null (a fresh image: none can be). */
  async boundDevice(img: string): Promise<string | null> {
    if (this.#fresh.has(img)) return null;
    const bound = (await run(this.tools.losetup, ['--list', '--noheadings', '--output', 'NAME', '--associated', img])).stdout.trim().split('\n').filter(Boolean);
    return bound[0] ?? null;
  }

  /** The loop device bound to the image (an existing one is reused), with direct I/O. */
  async attach(img: string): Promise<string> {
    return (await this.boundDevice(img)) ?? (await must(this.tools.losetup, ['--find', '--show', '--direct-io=on', '--', img], 'losetup')).trim();
  }

  /** Mounts the image at `at` (its loop device attached first); a device that went away in between is attached again once. */
  async mount(img: string, at: string): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      const dev = await this.attach(img);
      const r = await run(this.tools.mount, ['-t', 'ext4', '-o', IMAGE_MOUNT_OPTIONS, '--', dev, at]);
      if (r.code === 0) {
        this.mounted(img, at);
        return dev;
      }
      if (attempt > 0) throw new Error(`mount: ${r.stderr.trim().slice(0, 300)}`);
    }
  }

  /** After the image's first mount at `at` (here or by mounts.ts): a spare's root, root's until now, becomes the environment's; lost+found goes. */
  mounted(img: string, at: string): void {
    const owner = this.#fresh.get(img);
    this.#fresh.delete(img);
    if (owner !== undefined && owner !== null) chownSync(at, owner, owner);
    // mke2fs makes lost+found; nothing needs it (only e2fsck, which makes it again).
    try {
      const lf = join(at, 'lost+found');
      if (existsSync(lf) && readdirSync(lf).length === 0) rmdirSync(lf);
    } catch { /* kept */ }
  }

  /** Size of the image, bytes. */
  size(img: string): number {
    return statSync(img).size;
  }

  /** The filesystem's own size (it lags the image's after a grow that could not finish), bytes. */
  async fsSize(imgOrDev: string): Promise<number> {
    const out = await must(this.tools.dumpe2fs, ['-h', '--', imgOrDev], 'dumpe2fs');
    const count = /^Block count:\s+(\d+)/m.exec(out);
    const size = /^Block size:\s+(\d+)/m.exec(out);
    if (!count || !size) throw new Error('dumpe2fs: no block count');
    return Number(count[1]) * Number(size[1]);
  }

  /**
   * Gives the disk `gib`: the image is extended (preallocated), then the filesystem grown
   * to it. `dev` set: the disk is mounted, grown online (resize2fs through the kernel,
   * which needs CAP_SYS_RESOURCE; where the host's root lacks it the filesystem is grown
   * offline at the next start: 'deferred'). `dev` null: not mounted (a start), grown
   * offline (e2fsck -f, resize2fs). A smaller `gib` is refused: a disk never shrinks.
   */
  async grow(img: string, dev: string | null, gib: number, releaseWaitMs = 10_000): Promise<'grown' | 'same' | 'refused' | 'deferred' | 'busy'> {
    const want = gib * GIB;
    const have = this.size(img);
    if (this.#fresh.has(img) && want === have) return 'same';
    if (want < have) return 'refused';
    if (want > have) {
      const fs = statfsSync(join(img, '..'));
      if (fs.bavail * fs.bsize - (this.preallocate ? want - have : 0) < this.reserve(fs.blocks * fs.bsize)) throw new Error(`this host has no room to grow the disk to ${gib} GiB`);
      const f = this.preallocate ? await run(this.tools.fallocate, ['-l', String(want), '--', img]) : { code: 1 };
      if (f.code !== 0) truncateSync(img, want);
    }
    if ((await this.fsSize(dev ?? img)) >= want) return 'same';
    if (dev) {
      await must(this.tools.losetup, ['--set-capacity', dev], 'losetup --set-capacity');
      const r = await run(this.tools.resize2fs, [dev]);
      return r.code === 0 ? 'grown' : 'deferred';
    }
    // Offline only while no filesystem of the kernel's holds the image: a loop device still
    // bound to it is the previous run's mount going away lazily (a process of the run still
    // exiting holds it). Its superblock is live: e2fsck and resize2fs on the file under it
    // would be undone (or corrupted) when it is written back, and a mount of that device
    // now shares it at the old size. Wait for it to go; if it does not, the disk grows at a
    // later start.
    if (!(await this.#released(img, releaseWaitMs))) return 'busy';
    const fsck = await run(this.tools.e2fsck, ['-f', '-p', '--', img], 600_000);
    // 0: clean, 1: errors corrected; anything else: leave the filesystem as it is.
    if (fsck.code !== 0 && fsck.code !== 1) throw new Error(`e2fsck: ${(fsck.stderr || fsck.stdout).trim().slice(0, 300)}`);
    await must(this.tools.resize2fs, ['--', img], 'resize2fs');
    return 'grown';
  }

  /**
   * Unmounts (lazily: a socket or process of the host may hold it a moment longer) and
   * lets go of the loop device: detached now, or by the kernel once its last user is gone.
   */
  async release(img: string, mountpoints: string[]): Promise<void> {
    this.#fresh.delete(img);
    try {
      // One helper process (mounts.ts) where umount and losetup were up to five.
      await releaseAll(existsSync(img) ? img : null, mountpoints);
      return;
    } catch {
      // What it could not do, the tools try again (what is done already fails harmlessly).
    }
    for (const m of mountpoints) await run(this.tools.umount, ['-l', '--', m]);
    if (!existsSync(img)) return;
    const bound = (await run(this.tools.losetup, ['--list', '--noheadings', '--output', 'NAME', '--associated', img])).stdout.trim().split('\n').filter(Boolean);
    for (const dev of bound) await run(this.tools.losetup, ['--detach', dev]);
  }
}
