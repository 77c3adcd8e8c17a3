import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { CdpMessage, CdpPipe } from './cdp-pipe.js';
import { BROWSER_RUN, type BrowserSandbox } from './browser-sandbox.js';
import type { StorageState } from './broker.js';

/** How long a takeover's reload of a page may take to commit before the page is replaced instead (reloadForPerson). */
const PERSON_RELOAD_MS = 5_000;

/**
 * One environment's browser (issue 23, item 1): the sandboxed Chromium of that environment
 * alone (or of none yet: a pool slot, browser-pool.ts), and one browser context per lease of it. It keeps the registry of targets (from
 * root-level discovery, so every agent connection sees the same truth at once: a target the
 * agent just created is known before its answer is relayed), enforces the page cap per lease,
 * and does the broker's own work over CDP: contexts, the profile's signed-in state in and out,
 * the page a person sees.
 */
export interface TargetInfo {
  targetId: string;
  type: string;
  browserContextId?: string;
  url?: string;
  title?: string;
  attached?: boolean;
  openerId?: string;
  [k: string]: unknown;
}

export type TargetEvent = 'created' | 'changed' | 'destroyed';

/** A flat CDP session the broker itself holds (the viewer's, the storage helper's). */
export interface CdpSession {
  readonly id: string;
  send<T = any>(method: string, params?: Record<string, unknown>): Promise<T>;
  on(method: string, f: (params: any) => void): void;
  detach(): Promise<void>;
}

interface LeaseContext {
  contextId: string;
  /** Origins the lease's pages have been on (their localStorage is saved with the profile). */
  origins: Set<string>;
  /** The context's blank page (see Spare): its target id once made (null if it could not be), hidden until the agent's first about:blank page takes it. */
  blankPage: Promise<string | null>;
  blankTaken: boolean;
}

/**
 * The next lease's context, made ahead (issue 29, item 3): a fresh context, downloads denied,
 * with one blank page in it. A page is a renderer process, and starting one is most of what
 * an agent's first page and first load wait for (~45 ms for the target, ~40 ms more before
 * the page answers, on this 2-core VM); made ahead, it is ready when the agent asks. Nothing
 * is loaded in it but about:blank and no session is attached, so it is as fresh as one made
 * at the create; it belongs to this browser, hence to this environment, like every context here.
 */
interface Spare {
  contextId: string;
  /** Its blank page: being made (the lease may take the context first), then its target id, or null when none could be made. */
  page: Promise<string | null>;
}

const PAGE = 'page';
/**
 * Browser-internal pages: headless Chromium opens WebUI pages of its own (the omnibox popup)
 * in each new window, in the window's context. They are privileged (chrome:// with its own
 * bindings): never shown to an agent, never counted, never reloaded.
 */
const INTERNAL_URL = /^(chrome|chrome-untrusted|devtools|chrome-extension|chrome-search):/i;

function originOf(url: string | undefined): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.origin : null;
  } catch {
    return null;
  }
}

/** Bytes of file-input copies one lease may have on the host at once (DOM.setFileInputFiles, issue 23 item 2). */
export const MAX_STAGED_UPLOAD_BYTES = 128 * 1024 * 1024;

export class EnvBrowser {
  readonly targets = new Map<string, TargetInfo>();
  readonly #listeners = new Set<(e: TargetEvent, t: TargetInfo) => void>();
  readonly #leases = new Map<string, LeaseContext>();
  /** Targets the broker opened for its own work (never shown to an agent, never counted). */
  readonly #internal = new Set<string>();
  #lastUsed = Date.now();
  /** The next lease's context and page, being made or ready (one at a time). */
  #spare: Promise<Spare> | null = null;
  /** Contexts whose blank page is being made: the page that appears there is it (internal before any agent hears of it). */
  readonly #blankPending = new Set<string>();

  private constructor(readonly sandbox: BrowserSandbox, private readonly pagesPerLease: number) {
    sandbox.pipe.onRoot((m) => this.#root(m));
  }

  static async start(sandbox: BrowserSandbox, pagesPerLease: number): Promise<EnvBrowser> {
    const b = new EnvBrowser(sandbox, pagesPerLease);
    await sandbox.pipe.send('Target.setDiscoverTargets', { discover: true });
    for (const t of (await sandbox.pipe.send<{ targetInfos: TargetInfo[] }>('Target.getTargets')).targetInfos) {
      if (INTERNAL_URL.test(t.url ?? '')) b.#internal.add(t.targetId);
      b.targets.set(t.targetId, t);
    }
    b.#refill();
    return b;
  }

  get pipe(): CdpPipe {
    return this.sandbox.pipe;
  }

  get alive(): boolean {
    return !this.sandbox.pipe.closed;
  }

  /** Bytes of file-input copies staged per lease (stageUploads), until its context closes. */
  readonly #staged = new Map<string, number>();

  /** Contexts being opened: the browser is in use from the first moment (the idle sweep must not stop it). */
  #opening = 0;

  get idleSinceMs(): number {
    return this.#leases.size || this.#opening ? Infinity : this.#lastUsed;
  }

  #root(m: CdpMessage): void {
    const t = m.params?.targetInfo as TargetInfo | undefined;
    switch (m.method) {
      case 'Target.targetCreated':
        if (!t) return;
        if (INTERNAL_URL.test(t.url ?? '') || (t.type === PAGE && this.#blankPending.has(t.browserContextId ?? ''))) this.#internal.add(t.targetId);
        this.targets.set(t.targetId, t);
        this.#noteOrigin(t);
        this.#enforceCap(t);
        this.#emit('created', t);
        return;
      case 'Target.targetInfoChanged':
        if (!t) return;
        this.targets.set(t.targetId, t);
        this.#noteOrigin(t);
        this.#emit('changed', t);
        return;
      case 'Target.targetDestroyed': {
        const id = String(m.params?.targetId);
        const old = this.targets.get(id);
        this.targets.delete(id);
        this.#internal.delete(id);
        if (old) this.#emit('destroyed', old);
        return;
      }
      default:
    }
  }

  #emit(e: TargetEvent, t: TargetInfo): void {
    if (this.#internal.has(t.targetId)) return;
    for (const f of this.#listeners) f(e, t);
  }

  /** Target events of the agent-visible targets (returns the unsubscribe). */
  subscribe(f: (e: TargetEvent, t: TargetInfo) => void): () => void {
    this.#listeners.add(f);
    return () => this.#listeners.delete(f);
  }

  #noteOrigin(t: TargetInfo): void {
    if (t.type !== PAGE || this.#internal.has(t.targetId)) return;
    const o = originOf(t.url);
    if (!o) return;
    for (const l of this.#leases.values()) if (l.contextId === t.browserContextId) l.origins.add(o);
  }

  /** Contexts where the broker is opening a page of its own (not yet known as internal: never capped). */
  readonly #brokerOpening = new Map<string, number>();

  /** A popup past the cap (window.open) is closed as it appears. */
  #enforceCap(t: TargetInfo): void {
    if (t.type !== PAGE || !t.browserContextId || this.#internal.has(t.targetId) || this.#brokerOpening.get(t.browserContextId)) return;
    if (this.pages(t.browserContextId).length > this.pagesPerLease) {
      void this.pipe.request('Target.closeTarget', { targetId: t.targetId });
    }
  }

  /** Whether a target is an agent-visible one of this context. */
  ours(t: TargetInfo | undefined, contextId: string): t is TargetInfo {
    return Boolean(t && t.browserContextId === contextId && !this.#internal.has(t.targetId) && !INTERNAL_URL.test(t.url ?? ''));
  }

  pages(contextId: string): TargetInfo[] {
    return [...this.targets.values()].filter((t) => t.type === PAGE && this.ours(t, contextId));
  }

  /** Whether the context may have one more page (the relay refuses createTarget past it). */
  roomForPage(contextId: string): boolean {
    return this.pages(contextId).length < this.pagesPerLease;
  }

  /** Records a page the agent just created, before its answer goes back (the registry may not have it yet). */
  knownPage(targetId: string, contextId: string, url: string): void {
    if (!this.targets.has(targetId)) this.targets.set(targetId, { targetId, type: PAGE, browserContextId: contextId, url, title: '', attached: false });
  }

  contextOf(leaseId: string): string | null {
    return this.#leases.get(leaseId)?.contextId ?? null;
  }

  leases(): string[] {
    return [...this.#leases.keys()];
  }

  /** A fresh context for the lease (the spare, or one made now): no cookie, storage or cache of any other; downloads refused. */
  async openContext(leaseId: string, state: StorageState | null): Promise<string> {
    // Taken before any await: two leases opened at once never get the same spare.
    const pending = this.#spare ?? this.#makeSpare();
    this.#spare = null;
    this.#opening++;
    let spare: Spare;
    try {
      spare = await pending;
    } finally {
      this.#opening--;
    }
    const browserContextId = spare.contextId;
    this.#leases.set(leaseId, { contextId: browserContextId, origins: new Set(), blankPage: spare.page, blankTaken: false });
    try {
      if (state) await this.#importState(leaseId, browserContextId, state);
    } catch (err) {
      await this.closeContext(leaseId);
      throw err;
    }
    return browserContextId;
  }

  async #makeSpare(): Promise<Spare> {
    const { browserContextId } = await this.pipe.send<{ browserContextId: string }>('Target.createBrowserContext', { disposeOnDetach: false });
    await this.pipe.send('Browser.setDownloadBehavior', { behavior: 'deny', browserContextId });
    this.#blankPending.add(browserContextId);
    const page = this.pipe.request('Target.createTarget', { url: 'about:blank', browserContextId }).then((a) => {
      this.#blankPending.delete(browserContextId);
      const id = (a.result as { targetId?: string } | undefined)?.targetId ?? null;
      if (id) this.#internal.add(id);
      return id;
    });
    return { contextId: browserContextId, page };
  }

  /** Makes the next lease's context ahead, if none is (at the start and after each release: when the agent is not waiting). */
  #refill(): void {
    if (this.#spare || !this.alive) return;
    const spare = this.#makeSpare();
    this.#spare = spare;
    // A failed spare is dropped; the next lease makes its own (and answers its failure).
    spare.catch(() => {
      if (this.#spare === spare) this.#spare = null;
    });
  }

  /**
   * The agent's first about:blank page (Target.createTarget): the context's ready blank page,
   * shown from now on (its targetCreated goes out as for a page just made), or null when it
   * has none left. Asked for another URL, or a window size, the blank page is closed instead
   * (a renderer the agent would never use) and null returned: the caller creates the page.
   */
  async takeBlankPage(contextId: string, wanted: { url: string; sized: boolean }): Promise<string | null> {
    const l = this.#leases.get(this.#leaseOf(contextId) ?? '');
    if (!l) return null;
    const taken = l.blankTaken;
    l.blankTaken = true;
    const id = await l.blankPage;
    // Taken already: the caller makes its page once the blank one is made, so a page of its own
    // never appears while the context's new page is taken for the blank one (#blankPending).
    if (taken) return null;
    const t = id ? this.targets.get(id) : undefined;
    // The lease may have ended meanwhile (its context with the page).
    if (!t || this.#leaseOf(contextId) === null) return null;
    if (wanted.url !== 'about:blank' || wanted.sized) {
      void this.pipe.request('Target.closeTarget', { targetId: t.targetId });
      return null;
    }
    this.#internal.delete(t.targetId);
    this.#emit('created', t);
    return t.targetId;
  }

  #leaseOf(contextId: string): string | null {
    for (const [lease, l] of this.#leases) if (l.contextId === contextId) return lease;
    return null;
  }

  async closeContext(leaseId: string): Promise<void> {
    const l = this.#leases.get(leaseId);
    this.#leases.delete(leaseId);
    this.#staged.delete(leaseId);
    this.#lastUsed = Date.now();
    rmSync(join(this.sandbox.stagingDir, 'uploads', leaseId), { recursive: true, force: true });
    if (l) await this.pipe.request('Target.disposeBrowserContext', { browserContextId: l.contextId });
    this.#refill();
  }

  /**
   * Puts files (read from the environment's disk by the caller) where the lease's pages may
   * pick them (DOM.setFileInputFiles): a directory of the lease's own, deleted at release.
   * Returns their paths as the browser sees them.
   */
  stageUploads(leaseId: string, files: Array<{ name: string; data: Buffer }>): string[] {
    if (!this.#leases.has(leaseId)) throw new Error('no such lease context');
    // The copies are on the host's disk until the lease ends: a total per lease, or one
    // agent setting ten 16 MiB files again and again fills the host (every tenant's store).
    const bytes = files.reduce((n, f) => n + f.data.length, 0);
    const staged = this.#staged.get(leaseId) ?? 0;
    if (staged + bytes > MAX_STAGED_UPLOAD_BYTES) {
      throw new Error(`file inputs of one lease take at most ${MAX_STAGED_UPLOAD_BYTES / 1024 / 1024} MiB in all (${Math.ceil(staged / 1024 / 1024)} MiB staged already)`);
    }
    this.#staged.set(leaseId, staged + bytes);
    const batch = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const out: string[] = [];
    files.forEach((f, i) => {
      const dir = join(this.sandbox.stagingDir, 'uploads', leaseId, batch, String(i));
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      for (const d of [join(this.sandbox.stagingDir, 'uploads'), join(this.sandbox.stagingDir, 'uploads', leaseId), join(this.sandbox.stagingDir, 'uploads', leaseId, batch), dir]) chmodSync(d, 0o755);
      const name = basename(f.name).replace(/[^\w.@+-]/g, '_').slice(0, 200) || 'file';
      writeFileSync(join(dir, name), f.data, { mode: 0o644 });
      out.push(`${BROWSER_RUN}/uploads/${leaseId}/${batch}/${i}/${name}`);
    });
    return out;
  }

  /** A flat session of the broker's own on a target. */
  async attach(targetId: string): Promise<CdpSession> {
    const { sessionId } = await this.pipe.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    const handlers = new Map<string, Array<(p: any) => void>>();
    this.pipe.claim(sessionId, (m) => {
      if (m.method) for (const f of handlers.get(m.method) ?? []) f(m.params ?? {});
    });
    const pipe = this.pipe;
    return {
      id: sessionId,
      send: (method, params = {}) => pipe.send(method, params, sessionId),
      on(method, f) {
        const list = handlers.get(method) ?? [];
        list.push(f);
        handlers.set(method, list);
      },
      async detach() {
        pipe.release(sessionId);
        await pipe.request('Target.detachFromTarget', { sessionId });
      },
    };
  }

  /** The page a person sees at takeover: the lease's last page, or a new blank one. */
  async ensurePage(leaseId: string): Promise<string> {
    const ctx = this.contextOf(leaseId);
    if (!ctx) throw new Error('no such lease context');
    const pages = this.pages(ctx);
    if (pages.length) return pages[pages.length - 1]!.targetId;
    const blank = await this.takeBlankPage(ctx, { url: 'about:blank', sized: false });
    if (blank) return blank;
    const { targetId } = await this.pipe.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank', browserContextId: ctx });
    this.knownPage(targetId, ctx, 'about:blank');
    return targetId;
  }

  page(leaseId: string): TargetInfo | null {
    const ctx = this.contextOf(leaseId);
    const pages = ctx ? this.pages(ctx) : [];
    return pages[pages.length - 1] ?? null;
  }

  /**
   * Before a person takes the browser (issue 23, item 3): every page of the lease is loaded
   * afresh at its current address, so no script the agent put in a page (an evaluated
   * listener, a keylogger in a real login page) is there when the person types. What the
   * agent typed into a form is lost with it; the person starts from the page as its site
   * serves it. A page whose reload is not committed within PERSON_RELOAD_MS is replaced by a
   * new page at its address (its history and sessionStorage go with it).
   */
  async reloadForPerson(leaseId: string): Promise<void> {
    const ctx = this.contextOf(leaseId);
    if (!ctx) return;
    await Promise.all(this.pages(ctx).map(async (t) => {
      const s = await this.attach(t.targetId).catch(() => null);
      if (!s) return;
      try {
        let url = t.url && /^(https?:|about:blank$)/.test(t.url) ? t.url : 'about:blank';
        // Without its fragment: a navigation to the same address with one is a
        // same-document navigation, which loads nothing and keeps the agent's scripts (set
        // `location.hash`, then wait for the person).
        if (url !== 'about:blank') {
          const u = new URL(url);
          u.hash = '';
          url = u.href;
        }
        // Until a navigation commits, the old document is the page, listening: one the site
        // never answers (a site the agent may reach, and could run) kept it for the person.
        let timer: NodeJS.Timeout | undefined;
        const r = await Promise.race([
          s.send<{ loaderId?: string; errorText?: string }>('Page.navigate', { url }),
          new Promise<null>((resolve) => (timer = setTimeout(resolve, PERSON_RELOAD_MS, null))),
        ]).catch(() => null).finally(() => clearTimeout(timer));
        // No new document (a same-document navigation after all, a navigation that failed or
        // is not committed in time): the page goes, a new one of the context opens at the
        // address, so nothing of the old document remains.
        if (!r?.loaderId) {
          const closed = await this.pipe.send('Target.closeTarget', { targetId: t.targetId }).then(() => true, () => false);
          if (closed) await this.pipe.send('Target.createTarget', { url, browserContextId: ctx }).catch(() => {});
        }
      } catch { /* the page went away */ } finally {
        await s.detach().catch(() => {});
      }
    }));
  }

  /** The context's signed-in state now (cookies incl. HttpOnly, localStorage of the origins it was on): Playwright's storageState shape. */
  async exportState(leaseId: string): Promise<StorageState> {
    const l = this.#leases.get(leaseId);
    if (!l) throw new Error('no such lease context');
    const { cookies } = await this.pipe.send<{ cookies: any[] }>('Storage.getCookies', { browserContextId: l.contextId });
    const origins: StorageState['origins'] = [];
    const wanted = [...l.origins];
    if (wanted.length) {
      await this.#onOrigins(l.contextId, wanted, async (origin, s) => {
        const r = await s.send<{ result: { value?: string } }>('Runtime.evaluate', { expression: 'JSON.stringify(Object.entries(localStorage))', returnByValue: true });
        const items = JSON.parse(r.result.value ?? '[]') as Array<[string, string]>;
        if (items.length) origins.push({ origin, localStorage: items.map(([name, value]) => ({ name, value })) });
      });
    }
    return {
      cookies: cookies.map((c) => ({
        name: c.name, value: c.value, domain: c.domain, path: c.path, expires: c.session ? -1 : c.expires,
        httpOnly: Boolean(c.httpOnly), secure: Boolean(c.secure), sameSite: c.sameSite ?? 'Lax',
      })),
      origins,
    };
  }

  async #importState(leaseId: string, contextId: string, state: StorageState): Promise<void> {
    const cookies = (state.cookies as any[]).map((c) => {
      const out: Record<string, unknown> = { name: c.name, value: c.value, domain: c.domain, path: c.path, httpOnly: Boolean(c.httpOnly), secure: Boolean(c.secure) };
      if (typeof c.expires === 'number' && c.expires > 0) out.expires = c.expires;
      if (c.sameSite === 'Strict' || c.sameSite === 'Lax' || c.sameSite === 'None') out.sameSite = c.sameSite;
      return out;
    });
    if (cookies.length) await this.pipe.send('Storage.setCookies', { cookies, browserContextId: contextId });
    const withItems = (state.origins as Array<{ origin: string; localStorage?: Array<{ name: string; value: string }> }>).filter((o) => originOf(o.origin) && o.localStorage?.length);
    const l = this.#leases.get(leaseId)!;
    for (const o of withItems) l.origins.add(originOf(o.origin)!);
    if (!withItems.length) return;
    const byOrigin = new Map(withItems.map((o) => [originOf(o.origin)!, o.localStorage!]));
    await this.#onOrigins(contextId, [...byOrigin.keys()], async (origin, s) => {
      await s.send('Runtime.evaluate', {
        expression: `(items => { for (const [k, v] of items) localStorage.setItem(k, v); })(${JSON.stringify(byOrigin.get(origin)!.map((i) => [i.name, i.value]))})`,
      });
    });
  }

  /**
   * Runs `f` in a page of the context at each origin, served an empty document by the broker
   * itself (Fetch), so localStorage can be read or written without a request leaving.
   */
  async #onOrigins(contextId: string, origins: string[], f: (origin: string, s: CdpSession) => Promise<void>): Promise<void> {
    this.#brokerOpening.set(contextId, (this.#brokerOpening.get(contextId) ?? 0) + 1);
    let targetId: string;
    try {
      ({ targetId } = await this.pipe.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank', browserContextId: contextId }));
      this.#internal.add(targetId);
    } finally {
      const n = (this.#brokerOpening.get(contextId) ?? 1) - 1;
      if (n > 0) this.#brokerOpening.set(contextId, n);
      else this.#brokerOpening.delete(contextId);
    }
    const s = await this.attach(targetId);
    try {
      s.on('Fetch.requestPaused', (p: { requestId: string; resourceType: string }) => {
        if (p.resourceType === 'Document') {
          void s.send('Fetch.fulfillRequest', { requestId: p.requestId, responseCode: 200, responseHeaders: [{ name: 'Content-Type', value: 'text/html' }], body: '' }).catch(() => {});
        } else void s.send('Fetch.failRequest', { requestId: p.requestId, errorReason: 'BlockedByClient' }).catch(() => {});
      });
      await s.send('Fetch.enable', { patterns: [{ urlPattern: '*' }] });
      await s.send('Page.enable');
      for (const origin of origins) {
        const loaded = new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5000);
          s.on('Page.loadEventFired', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        await s.send('Page.navigate', { url: `${origin}/` });
        await loaded;
        await f(origin, s);
      }
    } finally {
      await s.detach().catch(() => {});
      await this.pipe.request('Target.closeTarget', { targetId });
    }
  }

  async stop(): Promise<void> {
    await this.sandbox.kill();
  }
}
