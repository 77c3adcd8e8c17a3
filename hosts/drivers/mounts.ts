import { execFile, spawn } from 'node:child_process';
import { HOST_ENV, PERL } from './enter.js';

/**
 * A start's mounts in one process (issue 29). The process sandbox mounts, per start, two
 * tmpfs (/run/service, the generated /etc files) and its disk image on a loop device:
 * `mount`, `mount`, `losetup --find`, `mount` were four helper processes, ~4 ms each from
 * Node here. MOUNT_PROGRAM, a small Perl program (no module; the fixed environment of
 * HOST_ENV; every argument ours, none the caller's), makes the same system calls in one:
 *
 *   - tmpfs: mount(2) with the flags and data `mount -t tmpfs -o ...` would pass;
 *   - the image: a free loop device from /dev/loop-control (LOOP_CTL_GET_FREE), bound to
 *     the image opened O_DIRECT with LOOP_CONFIGURE and LO_FLAGS_DIRECT_IO (what
 *     `losetup --find --direct-io=on` does; where the image's filesystem has no O_DIRECT,
 *     tmpfs for one, buffered, as losetup falls back; a device another process took in between is
 *     EBUSY: the next free one is tried), or the device given (one already bound to the
 *     image is reused: disk-image.ts), then mount(2) as ext4. It prints the device.
 *
 * And a mount moved (MS_MOVE), for a sandbox slot's claim (process.ts).
 *
 * Operations run in order and stop at the first failure, which is reported with what
 * failed (exit 1); the caller unmounts what was mounted, as before.
 */
const MOUNT_PROGRAM = `
sub fail { my $e = $!; syswrite(STDERR, "$_[0]: $e\\n"); exit 1 }
my $ext4 = 'ext4';
my $tmpfs = 'tmpfs';
while (@ARGV) {
  my $op = shift(@ARGV);
  if ($op eq 'tmpfs') {
    my ($src, $at, $flags, $data) = splice(@ARGV, 0, 4);
    syscall(165, $src, $at, $tmpfs, $flags + 0, $data) == 0 or fail("mount tmpfs $at");
  } elsif ($op eq 'move') {
    my ($from, $at) = splice(@ARGV, 0, 2);
    syscall(165, $from, $at, 0, 0x2000, 0) == 0 or fail("move $from");
  } elsif ($op eq 'image') {
    my ($img, $at, $flags, $data, $dev) = splice(@ARGV, 0, 5);
    if ($dev eq '') {
      # O_DIRECT where the image's filesystem has it (then the loop does direct I/O), else not.
      my ($dio, $file) = (16, undef);
      sysopen($file, $img, 2 | 0x4000) or ($dio = 0, sysopen($file, $img, 2)) or fail('open image');
      sysopen(my $ctl, '/dev/loop-control', 2) or fail('loop-control');
      for (my $try = 0; ; $try++) {
        my $n = ioctl($ctl, 0x4C82, 0);
        defined($n) or fail('no free loop device');
        $dev = '/dev/loop' . ($n + 0);
        sysopen(my $loop, $dev, 2) or fail("open $dev");
        my $name = length($img) > 63 ? substr($img, -63) : $img;
        my $config = pack('L L Q5 L4 a64 a64 a32 Q2 Q8', fileno($file), 0, 0, 0, 0, 0, 0, 0, 0, 0, $dio, $name, '', '', 0, 0, (0) x 8);
        last if ioctl($loop, 0x4C0A, $config);
        ($! + 0) == 16 && $try < 20 or fail("loop configure $dev");
      }
    }
    syscall(165, $dev, $at, $ext4, $flags + 0, $data) == 0 or fail("mount $dev");
    syswrite(STDOUT, "$dev\\n");
  } else {
    fail("unknown operation $op");
  }
}
`;

/** mount(2) flags of `mount -o`'s words. */
const FLAGS: Record<string, number> = { nosuid: 0x2, nodev: 0x4, noexec: 0x8 };

/** `mount -o` options split as mount(8) splits them: flags, and the rest as the filesystem's data. */
export function mountOptions(options: string): { flags: number; data: string } {
  let flags = 0;
  const data: string[] = [];
  for (const o of options.split(',').filter(Boolean)) {
    if (o in FLAGS) flags |= FLAGS[o]!;
    else data.push(o);
  }
  return { flags, data: data.join(',') };
}

export type MountOp =
  /** `source`: the name mountinfo shows for it. */
  | { kind: 'tmpfs'; source: string; at: string; options: string }
  /** A mount moved (MS_MOVE: `mount --move from at`). */
  | { kind: 'move'; from: string; at: string }
  /** `device`: a loop device already bound to the image (reused), else a free one is bound. */
  | { kind: 'image'; img: string; at: string; options: string; device: string | null };

/** Runs the operations in one process; the loop device of the image operation, if any. */
export function mountAll(ops: MountOp[]): Promise<string | null> {
  const argv: string[] = [];
  for (const op of ops) {
    if (op.kind === 'move') {
      argv.push('move', op.from, op.at);
      continue;
    }
    const { flags, data } = mountOptions(op.options);
    if (op.kind === 'tmpfs') argv.push('tmpfs', op.source, op.at, String(flags), data);
    else argv.push('image', op.img, op.at, String(flags), data, op.device ?? '');
  }
  return new Promise((resolve, reject) => {
    execFile(PERL, ['-e', MOUNT_PROGRAM, ...argv], { env: { ...HOST_ENV }, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(String(stderr || err.message).trim().slice(0, 300)));
      resolve(String(stdout).trim() || null);
    });
  });
}

/**
 * A disk's release in one process (issue 29): what `umount -l` per mount, `losetup --list
 * --associated` and `losetup --detach` per device did, five helper processes per destroy
 * (each blocking the service's event loop 4-7 ms for Node's spawn on a small VM):
 *
 *   - each mount point given: umount2(2) with MNT_DETACH and UMOUNT_NOFOLLOW (a symlink
 *     where a mount point was is never followed), in order; one that is not mounted any more
 *     is passed over (as `umount -l`'s failure was);
 *   - then, if an image is given and exists, every loop device bound to it (the device and
 *     inode LOOP_GET_STATUS64 reports equal the image's, as losetup --associated compares
 *     them; found under /sys/block/loop*) is detached with LOOP_CLR_FD (a device still
 *     busy is set to clear itself when the last user is gone, as losetup --detach does).
 *
 * Root, HOST_ENV, no module; every argument the driver's. Exit 1 with what failed when a
 * bound device cannot be detached.
 */
const RELEASE_PROGRAM = `
sub fail { my $e = $!; syswrite(STDERR, "$_[0]: $e\\n"); exit 1 }
my $img = shift(@ARGV);
for my $at (@ARGV) { syscall(166, $at, 2 | 8) }
exit 0 unless length($img);
my @st = stat($img) or exit 0;
my ($dev, $ino) = @st[0, 1];
opendir(my $d, '/sys/block') or exit 0;
for my $name (sort grep { /^loop[0-9]+$/ } readdir($d)) {
  next unless -e "/sys/block/$name/loop/backing_file";
  sysopen(my $loop, "/dev/$name", 0) or next;
  my $info = "\\0" x 232;
  ioctl($loop, 0x4C05, $info) or next;
  my ($ldev, $lino) = unpack('Q2', $info);
  next unless $ldev == $dev && $lino == $ino;
  ioctl($loop, 0x4C01, 0) or fail("detach /dev/$name");
}
exit 0;
`;

/** Detaches `mountpoints` (lazily, in order), then every loop device bound to `img` (null: none), in one process. */
export function releaseAll(img: string | null, mountpoints: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(PERL, ['-e', RELEASE_PROGRAM, img ?? '', ...mountpoints], { env: { ...HOST_ENV }, cwd: '/', timeout: 60_000 }, (err, _stdout, stderr) => {
      if (err) return reject(new Error(String(stderr || err.message).trim().slice(0, 300)));
      resolve();
    });
  });
}

/**
 * The claim's mount moves, made by a process started ahead (issue 29). A slot's claim moved
 * its three mounts with MOUNT_PROGRAM: Node's spawn from the service (~200 MB) plus Perl's
 * start were 5–13 ms of the claim on a small VM, the moves themselves ~0.01 ms each. So each
 * slot starts this one when it is made: it waits on its stdin for the one line the claim
 * writes (the environment's directory), moves `<from>/<sub>` to `<to>/<sub>` for each sub
 * given (MS_MOVE), in order, stopping at the first failure (exit 1, what failed on stderr),
 * and exits 0. End of input without a line (the slot destroyed, or the service gone: the
 * pipe closes with it) exits 0 having done nothing. Root, HOST_ENV, run from `/`, no module;
 * every argument and the line are the driver's, none the caller's.
 */
const MOVER_PROGRAM = `
sub fail { my $e = $!; syswrite(STDERR, "$_[0]: $e\\n"); exit 1 }
my $from = shift(@ARGV);
my $to = <STDIN>;
exit 0 unless defined($to) && $to =~ m{^(/[^\\n]+)\\n$};
$to = $1;
for my $sub (@ARGV) {
  my ($a, $b) = ("$from/$sub", "$to/$sub");
  syscall(165, $a, $b, 0, 0x2000, 0) == 0 or fail("move $a");
}
syswrite(STDOUT, "moved\n");
exit 0;
`;

export interface MountMover {
  /** Moves the mounts under `to`; rejects with what failed (then some may have moved: the caller unmounts both). */
  move(to: string): Promise<void>;
  /** Its process is still waiting (else the caller moves the mounts with mountAll). */
  ready(): boolean;
  /** Ends it without moving anything. */
  cancel(): void;
}

export function startMountMover(from: string, subs: string[], timeoutMs = 10_000): MountMover {
  const child = spawn(PERL, ['-e', MOVER_PROGRAM, from, ...subs], { env: { ...HOST_ENV }, cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let used = false;
  child.stderr!.on('data', (d: Buffer) => {
    if (stderr.length < 1000) stderr += d.toString('utf8');
  });
  child.stdin!.on('error', () => {});
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  // It says "moved" once every move is made, before its exit: the claim goes on at that line,
  // not at the process's exit (a process's teardown and its reaping are a few ms on a small VM).
  const moved = new Promise<boolean>((resolve) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      if (out === 'moved\n') resolve(true);
    });
    child.stdout!.once('close', () => resolve(false));
  });
  return {
    ready: () => !used && child.exitCode === null && child.signalCode === null && child.pid !== undefined,
    async move(to: string): Promise<void> {
      if (used) throw new Error('the mount mover was used already');
      used = true;
      if (to.includes('\n')) throw new Error('not a directory for the mount mover');
      child.stdin!.end(`${to}\n`);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      });
      const said = await Promise.race([moved, timeout]);
      if (said === true) {
        clearTimeout(timer);
        return;
      }
      const code = said === 'timeout' ? said : await Promise.race([exited, timeout]);
      clearTimeout(timer);
      if (code === 'timeout') {
        child.kill('SIGKILL');
        throw new Error('the mount mover did not answer');
      }
      if (code !== 0) throw new Error(stderr.trim().slice(0, 300) || `the mount mover exited with ${code}`);
      throw new Error('the mount mover moved nothing');
    },
    cancel(): void {
      used = true;
      child.stdin!.end();
    },
  };
}
