import { expect } from 'chai';
import {
  AUDIT_ARCH_X86_64, CLONE_NEW_ANY, DENIED, ENOSYS, EPERM, MAX_KNOWN, NR, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS,
  encode, sandboxFilter, sandboxProgram,
} from '../../../hosts/drivers/seccomp.js';

/**
 * The sandbox's seccomp program (issue 24, item 3), run here by a classic-BPF interpreter
 * over the encoded bytes (what the kernel gets), against the calls the filter decides on.
 * The same filter's effect from inside a real sandbox: test/security/sandbox-userns-seccomp.test.ts.
 */
interface Call { nr: number; arch?: number; args?: number[] }

/** Runs an encoded sock_filter[] over one seccomp_data, as the kernel would (the opcodes the filter uses). */
function run(bytes: Buffer, call: Call): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr | 0, 0);
  data.writeUInt32LE(call.arch ?? AUDIT_ARCH_X86_64, 4);
  (call.args ?? []).forEach((a, i) => data.writeBigUInt64LE(BigInt(a), 16 + i * 8));
  let acc = 0;
  for (let pc = 0, steps = 0; steps < 10_000; steps++) {
    expect(pc, 'the program runs off its end').to.be.lessThan(bytes.length / 8);
    const code = bytes.readUInt16LE(pc * 8);
    const jt = bytes.readUInt8(pc * 8 + 2);
    const jf = bytes.readUInt8(pc * 8 + 3);
    const k = bytes.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20: acc = data.readUInt32LE(k); pc++; break; // ld [k]
      case 0x15: pc += 1 + (acc === k ? jt : jf); break; // jeq
      case 0x25: pc += 1 + (acc > k ? jt : jf); break; // jgt
      case 0x35: pc += 1 + (acc >= k ? jt : jf); break; // jge
      case 0x45: pc += 1 + ((acc & k) >>> 0 ? jt : jf); break; // jset
      case 0x06: return k; // ret
      default: throw new Error(`opcode ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('no return');
}

const errno = (e: number) => (SECCOMP_RET_ERRNO | e) >>> 0;
const filter = sandboxFilter();

describe('hosts: the sandbox seccomp filter (encoded classic BPF)', () => {
  it('is whole instructions, within the kernel\'s 4096, only forward jumps', () => {
    expect(filter.length % 8).to.equal(0);
    expect(filter.length / 8).to.be.within(10, 4096);
    expect(encode(sandboxProgram()).equals(filter)).to.equal(true);
  });

  it('kills any other architecture (an i386 int 0x80 call numbers another table)', () => {
    expect(run(filter, { nr: NR.keyctl, arch: 0x40000003 })).to.equal(SECCOMP_RET_KILL_PROCESS);
    expect(run(filter, { nr: 0, arch: 0x40000003 })).to.equal(SECCOMP_RET_KILL_PROCESS);
    expect(run(filter, { nr: 0, arch: 0xc00000b7 })).to.equal(SECCOMP_RET_KILL_PROCESS);
  });

  it('refuses x32 numbers and numbers past the reviewed table with ENOSYS', () => {
    expect(run(filter, { nr: 0x40000000 | 0 })).to.equal(errno(ENOSYS));
    expect(run(filter, { nr: 0x40000000 | 59 })).to.equal(errno(ENOSYS));
    expect(run(filter, { nr: MAX_KNOWN + 1 })).to.equal(errno(ENOSYS));
    expect(run(filter, { nr: -1 })).to.equal(errno(ENOSYS));
    expect(run(filter, { nr: MAX_KNOWN })).to.equal(SECCOMP_RET_ALLOW);
  });

  const table: Array<[string, number, number]> = [];
  for (const d of DENIED) for (const name of d.names) table.push([name, NR[name], errno(d.errno)]);
  for (const [name, nr, want] of table) {
    it(`${name} (${nr}) → ${want === errno(EPERM) ? 'EPERM' : 'ENOSYS'}`, () => expect(run(filter, { nr })).to.equal(want));
  }

  it('denies keyctl, add_key, request_key, bpf, userfaultfd, perf_event_open, kexec_*, open_by_handle_at, modules, mount, umount2, pivot_root', () => {
    for (const name of ['keyctl', 'add_key', 'request_key', 'bpf', 'userfaultfd', 'perf_event_open', 'kexec_load', 'kexec_file_load', 'open_by_handle_at', 'init_module', 'finit_module', 'delete_module', 'mount', 'umount2', 'pivot_root', 'setns'] as const) {
      expect(run(filter, { nr: NR[name] }), name).to.equal(errno(EPERM));
    }
  });

  it('clone3 is ENOSYS (its flags are out of reach; glibc falls back to clone)', () => {
    expect(run(filter, { nr: NR.clone3 })).to.equal(errno(ENOSYS));
  });

  it('clone and unshare: any CLONE_NEW* flag is EPERM, a thread, a fork or CLONE_FILES is allowed', () => {
    const CLONE_THREAD_FLAGS = 0x3d0f00; // what glibc's pthread_create passes
    const fork = 0x01200011; // CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD
    for (const nr of [NR.clone, NR.unshare]) {
      expect(run(filter, { nr, args: [CLONE_THREAD_FLAGS] })).to.equal(SECCOMP_RET_ALLOW);
      expect(run(filter, { nr, args: [fork] })).to.equal(SECCOMP_RET_ALLOW);
      expect(run(filter, { nr, args: [0x400] })).to.equal(SECCOMP_RET_ALLOW); // CLONE_FILES
      for (const flag of [0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000, 0x80]) {
        expect(run(filter, { nr, args: [flag | fork] }), `flag ${flag.toString(16)}`).to.equal(errno(EPERM));
      }
      // High bits set do not hide a namespace flag in the low word.
      expect(run(filter, { nr, args: [Number(0x1_0000_0000n) + 0x10000000] })).to.equal(errno(EPERM));
    }
    expect(CLONE_NEW_ANY & 0x3d0f00).to.equal(0);
  });

  it('personality: only the values Docker allows', () => {
    for (const v of [0, 8, 0x20000, 0x20008, 0xffffffff]) expect(run(filter, { nr: NR.personality, args: [v] })).to.equal(SECCOMP_RET_ALLOW);
    for (const v of [0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0400000 /* READ_IMPLIES_EXEC */, 1]) expect(run(filter, { nr: NR.personality, args: [v] })).to.equal(errno(EPERM));
  });

  it('allows what agent tools do: read, write, openat, execve, mmap, socket, connect, ptrace of its own children, seccomp, landlock', () => {
    for (const nr of [0, 1, 2, 3, 9, 41, 42, 56 /* clone without flags: below */, 57, 59, 61, 101, 257, 317, 435 - 1, 444, 445, 446]) {
      if (nr === NR.clone) continue;
      expect(run(filter, { nr }), `nr ${nr}`).to.equal(SECCOMP_RET_ALLOW);
    }
  });
});
