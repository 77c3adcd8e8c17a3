import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';

/**
 * The process at the other end of a Unix socket the host accepted (the agent's keep-awake
 * lasts while that process lives), by the socket's peer credentials (SO_PEERCRED): the
 * kernel records the pid of the process that called connect(), at connect() time, so it is
 * right even when that process exits before it is asked, and nothing the agent writes (a
 * socket path, a process name) can change it. Issue 24, item 5: the pid used to be found by
 * matching `pid=(\d+)` in `ss -xp` output, where a client socket bound at `/tmp/pid=1` named
 * the host's init, and each lookup cost ~0.9 s of host CPU (ss reads every host process's fds).
 *
 * Node has no getsockopt, so a fixed helper reads it: `/usr/bin/perl` (perl-base is part of
 * every Debian and Ubuntu system) gets the accepted socket as its fd 3 and prints
 * `pid uid gid`; absolute path, a fixed minimal environment, a fixed argv (nothing from the
 * agent). Measured 2 to 5 ms of CPU a lookup (~4.5 ms wall), about what spawning /bin/true
 * costs from Node, and the same however many processes the host runs (`ss -p` reads all
 * their fds: ~10 ms here with 150 processes, 0.86 s on the reviewer's host); python3 -c with
 * the socket module: ~28 ms; perl loading Socket.pm: ~17 ms, hence the constants below. The pid is in the host's pid namespace (the kernel translates it for the
 * reader), and must be a process of the sandbox's own pid namespace; with it goes its start
 * time, so a reused pid is never taken for the same process.
 *
 * Called only after the control socket's rate limit and the request's checks passed
 * (hosts/control-socket.ts, environments/agent.service.ts keepAwake).
 */
export interface Peer {
  pid: number;
  start: string;
  /** Set when the caller is not known to be a live process of the sandbox (exited, or the lookup failed): why. Such a keep-awake is refused. */
  unidentified?: string;
}

export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime), counted after the command name's closing parenthesis.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

export function alive(peer: { pid: number; start: string }): boolean {
  return processStart(peer.pid) === peer.start;
}

/** SOL_SOCKET and SO_PEERCRED per architecture (asm-generic unless said); elsewhere perl's Socket module names them. */
const SOCKOPT: Partial<Record<string, [number, number]>> = {
  x64: [1, 17], ia32: [1, 17], arm64: [1, 17], arm: [1, 17], riscv64: [1, 17], s390x: [1, 17], loong64: [1, 17],
  ppc64: [1, 21], ppc: [1, 21], mips: [0xffff, 18], mipsel: [0xffff, 18], mips64el: [0xffff, 18],
};
const [SOL, OPT] = SOCKOPT[process.arch] ?? ['SOL_SOCKET', 'SO_PEERCRED'];
const SCRIPT = `${typeof SOL === 'string' ? 'use Socket; ' : ''}open(my $s, "+<&=3") or exit 2; my $c = getsockopt($s, ${SOL}, ${OPT}) or exit 3; print join(" ", unpack("l3", $c)), "\\n";`;
export const PEER_HELPER = { path: '/usr/bin/perl', argv: ['-e', SCRIPT], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } } as const;

/** Helpers spawned since start (tests count them: host work per control-socket request). */
export const peerStats = { spawned: 0 };

/** SO_PEERCRED of the socket's fd: the connecting process's host pid, or null. */
export function peerPid(fd: number): Promise<number | null> {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(PEER_HELPER.path, PEER_HELPER.argv, { stdio: ['ignore', 'pipe', 'ignore', fd], env: PEER_HELPER.env });
    } catch {
      return resolve(null);
    }
    peerStats.spawned++;
    let out = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      if (out.length < 100) out += d;
    });
    child.on('error', () => {
      clearTimeout(timer);
      resolve(null);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const m = /^(\d+) -?\d+ -?\d+\n$/.exec(out);
      resolve(code === 0 && m && Number(m[1]) > 0 ? Number(m[1]) : null);
    });
  });
}

function pidNamespace(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * `inSandbox`: a process of the sandbox (its first one): the caller must share its pid
 * namespace. Never null with a socket that has an fd: an unknown caller is `unidentified`.
 */
export async function peerOf(socket: Socket, inSandbox?: number): Promise<Peer | null> {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return { pid: 0, start: '', unidentified: 'the connection is closed' };
  const pid = await peerPid(fd);
  if (pid === null) return { pid: 0, start: '', unidentified: 'the peer credentials could not be read' };
  const start = processStart(pid);
  if (start === null) return { pid, start: '', unidentified: 'the calling process has exited' };
  if (inSandbox !== undefined) {
    const ns = pidNamespace(inSandbox);
    if (ns === null || pidNamespace(pid) !== ns) return { pid, start: '', unidentified: 'the caller is not a process of this sandbox' };
  }
  return { pid, start };
}
