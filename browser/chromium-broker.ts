import { createHash, createPublicKey } from 'node:crypto';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import type { Logger } from '../lib/log.js';
import type { BrowserBroker, OpenLease, StorageState } from './broker.js';

/**
 * The browser broker on real Chromium (Debian's `chromium`, driven with playwright-core;
 * issue 14, item 3): one shared browser, launched on first use, and one fresh browser
 * context per lease (measured: a context ~65 MiB PSS and ~70 ms, a browser ~160 MiB and
 * ~300 ms). Nothing of one lease is visible to another: contexts share no cookies, storage
 * or cache.
 *
 * The gateway intercepts TLS with leaves that all share one key; Chromium is told to trust
 * exactly that key (`--ignore-certificate-errors-spki-list`), and every context goes
 * through the gateway proxy, so nothing else is trusted that way.
 */
export interface ChromiumBrokerOptions {
  executablePath: string;
  /** The gateway's shared leaf key (PEM): its SPKI hash is the one Chromium trusts. */
  leafKeyPem: string;
  log: Logger;
}

const FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-default-apps',
  '--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication',
  '--metrics-recording-only', '--password-store=basic', '--use-mock-keychain',
];

export class ChromiumBroker implements BrowserBroker {
  #browser: Browser | null = null;
  #starting: Promise<Browser> | null = null;
  readonly #contexts = new Map<string, BrowserContext>();
  readonly #spki: string;

  constructor(private readonly opts: ChromiumBrokerOptions) {
    const der = createPublicKey(opts.leafKeyPem).export({ type: 'spki', format: 'der' });
    this.#spki = createHash('sha256').update(der).digest('base64');
  }

  up(): boolean {
    return this.#browser?.isConnected() ?? false;
  }

  async #ensure(): Promise<Browser> {
    if (this.#browser?.isConnected()) return this.#browser;
    this.#starting ??= chromium.launch({
      executablePath: this.opts.executablePath,
      headless: true,
      args: [...FLAGS, `--ignore-certificate-errors-spki-list=${this.#spki}`],
      // Per-context proxies need a global one on some platforms; every context sets its own.
      proxy: { server: 'http://per-context' },
    }).then((b) => {
      this.#browser = b;
      b.on('disconnected', () => {
        this.#browser = null;
        this.#contexts.clear();
      });
      return b;
    }).finally(() => {
      this.#starting = null;
    });
    return this.#starting;
  }

  /** Starts the browser ahead of the first lease (a warm pool of one). */
  async warm(): Promise<void> {
    await this.#ensure();
  }

  async open(lease: OpenLease): Promise<void> {
    const browser = await this.#ensure();
    const context = await browser.newContext({
      proxy: lease.proxy,
      storageState: (lease.storageState ?? undefined) as never,
      acceptDownloads: false,
      serviceWorkers: 'block',
    });
    this.#contexts.set(lease.id, context);
  }

  context(leaseId: string): BrowserContext | undefined {
    return this.#contexts.get(leaseId);
  }

  async exportState(leaseId: string): Promise<StorageState> {
    const c = this.#contexts.get(leaseId);
    if (!c) throw new Error('no such lease context');
    return (await c.storageState()) as StorageState;
  }

  async close(leaseId: string): Promise<void> {
    const c = this.#contexts.get(leaseId);
    this.#contexts.delete(leaseId);
    await c?.close().catch(() => {});
  }

  has(leaseId: string): boolean {
    return this.#contexts.has(leaseId);
  }

  async shutdown(): Promise<void> {
    const b = this.#browser ?? (this.#starting ? await this.#starting.catch(() => null) : null);
    this.#browser = null;
    this.#contexts.clear();
    await b?.close().catch(() => {});
  }
}
