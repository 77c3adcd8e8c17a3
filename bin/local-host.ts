import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../config/config.js';
import { parseDatabaseUrl, type Db } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import { newId } from '../lib/ids.js';
import type { RuntimeState } from '../environments/runtime.service.js';
import { RESOURCE_DEFAULTS } from '../environments/rules.js';
import { createHostAgent, type HostAgent, type HostAgentDeps } from '../hosts/host-agent.js';
import { ProcessDriver } from '../hosts/drivers/process.js';
import { QemuDriver } from '../hosts/drivers/qemu.js';
import type { Keyring } from '../lib/crypto.js';
import type { Surface } from '../hosts/driver.js';
import { controlHandler, type ControlPorts } from '../hosts/control-socket.js';

/**
 * The environment host of this process (`npm start`, or `gateway host` alone against a
 * shared MySQL): the driver GATEWAY_RUNTIME names, its isolation measured, and its agent.
 *
 * Where the machine cannot isolate (no namespaces, no cgroup freeze/kill/memory), the host
 * does not start unless GATEWAY_RUNTIME_INSECURE=1, and then it says so loudly and
 * reports what is missing in its capabilities. Without namespaces nothing can run at all.
 */
export interface LocalHostDeps {
  config: Readonly<Config>;
  db: Db;
  clock: Clock;
  log: Logger;
  runtime: RuntimeState;
  proxy: { host: string; port: number };
  /** The master keyring: the qemu runtime wraps each data disk's key with it. */
  keys: Pick<Keyring, 'encrypt' | 'decrypt'>;
  surfaceFor(environmentId: string): Promise<Surface | null>;
  /** What the control socket answers (hosts/control-socket.ts). */
  control: ControlPorts;
  /** WebSocket upgrades on a VM's /run/service/browser.sock: its leases' CDP endpoints. */
  browser?: (environmentId: string) => (req: import('node:http').IncomingMessage, socket: import('node:stream').Duplex, head: Buffer) => void;
  /** Agent keep-awakes held by processes in this host's VMs (released when the process ends). */
  keepAwakes?: HostAgentDeps['keepAwakes'];
  /** Starts serving the agent to other processes; returns the endpoint it registers. */
  serve?: (agent: HostAgent) => Promise<string | null>;
}

/**
 * Default capacity for the process runtime, where an idle sandbox costs a few MiB and no
 * CPU (bench/environments): `cpus` is a quota ceiling, not a reservation, so a host offers
 * 256 per core; placement counts base_memory_mib against 32× RAM. Set GATEWAY_HOST_CPUS
 * and GATEWAY_HOST_MEMORY_MIB to size a host for what its environments really do.
 */
const CPU_OVERCOMMIT = 256;
const MEMORY_OVERCOMMIT = 32;

/** This machine's host id (also the tag of its cgroup directories, which the browser pool shares). */
export function hostIdFor(config: Readonly<Config>): string {
  if (config.envHost.id) return config.envHost.id;
  const file = join(config.dataDir, 'host-id');
  if (existsSync(file)) {
    const id = readFileSync(file, 'utf8').trim();
    if (/^host_[0-9a-z_-]{1,34}$/.test(id)) return id;
  }
  const id = newId('host');
  mkdirSync(config.dataDir, { recursive: true });
  writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}

export async function startLocalHost(deps: LocalHostDeps): Promise<HostAgent | null> {
  const { config, log } = deps;
  if (config.runtime === 'none') return null;
  const hostId = hostIdFor(config);
  const rootDir = resolve(config.envHost.environmentsDir ?? join(config.dataDir, 'environments'));
  const control = (environmentId: string, peer: Parameters<typeof controlHandler>[2]) => controlHandler(deps.control, environmentId, peer);
  let driver: ProcessDriver | QemuDriver;
  if (config.runtime === 'qemu') {
    driver = new QemuDriver({
      rootDir, imageDir: resolve(config.envHost.qemuImageDir ?? join(config.dataDir, 'vm-image')), proxy: deps.proxy, hostTag: hostId,
      keys: { wrap: (p, c) => deps.keys.encrypt(p, c), unwrap: (b, c) => deps.keys.decrypt(b, c) },
      cgroupRoot: config.envHost.cgroupRoot ?? undefined, log, control, browser: deps.browser,
    });
    if (driver.capabilities().namespaces) {
      // Built once per machine (content-addressed): a minute the first time, then reused.
      try {
        driver.image();
      } catch (err) {
        log.error({ err }, 'environment host NOT started: the qemu guest image could not be built; environments stay pending');
        return null;
      }
    }
  } else {
    // What an environment must never be able to fill (issue 24, item 4): the driver checks
    // whether its disks share a filesystem with these, and says so at start.
    const protect = [{ what: 'DATA_DIR (the CA, the master key)', path: resolve(config.dataDir) }];
    const store = parseDatabaseUrl(config.databaseUrl);
    if (store?.client === 'sqlite' && store.filename !== ':memory:') protect.push({ what: 'the SQLite store and its audit log', path: dirname(store.filename) });
    driver = new ProcessDriver({
      rootDir, preallocateDisks: config.envHost.preallocateDisks, sandboxPool: config.envHost.sandboxPool, poolDiskGib: RESOURCE_DEFAULTS.disk_gib, favorDynmods: config.envHost.favorDynmods, proxy: deps.proxy, hostTag: hostId, insecure: config.envHost.insecure, cgroupRoot: config.envHost.cgroupRoot ?? undefined, log, control, browser: deps.browser, protect,
    });
  }
  const caps = driver.capabilities();
  if (!caps.namespaces) {
    log.error({ missing: caps.missing }, 'environment host NOT started: this machine cannot give environments their own namespaces, so nothing could run sealed; environments stay pending');
    return null;
  }
  if (!driver.isolated()) {
    if (!config.envHost.insecure) {
      log.error({ missing: caps.missing }, 'environment host NOT started: isolation is incomplete on this machine (set GATEWAY_RUNTIME_INSECURE=1 to run anyway); environments stay pending');
      return null;
    }
    log.warn({ missing: caps.missing }, '!!! GATEWAY_RUNTIME_INSECURE=1: the environment host runs WITHOUT part of its isolation; see the host\'s capabilities !!!');
  }
  const agent = createHostAgent({
    db: deps.db,
    clock: deps.clock,
    log,
    driver,
    runtime: deps.runtime,
    hostId,
    heartbeatMs: config.hostHeartbeatMs,
    name: hostname(),
    capacity: {
      cpus: config.envHost.cpus ?? cpus().length * CPU_OVERCOMMIT,
      memoryMib: config.envHost.memoryMib ?? Math.floor((totalmem() / 1024 / 1024) * MEMORY_OVERCOMMIT),
    },
    surfaceFor: deps.surfaceFor,
    keepAwakes: deps.keepAwakes,
    endpoint: () => endpoint,
  });
  let endpoint: string | null = null;
  if (deps.serve) endpoint = await deps.serve(agent);
  await agent.start();
  if (driver instanceof ProcessDriver) driver.warmUp();
  log.info({ host_id: hostId, driver: driver.name, capabilities: caps }, 'environment host started');
  return agent;
}
