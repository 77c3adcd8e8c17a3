import { createHash, createPublicKey } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Logger } from '../lib/log.js';
import type { BrowserBroker, OpenLease, StorageState } from './broker.js';
import { BrowserPool, type SlotCgroups } from './browser-pool.js';
import { allocateUid } from '../lib/processes.js';
import { BROWSER_UID_BASE, BROWSER_UID_RANGE, CgroupJoinError, sandboxUnavailable, startBrowserSandbox } from './browser-sandbox.js';
import { EnvBrowser } from './env-browser.js';

/**
 * The browser broker on real Chromium (Debian's `chromium`; issue 14, reworked by issue 23):
 * **one sandboxed browser process per environment** (browser-sandbox.ts), started with the
 * environment's first lease (or taken from a pool of browsers started ahead:
 * browser-pool.ts) and kept warm a minute after its last one, and one fresh browser context
 * per lease. Two environments never share a browser, so a renderer exploit meets nothing of
 * another end user; the leases of one environment (one agent) share one.
 *
 * The gateway intercepts TLS with leaves that all share one key; Chromium is told to trust
 * exactly that key (`--ignore-certificate-errors-spki-list`), and its only way out is the
 * gateway, so nothing else is trusted that way.
 */
export interface ChromiumBrokerOptions {
  executablePath: string;
  /** The gateway's shared leaf key (PEM): its SPKI hash is the one Chromium trusts. */
  leafKeyPem: string;
  log: Logger;
  /** Pages (tabs, popups) one lease may have open at once. */
  pagesPerLease: number;
  /** The cgroup.procs files an environment's browser joins (its environment's cgroup), created with the environment's limits if needed. */
  cgroupFor?(environmentId: string): Promise<string[]>;
  /** The environment's browser ended: its cgroup directory may go. */
  cgroupDone?(environmentId: string): void;
  /** A connection on an environment's browser proxy socket: the gateway serves it as that environment. */
  proxyConnection(environmentId: string, socket: Socket): void;
  /** How long a browser without leases is kept for the next lease (ms). */
  keepWarmMs?: number;
  /** GATEWAY_BROWSER_POOL_SIZE: browsers started ahead for environments' first leases (0: none). */
  poolSize?: number;
  /** The cgroups pool slots run in before their claim (null: no cgroups on this host). */
  poolCgroups?: SlotCgroups | null;
}

export class ChromiumBroker implements BrowserBroker {
  readonly #spki: string;
  /** Environments' browsers being started, then running (a settled start is moved to #running). */
  readonly #starting = new Map<string, Promise<EnvBrowser>>();
  readonly #running = new Map<string, EnvBrowser>();
  readonly #leaseEnv = new Map<string, string>();
  readonly #unavailable: string | null;
  readonly #sweep: NodeJS.Timeout;
  readonly #pool: BrowserPool | null;
  /** Uids of browsers being started cold (no process of theirs in /proc yet). */
  readonly #startingUids = new Set<number>();
  #closed = false;

  constructor(private readonly opts: ChromiumBrokerOptions) {
    const der = createPublicKey(opts.leafKeyPem).export({ type: 'spki', format: 'der' });
    this.#spki = createHash('sha256').update(der).digest('base64');
    this.#unavailable = sandboxUnavailable();
    if (this.#unavailable) opts.log.warn({ reason: this.#unavailable }, 'browser leases cannot start: the browser sandbox is not available on this machine');
    this.#sweep = setInterval(() => void this.#stopIdle(), 5_000);
    this.#sweep.unref();
    this.#pool = this.#makePool();
  }

  /**
   * The pool, where slots can be what browser-pool.ts says: as root (a uid of their own),
   * and where the host has cgroups, with freeze (a claim moves a frozen slot).
   */
  #makePool(): BrowserPool | null {
    const size = this.opts.poolSize ?? 0;
    if (size <= 0 || this.#unavailable) return null;
    const cgroups = this.opts.poolCgroups ?? null;
    let why: string | null = null;
    if (process.getuid?.() !== 0) why = 'the service does not run as root (a slot needs a uid of its own)';
    else if (cgroups && cgroups.support.layout !== 'none' && !cgroups.support.freeze) why = 'the host\'s cgroups cannot freeze a slot for its claim';
    if (why) {
      this.opts.log.warn({ reason: why }, 'the browser pool is off: first leases start their browser');
      return null;
    }
    return new BrowserPool({ size, cgroups, log: this.opts.log, launch: (uid, procs, env) => this.#launch(uid, procs, env) });
  }

  up(): boolean {
    return !this.#unavailable && !this.#closed;
  }

  /** The pool's size and the slots ready now, or null when there is no pool. */
  pool(): { size: number; ready: number } | null {
    return this.#pool ? { size: this.#pool.size, ready: this.#pool.ready } : null;
  }

  /** The environment's browser, started if it is not running. */
  async #browser(environmentId: string): Promise<EnvBrowser> {
    const running = this.#running.get(environmentId);
    if (running?.alive) return running;
    if (running) this.#running.delete(environmentId);
    const pending = this.#starting.get(environmentId);
    if (pending) return pending;
    const starting = this.#start(environmentId).then((b) => {
      if (this.#closed) {
        void b.stop();
        throw new Error('the broker is shut down');
      }
      this.#running.set(environmentId, b);
      return b;
    }).finally(() => {
      this.#starting.delete(environmentId);
    });
    this.#starting.set(environmentId, starting);
    return starting;
  }

  async #start(environmentId: string): Promise<EnvBrowser> {
    if (this.#unavailable) throw new Error(this.#unavailable);
    const t0 = performance.now();
    const procsFor = async (): Promise<string[]> => (await this.opts.cgroupFor?.(environmentId)) ?? [];
    const claimed = await this.#claimSlot(environmentId, procsFor);
    const b = claimed ?? await this.#launchCold(environmentId, procsFor).catch(async (err) => {
      // Its cgroup directories went before it joined them (the environment's own start on
      // this host makes them afresh): once more, into them as they are now.
      if (!(err instanceof CgroupJoinError)) throw err;
      return this.#launchCold(environmentId, procsFor);
    });
    const sandbox = b.sandbox;
    void sandbox.exited.then(() => {
      const open = [...this.#leaseEnv].filter(([, env]) => env === environmentId).map(([lease]) => lease);
      if (open.length && !this.#closed) {
        this.opts.log.warn({ lease_ids: open, environment_id: environmentId, code: sandbox.proc.exitCode, signal: sandbox.proc.signalCode, stderr: sandbox.stderrTail() }, 'the environment\'s browser ended with leases open (its memory limit, or a crash)');
      }
      this.opts.cgroupDone?.(environmentId);
    });
    this.opts.log.debug({ environment_id: environmentId, ms: Math.round(performance.now() - t0), pool: Boolean(claimed) }, 'environment browser started');
    return b;
  }

  /** A pool slot made the environment's, or null (none ready, or its claim failed: the slot is killed, never handed out). */
  async #claimSlot(environmentId: string, procsFor: () => Promise<string[]>): Promise<EnvBrowser | null> {
    this.#pool?.want();
    const slot = this.#pool?.take();
    if (!slot) return null;
    try {
      await this.#pool!.claim(slot, environmentId, procsFor);
      return slot.browser;
    } catch (err) {
      this.opts.log.warn({ err, environment_id: environmentId, uid: slot.uid }, 'a browser pool slot could not be claimed; the environment\'s browser starts cold');
      await slot.browser.stop();
      return null;
    }
  }

  /** The environment's browser started for it: a uid of the browsers' range no live process has (nor one starting). */
  async #launchCold(environmentId: string, procsFor: () => Promise<string[]>): Promise<EnvBrowser> {
    const uid = allocateUid(this.#startingUids, BROWSER_UID_BASE, BROWSER_UID_RANGE);
    this.#startingUids.add(uid);
    try {
      return await this.#launch(uid, await procsFor(), () => environmentId);
    } finally {
      // Alive from here, its processes hold it (the allocation reads /proc).
      this.#startingUids.delete(uid);
    }
  }

  /** A sandboxed browser as `uid` in these cgroups; its proxy socket serves `environment()`, and refuses while it is null (a slot before its claim). */
  async #launch(uid: number, cgroupProcs: string[], environment: () => string | null): Promise<EnvBrowser> {
    const sandbox = await startBrowserSandbox({
      executablePath: this.opts.executablePath, uid, spki: this.#spki, cgroupProcs,
      onProxyConnection: (s) => {
        const env = environment();
        if (env) this.opts.proxyConnection(env, s);
        else s.destroy();
      },
    });
    return EnvBrowser.start(sandbox, this.opts.pagesPerLease).catch(async (err) => {
      await sandbox.kill();
      throw err;
    });
  }

  async #stopIdle(): Promise<void> {
    const keep = this.opts.keepWarmMs ?? 60_000;
    for (const [env, b] of this.#running) {
      if (!b.alive || Date.now() - b.idleSinceMs > keep) {
        this.#running.delete(env);
        await b.stop();
      }
    }
  }

  /** Opens the lease's context in its environment's browser. */
  async open(lease: OpenLease): Promise<void> {
    const b = await this.#browser(lease.environmentId);
    await b.openContext(lease.id, lease.storageState);
    this.#leaseEnv.set(lease.id, lease.environmentId);
  }

  browserOf(leaseId: string): { browser: EnvBrowser; contextId: string } | null {
    const env = this.#leaseEnv.get(leaseId);
    const b = env ? this.#running.get(env) : undefined;
    const contextId = b?.alive ? b.contextOf(leaseId) : null;
    return b && contextId ? { browser: b, contextId } : null;
  }

  async #of(leaseId: string): Promise<EnvBrowser> {
    const found = this.browserOf(leaseId);
    if (!found) throw new Error('no such lease context');
    return found.browser;
  }

  async ensurePage(leaseId: string): Promise<void> {
    await (await this.#of(leaseId)).ensurePage(leaseId);
  }

  async prepareForPerson(leaseId: string): Promise<void> {
    await (await this.#of(leaseId)).reloadForPerson(leaseId);
  }

  async exportState(leaseId: string): Promise<StorageState> {
    return (await this.#of(leaseId)).exportState(leaseId);
  }

  /** The lease leaves the registry synchronously (before the first await): nothing reaches its context after the call. */
  async close(leaseId: string): Promise<void> {
    const b = this.browserOf(leaseId)?.browser;
    this.#leaseEnv.delete(leaseId);
    await b?.closeContext(leaseId).catch(() => {});
  }

  has(leaseId: string): boolean {
    return this.browserOf(leaseId) !== null;
  }

  async shutdown(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweep);
    await this.#pool?.shutdown();
    const all = [...this.#running.values(), ...(await Promise.all([...this.#starting.values()].map((p) => p.catch(() => null))))];
    this.#running.clear();
    this.#leaseEnv.clear();
    await Promise.all(all.map((b) => b?.stop()));
  }
}
