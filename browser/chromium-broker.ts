import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, createPublicKey } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
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
  #proc: ChildProcess | null = null;
  /** The browser's own CDP endpoint (ws://127.0.0.1:<port>/devtools/browser/<id>): the lease relays connect to it, never the agent. */
  #wsEndpoint: string | null = null;
  #starting: Promise<Browser> | null = null;
  readonly #contexts = new Map<string, BrowserContext>();
  readonly #contextIds = new Map<string, string>();
  #opening: Promise<void> = Promise.resolve();
  #browserCdp: import('playwright-core').CDPSession | null = null;
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
    this.#starting ??= this.#launch().finally(() => {
      this.#starting = null;
    });
    return this.#starting;
  }

  /**
   * Chromium is started here (not by playwright's launch) so that it serves CDP on a
   * loopback port: the broker drives it through that endpoint, and each lease's relay
   * (cdp-relay.ts) opens its own connection to it, filtered to the lease's context.
   */
  async #launch(): Promise<Browser> {
    const dir = mkdtempSync(join(tmpdir(), 'gw-chromium-'));
    // setpriv --pdeathsig: Chromium dies with this process even on SIGKILL (it would
    // otherwise outlive a crashed service, holding its port and memory).
    const args = [
      ...FLAGS, `--ignore-certificate-errors-spki-list=${this.#spki}`,
      '--headless=new', '--remote-debugging-address=127.0.0.1', '--remote-debugging-port=0', `--user-data-dir=${dir}`,
      '--proxy-server=http://per-context', 'about:blank',
    ];
    const viaSetpriv = existsSync('/usr/bin/setpriv');
    const proc = spawn(viaSetpriv ? '/usr/bin/setpriv' : this.opts.executablePath, viaSetpriv ? ['--pdeathsig', 'SIGKILL', '--', this.opts.executablePath, ...args] : args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const ws = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('Chromium did not start within 30 s')), 30_000);
      const lines = createInterface({ input: proc.stderr! });
      lines.on('line', (line) => {
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`Chromium exited at start (${code})`));
      });
      proc.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    proc.stderr!.resume();
    const b = await chromium.connectOverCDP(ws);
    this.#proc = proc;
    this.#wsEndpoint = ws;
    this.#browser = b;
    b.on('disconnected', () => {
      this.#browser = null;
      this.#browserCdp = null;
      this.#wsEndpoint = null;
      this.#contexts.clear();
    });
    proc.once('exit', () => {
      if (this.#proc === proc) this.#proc = null;
      // Its helper processes may still be writing: retried, never thrown (a leftover temp dir is harmless).
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
      } catch { /* left for the OS's temp cleanup */ }
    });
    return b;
  }

  /** The browser's CDP endpoint, for the lease relays (null while it is not running). */
  endpoint(): string | null {
    return this.#browser?.isConnected() ? this.#wsEndpoint : null;
  }

  /** The CDP id of a lease's browser context (what the relay limits the agent to). */
  contextId(leaseId: string): string | null {
    return this.#contextIds.get(leaseId) ?? null;
  }

  /**
   * A fresh context for the lease, with no page yet (a page is a renderer process, ~120 ms
   * here; a context ~10 ms): the agent opens its pages, and a takeover opens one if there
   * is none. Its CDP id (what the relay limits the agent to) is the one context id that was
   * not there before: opens are serialized for that.
   */
  async open(lease: OpenLease): Promise<void> {
    const browser = await this.#ensure();
    const run = this.#opening.then(async () => {
      const cdp = (this.#browserCdp ??= await browser.newBrowserCDPSession());
      const before = new Set(((await cdp.send('Target.getBrowserContexts')) as { browserContextIds: string[] }).browserContextIds);
      const context = await browser.newContext({
        proxy: lease.proxy,
        storageState: (lease.storageState ?? undefined) as never,
        acceptDownloads: false,
        serviceWorkers: 'block',
      });
      const after = ((await cdp.send('Target.getBrowserContexts')) as { browserContextIds: string[] }).browserContextIds.filter((id) => !before.has(id));
      this.#contexts.set(lease.id, context);
      if (after.length === 1) this.#contextIds.set(lease.id, after[0]!);
    });
    this.#opening = run.catch(() => {});
    await run;
  }

  /** The page a takeover shows: the lease's last page, or a new blank one. */
  async ensurePage(leaseId: string): Promise<void> {
    const c = this.#contexts.get(leaseId);
    if (c && c.pages().length === 0) await c.newPage();
  }

  /** The lease's page a person sees in the viewer: the last one opened that is still open. */
  page(leaseId: string): import('playwright-core').Page | undefined {
    const pages = this.#contexts.get(leaseId)?.pages() ?? [];
    return pages[pages.length - 1];
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
    this.#contextIds.delete(leaseId);
    await c?.close().catch(() => {});
  }

  has(leaseId: string): boolean {
    return this.#contexts.has(leaseId);
  }

  async shutdown(): Promise<void> {
    const b = this.#browser ?? (this.#starting ? await this.#starting.catch(() => null) : null);
    this.#browser = null;
    this.#browserCdp = null;
    this.#contexts.clear();
    this.#contextIds.clear();
    await b?.close().catch(() => {});
    const proc = this.#proc;
    if (proc && proc.exitCode === null) {
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
    }
  }
}
