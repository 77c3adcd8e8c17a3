/**
 * The seccomp filter of the process sandbox (issue 24, item 3): a classic-BPF program,
 * encoded here because the machine has libseccomp's library but not its headers, and a
 * filter is small enough to write down. bubblewrap loads it for the sandbox's processes
 * (`--seccomp FD`); the exec launcher loads the same bytes before it becomes the agent
 * (process.ts, EXEC_LAUNCHER), so every process of an environment runs under it.
 *
 * Modelled on Docker's default profile (moby `profiles/seccomp/default.json`): what an
 * unprivileged process can still reach in the kernel that no agent tool needs, and that
 * kernel exploits and container escapes use. Everything else is allowed, except numbers
 * this table does not know: a system call added to the kernel after this list is refused
 * (ENOSYS, so libraries fall back) until someone reviews it.
 *
 * The program:
 *   1. arch must be AUDIT_ARCH_X86_64, else the process is killed (an i386 `int 0x80`
 *      call uses another table, where these numbers mean other calls);
 *   2. x32 numbers (bit 30) and numbers above MAX_KNOWN: ENOSYS;
 *   3. clone3: ENOSYS (its flags are in memory, out of BPF's reach; glibc then falls back
 *      to clone, whose flags are in a register);
 *   4. clone and unshare with any CLONE_NEW* flag: EPERM (no namespace of its own: no user
 *      namespace with "root" in it, no mount namespace to remount things in);
 *   5. personality: only the values Docker allows (0, PER_LINUX32, UNAME26, both, query);
 *   6. the DENIED table: EPERM (io_uring: ENOSYS, so libuv and others fall back);
 *   7. everything else: allowed.
 */

/** x86_64 system call numbers this filter names (arch/x86/entry/syscalls/syscall_64.tbl). */
export const NR = {
  clone: 56, ptrace: 101, syslog: 103, personality: 135, modify_ldt: 154, pivot_root: 155,
  acct: 163, settimeofday: 164, mount: 165, umount2: 166, swapon: 167, swapoff: 168, reboot: 169,
  iopl: 172, ioperm: 173, init_module: 175, delete_module: 176, quotactl: 179, clock_settime: 227,
  kexec_load: 246, add_key: 248, request_key: 249, keyctl: 250, unshare: 272, perf_event_open: 298,
  name_to_handle_at: 303, open_by_handle_at: 304, clock_adjtime: 305, setns: 308, finit_module: 313,
  kexec_file_load: 320, bpf: 321, userfaultfd: 323, io_uring_setup: 425, io_uring_enter: 426,
  io_uring_register: 427, open_tree: 428, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432,
  fspick: 433, clone3: 435, mount_setattr: 442, quotactl_fd: 443, open_tree_attr: 467,
} as const;

/** The highest x86_64 number reviewed for this list (file_setattr, Linux 6.17). */
export const MAX_KNOWN = 469;

export const AUDIT_ARCH_X86_64 = 0xc000003e;
const X32_SYSCALL_BIT = 0x40000000;
export const EPERM = 1;
export const ENOSYS = 38;

/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME. */
export const CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080;

/** personality() values allowed, as Docker's profile does: Linux, PER_LINUX32, UNAME26, both, and the query. */
export const PERSONALITY_ALLOWED = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff] as const;

/** Each denied call, and why. The docs (security.md, "Seccomp") carry the same list. */
export const DENIED: ReadonlyArray<{ names: Array<keyof typeof NR>; errno: number; why: string }> = [
  { names: ['mount', 'umount2', 'pivot_root', 'open_tree', 'move_mount', 'fsopen', 'fsconfig', 'fsmount', 'fspick', 'mount_setattr', 'open_tree_attr'], errno: EPERM, why: 'mounts are the launcher\'s, made before the filter; none is needed after' },
  { names: ['setns'], errno: EPERM, why: 'no joining of another namespace' },
  { names: ['add_key', 'request_key', 'keyctl'], errno: EPERM, why: 'the kernel keyrings are not namespaced: keys of other users, and a long CVE history' },
  { names: ['bpf'], errno: EPERM, why: 'eBPF programs run in the kernel: verifier bugs are kernel exploits' },
  { names: ['userfaultfd'], errno: EPERM, why: 'stretches kernel race windows at will, the classic exploit helper' },
  { names: ['perf_event_open'], errno: EPERM, why: 'side channels on the shared host and a large kernel surface' },
  { names: ['io_uring_setup', 'io_uring_enter', 'io_uring_register'], errno: ENOSYS, why: 'a large, young kernel surface (Docker and Google disable it); ENOSYS so libuv and others fall back' },
  { names: ['init_module', 'finit_module', 'delete_module'], errno: EPERM, why: 'kernel modules' },
  { names: ['kexec_load', 'kexec_file_load', 'reboot'], errno: EPERM, why: 'replacing or stopping the host\'s kernel' },
  { names: ['open_by_handle_at', 'name_to_handle_at'], errno: EPERM, why: 'file handles bypass the mount tree (the "shocker" container escape)' },
  { names: ['modify_ldt'], errno: EPERM, why: 'x86 segment descriptors: old, exploit-prone, unused by 64-bit tools' },
  { names: ['iopl', 'ioperm'], errno: EPERM, why: 'raw I/O ports' },
  { names: ['settimeofday', 'clock_settime', 'clock_adjtime'], errno: EPERM, why: 'the host\'s clock is shared' },
  { names: ['swapon', 'swapoff', 'acct', 'quotactl', 'quotactl_fd'], errno: EPERM, why: 'host-wide settings' },
  { names: ['syslog'], errno: EPERM, why: 'the host kernel\'s log' },
];

// Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
const BPF_LD_W_ABS = 0x20;
const BPF_JMP_JEQ_K = 0x15;
const BPF_JMP_JGT_K = 0x25;
const BPF_JMP_JGE_K = 0x35;
const BPF_JMP_JSET_K = 0x45;
const BPF_RET_K = 0x06;

export const SECCOMP_RET_KILL_PROCESS = 0x80000000;
export const SECCOMP_RET_ERRNO = 0x00050000;
export const SECCOMP_RET_ALLOW = 0x7fff0000;

/** seccomp_data offsets: nr, arch, then args[i] (low 32 bits on little-endian x86_64). */
const OFF_NR = 0;
const OFF_ARCH = 4;
const OFF_ARG0_LO = 16;

export interface Insn { code: number; jt: number; jf: number; k: number }

type Target = string | null; // a label, or null: the next instruction
type Op =
  | { kind: 'ld'; off: number }
  | { kind: 'jmp'; code: number; k: number; jt: Target; jf: Target }
  | { kind: 'ret'; k: number }
  | { kind: 'label'; name: string };

/** A tiny assembler: forward jumps to labels, checked to fit BPF's 8-bit offsets. */
function assemble(ops: Op[]): Insn[] {
  const at = new Map<string, number>();
  let n = 0;
  for (const op of ops) {
    if (op.kind === 'label') at.set(op.name, n);
    else n++;
  }
  const out: Insn[] = [];
  for (const op of ops) {
    if (op.kind === 'label') continue;
    const pc = out.length;
    const rel = (t: Target): number => {
      if (t === null) return 0;
      const dest = at.get(t);
      if (dest === undefined) throw new Error(`seccomp: no label ${t}`);
      const off = dest - pc - 1;
      if (off < 0 || off > 255) throw new Error(`seccomp: jump to ${t} out of range (${off})`);
      return off;
    };
    if (op.kind === 'ld') out.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: op.off });
    else if (op.kind === 'ret') out.push({ code: BPF_RET_K, jt: 0, jf: 0, k: op.k >>> 0 });
    else out.push({ code: op.code, jt: rel(op.jt), jf: rel(op.jf), k: op.k >>> 0 });
  }
  return out;
}

/** The filter as instructions (for the unit test's interpreter, and for encoding). */
export function sandboxProgram(): Insn[] {
  const ops: Op[] = [
    { kind: 'ld', off: OFF_ARCH },
    { kind: 'jmp', code: BPF_JMP_JEQ_K, k: AUDIT_ARCH_X86_64, jt: null, jf: 'kill' },
    { kind: 'ld', off: OFF_NR },
    { kind: 'jmp', code: BPF_JMP_JGE_K, k: X32_SYSCALL_BIT, jt: `errno${ENOSYS}`, jf: null },
    { kind: 'jmp', code: BPF_JMP_JGT_K, k: MAX_KNOWN, jt: `errno${ENOSYS}`, jf: null },
    { kind: 'jmp', code: BPF_JMP_JEQ_K, k: NR.clone3, jt: `errno${ENOSYS}`, jf: null },
    { kind: 'jmp', code: BPF_JMP_JEQ_K, k: NR.clone, jt: 'flags', jf: null },
    { kind: 'jmp', code: BPF_JMP_JEQ_K, k: NR.unshare, jt: 'flags', jf: null },
    { kind: 'jmp', code: BPF_JMP_JEQ_K, k: NR.personality, jt: 'personality', jf: null },
  ];
  const errnos = new Set<number>([EPERM, ENOSYS]);
  for (const d of DENIED) {
    errnos.add(d.errno);
    for (const name of d.names) ops.push({ kind: 'jmp', code: BPF_JMP_JEQ_K, k: NR[name], jt: `errno${d.errno}`, jf: null });
  }
  ops.push({ kind: 'ret', k: SECCOMP_RET_ALLOW });
  // clone / unshare: flags in args[0]; every CLONE_NEW* bit is in its low 32 bits.
  ops.push({ kind: 'label', name: 'flags' }, { kind: 'ld', off: OFF_ARG0_LO });
  ops.push({ kind: 'jmp', code: BPF_JMP_JSET_K, k: CLONE_NEW_ANY, jt: `errno${EPERM}`, jf: null });
  ops.push({ kind: 'ret', k: SECCOMP_RET_ALLOW });
  // personality(unsigned int): only the allowed values.
  ops.push({ kind: 'label', name: 'personality' }, { kind: 'ld', off: OFF_ARG0_LO });
  for (const v of PERSONALITY_ALLOWED) ops.push({ kind: 'jmp', code: BPF_JMP_JEQ_K, k: v, jt: 'personality_ok', jf: null });
  ops.push({ kind: 'ret', k: SECCOMP_RET_ERRNO | EPERM });
  ops.push({ kind: 'label', name: 'personality_ok' }, { kind: 'ret', k: SECCOMP_RET_ALLOW });
  for (const errno of errnos) ops.push({ kind: 'label', name: `errno${errno}` }, { kind: 'ret', k: SECCOMP_RET_ERRNO | errno });
  ops.push({ kind: 'label', name: 'kill' }, { kind: 'ret', k: SECCOMP_RET_KILL_PROCESS });
  return assemble(ops);
}

/** struct sock_filter[] as the kernel takes it (host byte order: little-endian on x86_64). */
export function encode(prog: Insn[]): Buffer {
  const buf = Buffer.alloc(prog.length * 8);
  prog.forEach((i, n) => {
    buf.writeUInt16LE(i.code, n * 8);
    buf.writeUInt8(i.jt, n * 8 + 2);
    buf.writeUInt8(i.jf, n * 8 + 3);
    buf.writeUInt32LE(i.k >>> 0, n * 8 + 4);
  });
  return buf;
}

/** The sandbox's filter, encoded (bwrap --seccomp, and the exec launcher). */
export function sandboxFilter(): Buffer {
  return encode(sandboxProgram());
}
