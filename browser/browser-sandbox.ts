import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { CdpPipe } from './cdp-pipe.js';

/**
 * One environment's Chromium, sandboxed (issue 23, item 1). A browser lease is the agent's,
 * so its browser is treated like the agent's own code:
 *
 * - **Its own uid.** Chromium runs as an unprivileged host uid of its own per environment
 *   (allocated per start from a range of its own, or a pool slot's: browser-pool.ts), never the service's
 *   (root): even a process that left every namespace could read nothing of DATA_DIR (0700,
 *   root) nor any environment's disk.
 * - **Nothing to read.** bubblewrap gives it a fresh root (a tmpfs) with `/usr` read-only, a
 *   few named files of `/etc` (fonts, the dynamic linker's cache, TLS roots), its own `/proc`,
 *   `/dev`, `/tmp` and home (tmpfs: its profile lives and dies in memory charged to the
 *   environment). DATA_DIR, the service's working directory, other environments and every
 *   secret file of the host do not exist there. Chromium's `URLBlocklist` policy (file:,
 *   chrome:, view-source:, devtools:, chrome-extension:) is the second wall behind the CDP
 *   relay's own checks.
 * - **Chromium's own sandbox is on** (no `--no-sandbox`): with no setuid helper in Debian's
 *   package it uses user namespaces, which bubblewrap's namespace allows nesting; renderers
 *   run in namespaces of their own under seccomp-bpf (measured: `Seccomp: 2`, NSpid four deep).
 * - **No network but the gateway.** Its network namespace has a loopback and nothing else; a
 *   relay inside (socat) listens on 127.0.0.1:3128, Chromium's `--proxy-server`, and reaches
 *   the host only through a Unix socket the broker serves: every connection on it is handed
 *   to the gateway proxy as this environment (pre-authenticated: no password in the browser).
 * - **No DevTools port.** The broker talks to it over `--remote-debugging-pipe` (fds 3 and 4).
 * - **The environment's limits.** Its processes join the environment's cgroup (a `browser`
 *   child of it where the tree allows), so `memory_mib`, `cpus` and the pid limit cover the
 *   browser too; past them the kernel kills the browser (it is the OOM killer's first pick),
 *   not the host, the agent's processes or its microVM.
 */
export interface BrowserSandboxOptions {
  executablePath: string;
  /** The host uid it runs as when the service is root: allocated per start (chromium-broker.ts), or a pool slot's. */
  uid: number;
  /** The gateway's shared leaf key's SPKI hash (base64): the one key Chromium trusts for interception. */
  spki: string;
  /** The cgroup.procs files the browser's first process writes itself into before it execs (may be empty). */
  cgroupProcs: string[];
  /** Each connection on the browser's proxy socket (the gateway, as this environment). */
  onProxyConnection(socket: Socket): void;
}

export const BROWSER_PROXY_PORT = 3128;
/** Inside the browser's sandbox: the staging directory (proxy socket, uploads). */
export const BROWSER_RUN = '/run/gw';

/**
 * The uids of browsers started for their environment (a range apart from the environments'
 * own and the pool's slots'): each start takes one no live process has (chromium-broker.ts),
 * so two environments' browsers never share one. (Until issue 29 it was this base + a hash
 * of the environment id, which two environments could share; a browser keeps nothing on the
 * host under its uid from one start to the next, so nothing needs it stable.)
 */
export const BROWSER_UID_BASE = 1_100_000;
export const BROWSER_UID_RANGE = 800_000;

/** What Chromium may never open, whatever CDP says (the relay refuses these first). */
export const BLOCKED_URLS = ['file://*', 'chrome://*', 'chrome-untrusted://*', 'chrome-extension://*', 'devtools://*', 'view-source:*', 'chrome-search://*'];

const POLICY = JSON.stringify({
  URLBlocklist: BLOCKED_URLS,
  // 3: no download. Measured: it does not stop a download CDP allows, so nothing relies on it
  // (the relay never applies the agent's download settings; the context denies them).
  DownloadRestrictions: 3,
  AllowFileSelectionDialogs: false,
  PasswordManagerEnabled: false,
  AutofillAddressEnabled: false,
  AutofillCreditCardEnabled: false,
  BackgroundModeEnabled: false,
  SafeBrowsingProtectionLevel: 0,
  BrowserNetworkTimeQueriesEnabled: false,
  MetricsReportingEnabled: false,
  ComponentUpdatesEnabled: false,
});

const FLAGS = [
  '--headless=new', '--remote-debugging-pipe', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run', '--no-default-browser-check',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-default-apps', '--disable-breakpad', '--noerrdialogs',
  // Chromium's own background requests would go through the gateway as the environment (and
  // into its audit log): the component updater, network time, field trials, safe browsing.
  '--disable-client-side-phishing-detection', '--disable-domain-reliability', '--no-service-autorun', '--disable-field-trial-config', '--disable-hang-monitor',
  '--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,DialMediaRouteProvider,InterestFeedContentSuggestions,'
    + 'CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying,SafeBrowsing,PrivacySandboxSettings4,LensOverlay,GlobalMediaControls',
  '--metrics-recording-only', '--password-store=basic', '--use-mock-keychain',
  '--user-data-dir=/tmp/profile', `--proxy-server=http://127.0.0.1:${BROWSER_PROXY_PORT}`,
  // Loopback is not bypassed: inside, loopback is only the relay, and the gateway refuses it
  // anyway. The component updater still asks for its components (even with
  // --disable-component-update and the policy): its requests go to a name that never resolves,
  // directly, so they die inside the sandbox instead of reaching the environment's audit log.
  '--proxy-bypass-list=<-loopback>;updates.invalid', '--component-updater=url-source=http://updates.invalid/',
];

/** /etc entries Chromium needs: fonts, the dynamic linker, TLS roots, time zone; no secret. */
const ETC = ['fonts', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'ssl', 'ca-certificates', 'localtime', 'nsswitch.conf', 'mime.types', 'alternatives'];

/**
 * Joins the environment's cgroups, and makes the browser the first the kernel's OOM killer
 * picks there (oom_score_adj 1000, inherited by every Chromium process): past the
 * environment's memory the browser dies, not the agent's processes or its microVM.
 */
const CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; echo 1000 > /proc/self/oom_score_adj; exec "$@"';
/**
 * Before bubblewrap, every descriptor but stdio, the CDP pipe (3, 4) and the policy (5) is
 * closed (close_range; Perl, no module): the service may hold descriptors it inherited
 * without close-on-exec (a supervisor's pipe or socket), which reached Chromium's processes
 * (test/security/sandbox-inherited-fds.test.ts).
 */
const CLOSE_OTHER_FDS = 'syscall(436, 6, 0xffffffff, 0) == 0 or map { syscall(3, $_) } 6 .. 1023; exec { $ARGV[0] } @ARGV; exit 127';

/** Inside: the relay to the proxy socket, ready before Chromium starts (0C38 is port 3128 in /proc/net/tcp). */
const LAUNCH = `exec </dev/null; (while :; do /usr/bin/socat TCP-LISTEN:${BROWSER_PROXY_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${BROWSER_RUN}/proxy.sock; sleep 0.2; done) & `
  + 'i=0; until grep -q ":0C38 " /proc/net/tcp 2>/dev/null || [ $i -ge 500 ]; do sleep 0.01; i=$((i+1)); done; exec "$@"';

/** Debian's /usr/bin/chromium is a shell wrapper reading /etc/chromium.d; the sandbox runs the binary itself. */
export function chromiumBinary(executablePath: string): string {
  try {
    const head = readFileSync(executablePath).subarray(0, 2).toString('latin1');
    if (head === '#!' && existsSync('/usr/lib/chromium/chromium')) return '/usr/lib/chromium/chromium';
  } catch { /* as given */ }
  return executablePath;
}

/**
 * The last lines Chromium wrote, fit for the service's log: its routine noise dropped, and
 * every URL replaced (a page's address may carry a site's code or token in its path or query;
 * no token ever reaches a log line).
 */
export function logTail(stderr: string): string {
  return stderr.trim().split('\n').filter((l) => l && !/dbus|crashpad|Fontconfig/.test(l)).slice(-8)
    .map((l) => l.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+|\b(?:data|blob|about|javascript):\S+/gi, '<url>'))
    .join(' | ');
}

/**
 * The browser's first process could not join the environment's cgroups (its exit code 125):
 * their directories went between the broker's making them and the join (an environment
 * starting on this host makes its cgroup directories afresh). Nothing ran outside them.
 */
export class CgroupJoinError extends Error {}

export interface BrowserSandbox {
  pipe: CdpPipe;
  /** The staging directory on the host (bound at /run/gw inside): uploads go under it. */
  stagingDir: string;
  proc: ChildProcess;
  exited: Promise<void>;
  /** The last lines Chromium wrote on stderr (why it ended, when it did). */
  stderrTail(): string;
  kill(): Promise<void>;
}

/** What a sandbox can be made of on this machine, or why not (checked once). */
export function sandboxUnavailable(): string | null {
  if (!existsSync('/usr/bin/bwrap')) return 'bubblewrap is not installed (apt-get install bubblewrap)';
  if (!existsSync('/usr/bin/socat')) return 'socat is not installed (apt-get install socat)';
  if (process.getuid?.() === 0 && !existsSync('/usr/bin/setpriv')) return 'setpriv (util-linux) is not installed';
  return null;
}

export async function startBrowserSandbox(o: BrowserSandboxOptions): Promise<BrowserSandbox> {
  const why = sandboxUnavailable();
  if (why) throw new Error(`the browser sandbox cannot start: ${why}`);
  const root = process.getuid?.() === 0;
  const uid = root ? o.uid : process.getuid!();
  const binary = chromiumBinary(o.executablePath);
  // The staging directory: root-owned, traversable, not listable; holds the proxy socket and uploads.
  const stagingDir = mkdtempSync(join(tmpdir(), 'gw-browser-'));
  chmodSync(stagingDir, 0o711);
  const sockPath = join(stagingDir, 'proxy.sock');
  const proxy: Server = createServer((s) => o.onProxyConnection(s));
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(sockPath, () => resolve());
  });
  chmodSync(sockPath, 0o666);

  const bw: string[] = [
    '--unshare-all', '--die-with-parent', '--new-session', '--hostname', 'browser',
    '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/sbin', '/sbin',
  ];
  for (const e of ETC) bw.push('--ro-bind-try', `/etc/${e}`, `/etc/${e}`);
  // A Chromium outside /usr (CHROMIUM_PATH elsewhere) is bound read-only where it lives.
  const real = realpathSync(binary);
  if (!real.startsWith('/usr/')) bw.push('--ro-bind', dirname(real), dirname(real));
  bw.push(
    '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--tmpfs', '/home', '--dir', '/home/browser',
    '--bind', stagingDir, BROWSER_RUN,
    '--ro-bind-data', '5', '/etc/chromium/policies/managed/gateway.json',
    '--chdir', '/home/browser', '--clearenv', '--setenv', 'HOME', '/home/browser', '--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'TZ', 'UTC',
    '--', '/bin/sh', '-c', LAUNCH, 'launch', real, ...FLAGS, `--ignore-certificate-errors-spki-list=${o.spki}`, 'about:blank',
  );
  const argv = [
    '/usr/bin/perl', '-e', CLOSE_OTHER_FDS,
    ...(root ? ['/usr/bin/setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--pdeathsig', 'SIGKILL', '--', '/usr/bin/bwrap', ...bw] : ['/usr/bin/bwrap', ...bw]),
  ];
  // A fixed environment: nothing of the service's reaches the browser or the helpers.
  const proc = spawn('/bin/sh', ['-c', CGROUP_JOIN, 'sh', String(o.cgroupProcs.length), ...o.cgroupProcs, ...argv], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
  });
  const policy = (proc.stdio as unknown as Writable[])[5]!;
  // A browser that ends at once (a cgroup it cannot join) resets these pipes: its exit says why.
  policy.on('error', () => {});
  proc.stderr!.on('error', () => {});
  policy.end(POLICY);
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString('utf8')).slice(-8000);
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const cleanup = (): void => {
    proxy.close();
    try {
      rmSync(stagingDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 20 });
    } catch { /* left for the OS's temp cleanup */ }
  };
  void exited.then(cleanup);
  const pipe = new CdpPipe(proc.stdio[3] as Writable, proc.stdio[4] as Readable);
  const kill = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited;
  };
  // Up when it answers (Chromium reads the pipe only once it is ready).
  const answered = await Promise.race([
    pipe.request('Browser.getVersion'),
    exited.then(() => null),
    new Promise<null>((r) => setTimeout(() => r(null), 30_000).unref()),
  ]);
  if (!answered || answered.error) {
    await kill();
    const why = `Chromium did not start: ${logTail(stderr).slice(0, 500) || 'no answer within 30 s'}`;
    throw proc.exitCode === 125 ? new CgroupJoinError(why) : new Error(why);
  }
  return { pipe, stagingDir, proc, exited, kill, stderrTail: () => logTail(stderr) };
}
