import { execFile } from 'node:child_process';
import { fstatSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

/**
 * The process at the other end of a Unix socket the host accepted (the agent's keep-awake
 * lasts while that process lives). Node does not expose SO_PEERCRED, so the socket's inode
 * is matched in `ss -xp` (iproute2), run in the peer's network namespace, which names the
 * peer socket's owner with its host pid.
 * With the pid goes its start time, so a reused pid is never taken for the same process.
 */
export interface Peer {
  pid: number;
  start: string;
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

/**
 * `netnsOf`: a process in the network namespace the peer's socket lives in (a sandbox's
 * first process): Unix sockets are listed per network namespace, so `ss` runs there.
 */
export async function peerOf(socket: Socket, netnsOf?: number): Promise<Peer | null> {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return null;
  let ino: number;
  try {
    ino = fstatSync(fd).ino;
  } catch {
    return null;
  }
  const out = await new Promise<string>((resolve) => {
    const [cmd, args] = netnsOf ? ['nsenter', ['-t', String(netnsOf), '-n', 'ss', '-xpnH']] : ['ss', ['-xpnH']];
    execFile(cmd, args as string[], { timeout: 5000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout) => resolve(err ? '' : stdout));
  });
  for (const line of out.split('\n')) {
    const f = line.trim().split(/\s+/);
    // u_str ESTAB recv send <local addr> <local inode> <peer addr> <peer inode> users:((...,pid=N,...))
    if (f[7] !== String(ino) || f[5] === String(ino)) continue;
    const m = /pid=(\d+)/.exec(line);
    if (!m) return null;
    const pid = Number(m[1]);
    const start = processStart(pid);
    return start ? { pid, start } : null;
  }
  return null;
}
