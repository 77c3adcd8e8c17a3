import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { ApiClient } from './service.js';
import { skipOrFailInCI } from './ci-gate.js';

/**
 * Whether this machine can run the process sandbox (bubblewrap, util-linux, root for the
 * per-environment uids and cgroups). `.ci/run` installs bubblewrap and socat, so in CI
 * this is true and the runtime tests run; elsewhere they skip with the reason.
 */
export function runtimeUnavailable(): string | null {
  if (!existsSync('/usr/bin/bwrap')) return 'bubblewrap is not installed (apt-get install bubblewrap socat)';
  if (process.getuid?.() !== 0) return 'the process runtime tests need root (per-environment uids and cgroups)';
  const r = spawnSync('/usr/bin/bwrap', ['--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--', '/usr/bin/true']);
  if (r.status !== 0) return `bubblewrap cannot create namespaces here: ${String(r.stderr).trim()}`;
  return null;
}

/** In a `before`: skips the suite, saying why, where the process runtime cannot run; under CI it fails instead (ci-gate.ts). */
export function skipWithoutRuntime(ctx: Mocha.Context): void {
  skipOrFailInCI(ctx, runtimeUnavailable());
}

/**
 * Polls `probe` (every `everyMs`) until `done` holds for its value or `ms` pass, and returns
 * the last value: the caller asserts on it, so a timeout fails with the caller's message.
 * The wait ends on the condition, not on a guess of how long it takes.
 */
export async function pollUntil<T>(probe: () => T | Promise<T>, done: (value: T) => boolean, ms = 15_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** `p`, or a failure naming `what` once `ms` pass (the timer cleared either way). */
export async function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the suspend tests' counting loop (`echo $i > c.new; mv c.new counter; sleep 0.05`)
 * `n` times on the host and resolves when it exits. A "did not move while suspended" check
 * waits on this instead of a fixed sleep: in the span the host counted `n`, an environment
 * that was not frozen would have counted too, at the same pace on the same loaded machine.
 */
export async function sameLoopOnHost(n: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-loop-'));
  try {
    const loop = spawn('/bin/sh', ['-c', `cd -- "$1" || exit 1; i=0; while [ $i -lt ${n} ]; do i=$((i+1)); echo $i > c.new; mv c.new counter; sleep 0.05; done`, 'sh', dir], { stdio: 'ignore' });
    const [code] = await once(loop, 'exit');
    expect(code).to.equal(0);
    expect(readFileSync(join(dir, 'counter'), 'utf8')).to.equal(`${n}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Polls the environment until `state` is `want` (or fails the test after `ms`). */
export async function waitState(api: ApiClient, id: string, want: string, ms = 15_000): Promise<any> {
  const last = await pollUntil(async () => (await api.get(`/v1/environments/${id}`)).body, (e: any) => e?.state === want, ms);
  expect(last?.state, `environment ${id} state (failure_reason: ${last?.failure_reason})`).to.equal(want);
  return last;
}

export async function exec(api: ApiClient, id: string, command: string[], extra: Record<string, unknown> = {}): Promise<{ status: number; body: any }> {
  const r = await api.post(`/v1/environments/${id}/exec`, { command, ...extra });
  return { status: r.status, body: r.body };
}

/** sh -c inside the environment; expects 200 and returns the body. */
export async function sh(api: ApiClient, id: string, script: string, extra: Record<string, unknown> = {}): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const r = await exec(api, id, ['/bin/sh', '-c', script], extra);
  expect(r.status, JSON.stringify(r.body)).to.equal(200);
  return r.body;
}

/** A process as the host sees it (/proc): its real, effective, saved and filesystem uids and gids. */
export interface HostProcess {
  pid: number;
  comm: string;
  uids: number[];
  gids: number[];
  netns: string;
}

/**
 * An environment's processes seen from outside, whatever the driver: every process in its
 * cgroups (`<own cgroup>/gateway-<host>/<environment id>[/<exec>]` in any hierarchy,
 * hosts/cgroups.ts), which the process sandbox's tree and a VM's QEMU (and its forwards)
 * all join before they exec.
 */
export function environmentProcesses(envId: string): HostProcess[] {
  const mine = new RegExp(`^\\d+:[^:]*:.*/gateway-[^/]+/${envId}(/|$)`, 'm');
  const out: HostProcess[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (!mine.test(readFileSync(`/proc/${p}/cgroup`, 'utf8'))) continue;
      const status = readFileSync(`/proc/${p}/status`, 'utf8');
      const ids = (key: string) => (new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(status)?.[1] ?? '').trim().split(/\s+/).map(Number);
      out.push({ pid: Number(p), comm: readFileSync(`/proc/${p}/comm`, 'utf8').trim(), uids: ids('Uid'), gids: ids('Gid'), netns: readlinkSync(`/proc/${p}/ns/net`) });
    } catch { /* exited meanwhile */ }
  }
  return out;
}

/** The host's own addresses (every interface's, link-local IPv6 left out: it needs a scope). */
export function hostAddresses(): string[] {
  return Object.values(networkInterfaces()).flat().map((a) => a!.address).filter((a) => !/^fe80:/i.test(a));
}

/**
 * A python3 program that tries a TCP connection to every target at once (threads: a
 * dropped SYN costs its timeout once, not once per target) and prints one JSON line,
 * `{"<host> <port>": "connected" | "timeout" | errno name}`. The same program runs inside an
 * environment (fed on stdin) and on the host, so a broken probe cannot pass unseen: each
 * use also expects `connected` from something that is reachable.
 */
export function tcpProbe(targets: Array<[string, number]>, timeoutSecs = 5): string {
  return `import errno, json, socket, threading
out = {}
def probe(host, port):
    r = None
    s = None
    try:
        s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(${timeoutSecs})
        s.connect((host, port))
        r = 'connected'
    except socket.timeout:
        r = 'timeout'
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        if s: s.close()
    out[host + ' ' + str(port)] = r
ts = [threading.Thread(target=probe, args=(h, p)) for h, p in ${JSON.stringify(targets)}]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(out, sort_keys=True))
`;
}

/** Runs tcpProbe on the host (the control: the targets that exist answer). */
export function tcpProbeFromHost(targets: Array<[string, number]>, timeoutSecs = 5): Record<string, string> {
  const r = spawnSync('/usr/bin/python3', ['-'], { input: tcpProbe(targets, timeoutSecs), encoding: 'utf8' });
  expect(r.status, r.stderr).to.equal(0);
  return JSON.parse(r.stdout) as Record<string, string>;
}

/** One routing table line of /proc/net/route or /proc/net/ipv6_route, as the kernel prints it. */
export interface Route {
  iface: string;
  dest: string;
  /** Mask (IPv4, hex) or prefix length (IPv6, hex). */
  mask: string;
  gateway: string;
}

export function ipv4Routes(procNetRoute: string): Route[] {
  return procNetRoute.split('\n').slice(1).filter((l) => l.trim()).map((l) => {
    const f = l.trim().split(/\s+/);
    return { iface: f[0]!, dest: f[1]!, gateway: f[2]!, mask: f[7]! };
  });
}

export function ipv6Routes(procNetIpv6Route: string): Route[] {
  return procNetIpv6Route.split('\n').filter((l) => l.trim()).map((l) => {
    const f = l.trim().split(/\s+/);
    return { dest: f[0]!, mask: f[1]!, gateway: f[4]!, iface: f[9]! };
  });
}

/** The interfaces of a /proc/net/dev. */
export function interfaces(procNetDev: string): string[] {
  return procNetDev.split('\n').slice(2).map((l) => l.split(':')[0]!.trim()).filter(Boolean);
}

/** A process of a process sandbox, as the host sees it: its host uid, in a network namespace not the host's (bwrap's outer process has the uid too). */
export function sandboxProcess(uid: number): string | undefined {
  const hostNet = readlinkSync('/proc/self/ns/net');
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).find((p) => {
    try {
      return statSync(`/proc/${p}`).uid === uid && readlinkSync(`/proc/${p}/ns/net`) !== hostNet;
    } catch {
      return false;
    }
  });
}
