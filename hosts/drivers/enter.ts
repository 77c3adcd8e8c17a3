/**
 * How a command enters a running process sandbox (issue 24, items 1 and 3).
 *
 * What broke: the exec's `env` was the environment of the host-side root shell that joined
 * the cgroup and then looked `nsenter` up in PATH, so `PATH=<the disk's host path>/bin`
 * ran a file of the agent's as root on the host, and `LD_PRELOAD` reached host processes.
 * And a process entering through nsenter does not carry the sandbox's seccomp filter
 * (filters are inherited from the parent, and nsenter's parent is the host).
 *
 * Now nothing the caller gives is in any host process's environment or argv. Every host
 * process of the entry runs with HOST_ENV and absolute paths. The caller's argv and
 * variables travel on a pipe (fd 4) to ENTER_LAUNCHER, a small Perl program (perl-base is
 * Essential in Debian; no module is loaded, so it reads nothing but its own binary and
 * libraries) started on the host side, which:
 *
 *   1. opens the sandbox's namespaces from the host's /proc/<init pid>/ns/*, checks that
 *      the pid still belongs to the sandbox's first process (its start time, given with the
 *      pid, read by the driver when the sandbox started: a pid reused by another process
 *      after the sandbox's end is never entered) and, still the host's root, drops its
 *      supplementary groups;
 *   2. joins them (the user namespace last when it is root, first when it is not: the order
 *      nsenter uses), then forks, so its child is in the sandbox's pid namespace;
 *   3. in the child, still root of the sandbox's user namespace (a uid the agent cannot
 *      ptrace): sets no_new_privs, empties the capability bounding and ambient sets, loads
 *      the seccomp filter (the same bytes bubblewrap gave the sandbox), becomes the agent
 *      (uid/gid 1000; a credential change leaves it non-dumpable until the exec), and execs
 *      the command with exactly the caller's variables (`env -i` semantics).
 *
 * Nothing in the sandbox's mount namespace runs with the host's privileges: the launcher
 * was loaded from the host's /usr before it joined, and the only program it executes there
 * runs as the agent, filtered. (The sandbox's root directory is the agent's own: a program
 * exec'd there with privileges would load the agent's /etc/ld.so.preload.)
 *
 * The parent waits and exits with the child's status (128 + the signal, as a shell does).
 * A failure before the command runs writes `enter` to fd 3 (the exec's marker pipe) and
 * exits 125.
 *
 * It reads the payload first (an empty one: exit 125, having joined nothing), and the
 * payload names the cgroups (argv has only the sandbox's pid and start time and the agent's uids), so a
 * launcher can be started before its environment is known and wait, outside every
 * environment's cgroups: a pool slot starts one for the first exec of the environment that
 * claims it (process.ts). Then, before it joins, the launcher writes its pid into the
 * environment's v1 cgroup.procs files and opens the exec's cgroup2 directory, and it forks the command's
 * process straight into that directory (clone3, CLONE_INTO_CGROUP: a pid written into a
 * cgroup2 cgroup.procs waits for an RCU grace period, ~15 ms of every exec that followed no
 * other migration, measured), so the command's whole tree is charged to and killable with
 * the exec's cgroup; after it became the agent it changes to the exec's directory (else `cwd` on fd 3,
 * exit 126) and looks the command up in the caller's PATH (else `notfound`, exit 127), as a
 * shell's `cd` and `command -v` would, then closes fd 3 and execs. Issue 29: these were a
 * `sh` before the launcher and a `sh` shim after it, two process images of every exec.
 */

/** The environment of every host-side helper: fixed, no LD_*, nothing inherited. */
export const HOST_ENV: Readonly<Record<string, string>> = Object.freeze({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' });

export const PERL = '/usr/bin/perl';

// Syscall numbers (x86_64): close 3, setgroups 116, setresuid 117, setresgid 119, prctl 157, setns 308,
// clone3 435, close_range 436.
// prctl: PR_SET_NO_NEW_PRIVS 38, PR_SET_SECCOMP 22 (SECCOMP_MODE_FILTER 2), PR_CAPBSET_DROP 24,
// PR_CAP_AMBIENT 47 (PR_CAP_AMBIENT_CLEAR_ALL 4). Perl's syscall() passes a value that is a
// number as an integer and anything else as a pointer to its bytes: every integer below is
// numeric (`+ 0`), the sock_fprog is a packed string.
export const ENTER_LAUNCHER = `
my ($pid, $start, $uid, $gid) = map { $_ + 0 } splice(@ARGV, 0, 4);
sub marker { if (open(my $m, '>&=', 3)) { syswrite($m, $_[0]) } }
sub fail { my $e = $!; syswrite(STDERR, "enter: $_[0]: $e\\n"); marker('enter'); exit 125 }
sub join_procs { for my $f (@_) { open(my $h, '>', $f) or fail('cgroup'); defined(syswrite($h, "$$\\n")) or fail('cgroup'); close($h) } }
open(my $in, '<&=', 4) or fail('payload');
binmode($in);
my $buf = do { local $/; <$in> };
close($in);
length($buf) >= 4 or fail('payload');
my $flen = unpack('V', $buf);
my $filter = substr($buf, 4, $flen);
length($filter) == $flen && $flen % 8 == 0 && $flen > 0 or fail('filter');
my @items = unpack('(V/a*)*', substr($buf, 4 + $flen));
my $cgdir = shift(@items);
my $nprocs = shift(@items);
defined($cgdir) && defined($nprocs) && $nprocs =~ /^[0-9]{1,2}$/ && $nprocs <= @items or fail('cgroup');
join_procs(splice(@items, 0, $nprocs));
my $cg;
if (length($cgdir)) { sysopen($cg, $cgdir, 0x10000) or fail('cgroup') }
my $cwd = shift(@items);
my $argc = shift(@items);
defined($argc) && $argc >= 1 && $argc <= @items or fail('argv');
my @argv = splice(@items, 0, $argc);
my $root = $> == 0;
my %fd;
for my $ns ('user', 'cgroup', 'ipc', 'uts', 'net', 'pid', 'mnt') { open($fd{$ns}, '<', "/proc/$pid/ns/$ns") or fail("namespace $ns") }
# Still the sandbox's first process once they are open (its start time, as the driver read it
# when the sandbox started): a pid its process no longer holds, taken by another one, is
# never entered (the descriptors hold the namespaces of whoever had the pid at the open).
open(my $st, '<', "/proc/$pid/stat") or fail('sandbox');
my $stat = do { local $/; <$st> };
close($st);
my @f = split(/ /, substr($stat, rindex($stat, ')') + 2));
defined($f[19]) && $f[19] == $start && $start > 0 or fail('sandbox');
if ($root) { syscall(116, 0, 0) == 0 or fail('setgroups') }
my @later = grep { syscall(308, fileno($fd{$_}), 0) != 0 } ('cgroup', 'ipc', 'uts', 'net', 'pid', 'mnt');
syscall(308, fileno($fd{user}), 0) == 0 or fail('setns user');
for (@later) { syscall(308, fileno($fd{$_}), 0) == 0 or fail("setns $_") }
close($_) for values(%fd);
# The child is born in the exec's cgroup2 directory (clone3 with CLONE_INTO_CGROUP and
# SIGCHLD, otherwise a fork); where the kernel has no clone3, the launcher moves itself there
# first (a write to cgroup.procs) and forks.
my $child = -1;
if ($cg) {
  $child = syscall(435, pack('Q11', 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fileno($cg)), 88);
  join_procs("$cgdir/cgroup.procs") if $child < 0;
}
$child = fork() if $child < 0;
defined($child) or fail('fork');
if ($child) {
  waitpid($child, 0) == $child or exit(125);
  exit(($? & 127) ? 128 + ($? & 127) : ($? >> 8));
}
syscall(157, 38, 1, 0, 0, 0) == 0 or fail('no_new_privs');
for my $cap (0 .. 63) { syscall(157, 24, $cap, 0, 0, 0) }
syscall(157, 47, 4, 0, 0, 0);
my $prog = pack('S x6 P', $flen / 8, $filter);
syscall(157, 22, 2, $prog, 0, 0) == 0 or fail('seccomp');
syscall(119, $gid, $gid, $gid) == 0 or fail('setresgid');
syscall(117, $uid, $uid, $uid) == 0 or fail('setresuid');
%ENV = ();
for (@items) { my ($k, $v) = split(/=/, $_, 2); $ENV{$k} = $v }
if (length($cwd) && !chdir($cwd)) { marker('cwd'); exit 126 }
my $cmd = $argv[0];
my $path = $cmd;
if ($cmd !~ m{/}) {
  undef $path;
  for my $d (split(/:/, $ENV{PATH} // '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', -1)) {
    my $c = (length($d) ? $d : '.') . "/$cmd";
    if (-f $c && -x _) { $path = $c; last }
  }
}
if (!length($cmd) || !defined($path) || !-e $path) { marker('notfound'); exit 127 }
# Nothing but stdio reaches the command: fd 3, and any descriptor the service itself was
# started with that is not close-on-exec (a supervisor's pipe), end here (close_range).
syscall(436, 3, 0xffffffff, 0) == 0 or map { syscall(3, $_) } 3 .. 1023;
exec { $path } @argv;
my $e = $! + 0;
syswrite(STDERR, "exec: $cmd: $!\\n");
exit($e == 2 ? 127 : 126);
`;

/**
 * How a process sandbox's first process starts, as root (issue 29: one Perl process where
 * `sh` (cgroup join) → `unshare -m` → `sh` (`mount --rbind`; `awk | sort | umount -l`) →
 * `setpriv` were nine, ~2 ms each, and the unwind grew by a process per mount). In order:
 *
 *   1. writes its pid into the environment's cgroup.procs files (exit 125 if it cannot);
 *   2. makes a private copy of the host's mount namespace (unshare CLONE_NEWNS, then `/`
 *      recursively private, so nothing it does propagates back to the host);
 *   3. binds the environment's directory (its disk, /run/service and /etc mounts) at /mnt,
 *      recursively, for bwrap to bind from (exit 124 if it cannot);
 *   4. detaches, in that copy, every environment's and sandbox slot's mounts it holds (this host's and any other
 *      process sandbox host's on the machine: the pattern, not a directory; deepest first).
 *      The copy would hold each of them otherwise, and a filesystem some namespace holds
 *      stays alive after its environment stopped (its image's space is not freed at
 *      destroy);
 *   5. drops its supplementary groups and becomes the environment's host uid (a root that
 *      changes every uid loses its capabilities), then execs bubblewrap.
 *
 * argv: n, n cgroup.procs files, the environment's directory, its uid, bubblewrap's argv.
 * It runs with HOST_ENV and loads no module; nothing in argv is the caller's. Syscall
 * numbers (x86_64): mount 165, umount2 166, unshare 272; MS_BIND 0x1000, MS_REC 0x4000,
 * MS_PRIVATE 0x40000, MNT_DETACH 2; close_range 436, close 3.
 */
export const START_LAUNCHER = `
my $n = shift(@ARGV) + 0;
my @procs = splice(@ARGV, 0, $n);
my $dir = shift(@ARGV);
my $id = shift(@ARGV) + 0;
sub fail { my $e = $!; syswrite(STDERR, "start: $_[0]: $e\\n"); exit $_[1] }
for my $f (@procs) { open(my $h, '>', $f) or fail('cgroup', 125); defined(syswrite($h, "$$\\n")) or fail('cgroup', 125); close($h) }
syscall(272, 0x20000) == 0 or fail('unshare', 124);
my ($none, $root, $mnt) = ('none', '/', '/mnt');
syscall(165, $none, $root, 0, 0x44000, 0) == 0 or fail('private mounts', 124);
syscall(165, $dir, $mnt, 0, 0x5000, 0) == 0 or fail('bind', 124);
open(my $mi, '<', '/proc/self/mountinfo') or fail('mountinfo', 124);
my @held;
while (my $l = <$mi>) {
  my $at = (split(/ /, $l))[4];
  push(@held, $at) if defined($at) && $at =~ m{/(?:env|slot)_[0-9a-f]+/(disk|service|etc|disk[.]migrate)$};
}
close($mi);
for my $at (sort { $b cmp $a } @held) {
  (my $p = $at) =~ s/\\\\([0-7]{3})/chr(oct($1))/ge;
  syscall(166, $p, 2);
}
syscall(116, 0, 0) == 0 or fail('setgroups', 124);
syscall(119, $id, $id, $id) == 0 or fail('setresgid', 124);
syscall(117, $id, $id, $id) == 0 or fail('setresuid', 124);
# bubblewrap gets stdio, its info fd (3) and the filter (4): any other descriptor the service
# was started with that is not close-on-exec (a supervisor's pipe) ends here (close_range).
syscall(436, 5, 0xffffffff, 0) == 0 or map { syscall(3, $_) } 5 .. 1023;
exec { $ARGV[0] } @ARGV;
fail("exec $ARGV[0]", 124);
`;

/** The cgroups an exec's launcher joins: the exec's cgroup2 directory (null: none) and the environment's v1 cgroup.procs files. */
export interface EnterCgroups {
  unified: string | null;
  v1Procs: string[];
}

/**
 * fd 4's bytes: u32 LE length of the filter, the filter, then length-prefixed strings
 * (u32 LE + bytes): the exec's cgroup2 directory ('' for none), the number of v1
 * cgroup.procs files, those files (the driver's paths), the directory to run in ('' for the
 * namespace's root), argc, argv..., NAME=value... A NUL cannot be in an argument or a
 * variable of a real process, so it is refused here rather than cut there.
 */
export function enterPayload(filter: Buffer, argv: string[], env: Record<string, string>, cwd = '', cgroups: EnterCgroups = { unified: null, v1Procs: [] }): Buffer {
  if (cgroups.v1Procs.length > 99) throw new Error('too many cgroup files');
  const items = [cgroups.unified ?? '', String(cgroups.v1Procs.length), ...cgroups.v1Procs, cwd, String(argv.length), ...argv];
  for (const [k, v] of Object.entries(env)) {
    if (!k || k.includes('=')) throw new Error(`not a variable name: ${JSON.stringify(k)}`);
    items.push(`${k}=${v}`);
  }
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4);
  head.writeUInt32LE(filter.length);
  parts.push(head, filter);
  for (const s of items) {
    if (s.includes('\u0000')) throw new Error('an argument or variable holds a NUL byte');
    const b = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length);
    parts.push(len, b);
  }
  return Buffer.concat(parts);
}
