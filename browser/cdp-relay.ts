import { WebSocket, type RawData } from 'ws';
import type { CdpMessage } from './cdp-pipe.js';
import { COOKIE_READS, mayCarrySession, redactSession, sessionMethod, stripHttpOnly, urlAllowed } from './cdp-rules.js';
import type { EnvBrowser, TargetInfo } from './env-browser.js';

/**
 * The agent's CDP endpoint of one lease (issue 14, item 3; issue 23, items 2–4): a relay
 * between the agent's CDP client (`chromium.connectOverCDP(cdp_url)`) and its environment's
 * browser, limited to the lease's browser context. Each agent connection works in a browser
 * session of its own on the broker's pipe (`Target.attachToBrowserTarget`), so Chromium keeps
 * connections apart; on top of that the relay is an allow-list at every level:
 *
 * - browser level: `Browser.getVersion`; target discovery, attach and auto-attach emulated
 *   from the broker's registry for the lease's context only; `Target.createTarget` pinned to
 *   the context, its URL checked, the page cap kept; `Target.attachToTarget`, `closeTarget`,
 *   `activateTarget`, `getTargetInfo` only for the context's targets; `Browser.setDownloadBehavior`
 *   answered but never applied (downloads stay refused); the `Storage` cookie calls pinned to
 *   the context; everything else refused;
 * - session level: cdp-rules.ts (`sessionMethod`), plus URL, file and cookie checks here;
 * - children: a session Chromium attaches under one of ours (an iframe, a worker) is adopted
 *   only when its target is of the lease's context, else detached at once;
 * - what the agent hears: events and answers of its own sessions only, with every Cookie,
 *   Set-Cookie and Authorization value replaced and HttpOnly cookie values left out;
 * - while a person holds the browser, every command is refused (the connection is closed at
 *   takeover anyway, and a new one refused, by the service).
 */
export interface RelayHooks {
  /** Whether a person holds the browser now. */
  takenOver(): boolean;
  /**
   * Copies files of the environment's disk (absolute paths under /home/agent) into the
   * browser's uploads and returns their paths inside the browser; refuses (throws) otherwise.
   */
  uploadFiles?(paths: string[]): Promise<string[]>;
}

export interface Relay {
  /** Closes the agent's connection and detaches every session it had (its bindings and scripts end). */
  close(code?: number, reason?: string): Promise<void>;
}

type Msg = CdpMessage;

/** Targets a session of ours may have attached under it, when they are of the lease's context. */
const CHILD_TYPES = new Set(['page', 'iframe', 'worker', 'shared_worker', 'service_worker']);
const TARGET_SCOPED = new Set(['Target.closeTarget', 'Target.activateTarget', 'Target.getTargetInfo', 'Browser.getWindowForTarget']);
const STORAGE_COOKIES = new Set(['Storage.getCookies', 'Storage.setCookies', 'Storage.clearCookies']);

/** Bytes the service holds for an agent's CDP connection that it has not read yet; past it the connection ends. */
export const MAX_CLIENT_BUFFERED = 64 * 1024 * 1024;
/**
 * CDP connections one lease may have open at once (a CDP client keeps one; Playwright and
 * Puppeteer do). Each is a WebSocket, a descriptor and a browser session in this process and
 * the browser; an agent holding the lease's URL opened them without end (the API port has no
 * cap of its own, unlike an environment's browser.sock). Past it the upgrade is 429.
 */
export const MAX_CONNECTIONS_PER_LEASE = 16;

export function relayCdp(client: WebSocket, browser: EnvBrowser, contextId: string, hooks: RelayHooks): Relay {
  const pipe = browser.pipe;
  /** This connection's browser session; root-level commands of the agent go there. */
  let root: string | null = null;
  const waiting: RawData[] = [];
  /** Adopted sessions → the session that owns them (root, or a page's for its frames and workers). */
  const sessions = new Map<string, string>();
  const attaching = new Map<string, Promise<void>>();
  let discover = false;
  let autoAttach = false;
  let closed = false;
  let unsubscribe: () => void = () => {};

  const toClient = (m: Msg): void => {
    if (client.readyState !== WebSocket.OPEN) return;
    // An agent that stops reading would make the service hold every answer (a few commands
    // of large answers are hundreds of MiB in this process): past the cap, its connection
    // ends (1008), as a slow consumer does on any broker.
    if (client.bufferedAmount > MAX_CLIENT_BUFFERED) {
      void close(1008, 'the client does not read its answers');
      return;
    }
    client.send(JSON.stringify(m));
  };
  const refuse = (m: Msg, message: string): void => toClient({ id: m.id, sessionId: m.sessionId, error: { code: -32000, message } });
  const ours = (targetId: unknown): TargetInfo | null => {
    const t = browser.targets.get(String(targetId));
    return browser.ours(t, contextId) ? t : null;
  };
  /** Passes a command on and its answer back, in Chromium's order. */
  const pass = (m: Msg, method: string, params: Record<string, unknown>, sessionId: string, shape?: (result: unknown) => unknown): void => {
    pipe.call(method, params, sessionId, (a) => {
      if (a.error) return toClient({ id: m.id, sessionId: m.sessionId, error: a.error });
      toClient({ id: m.id, sessionId: m.sessionId, result: shape ? shape(a.result) : a.result });
    });
  };

  function adopt(sessionId: string, owner: string): void {
    sessions.set(sessionId, owner);
    pipe.claim(sessionId, (m) => fromSession(sessionId, m));
  }

  /** A session attached under one of ours: adopted when its target is the lease's, else detached unseen. */
  function attachedUnder(owner: string, m: Msg): boolean {
    const p = m.params ?? {};
    const t = p.targetInfo as TargetInfo | undefined;
    const child = String(p.sessionId);
    if (t && browser.ours(t, contextId) && CHILD_TYPES.has(t.type)) {
      adopt(child, owner);
      return true;
    }
    pipe.call('Target.detachFromTarget', { sessionId: child }, owner, () => {});
    return false;
  }

  function fromSession(sessionId: string, m: Msg): void {
    if (closed) return;
    if (m.method === 'Target.attachedToTarget') {
      if (attachedUnder(sessionId, m)) toClient(m);
      return;
    }
    if (m.method === 'Target.detachedFromTarget') {
      const child = String(m.params?.sessionId);
      if (!sessions.has(child)) return;
      sessions.delete(child);
      pipe.release(child);
      toClient(m);
      return;
    }
    toClient(mayCarrySession(m.method) ? (redactSession(m) as Msg) : m);
  }

  function fromRootSession(m: Msg): void {
    if (closed) return;
    const p = m.params ?? {};
    if (m.method === 'Target.attachedToTarget') {
      if (attachedUnder(root!, m)) toClient({ method: m.method, params: { ...p, waitingForDebugger: false } });
      return;
    }
    if (m.method === 'Target.detachedFromTarget') {
      const s = String(p.sessionId);
      if (!sessions.has(s)) return;
      sessions.delete(s);
      pipe.release(s);
      toClient({ method: m.method, params: p });
    }
    // Anything else on the browser session (other contexts' business) is not the agent's.
  }

  function attach(targetId: string): Promise<void> {
    const seen = attaching.get(targetId);
    if (seen) return seen;
    const done = pipe.request('Target.attachToTarget', { targetId, flatten: true }, root!).then(() => undefined);
    attaching.set(targetId, done);
    return done;
  }

  function onTarget(e: 'created' | 'changed' | 'destroyed', t: TargetInfo): void {
    if (closed || !browser.ours(t, contextId)) return;
    if (e === 'destroyed') {
      attaching.delete(t.targetId);
      if (discover) toClient({ method: 'Target.targetDestroyed', params: { targetId: t.targetId } });
      return;
    }
    if (discover) toClient({ method: e === 'created' ? 'Target.targetCreated' : 'Target.targetInfoChanged', params: { targetInfo: t } });
    if (e === 'created' && autoAttach && t.type === 'page') void attach(t.targetId);
  }

  async function sessionCommand(m: Msg, method: string, p: Record<string, any>, sid: string): Promise<void> {
    const v = sessionMethod(method);
    if (!v.ok) return refuse(m, v.why);
    switch (method) {
      case 'Target.setAutoAttach':
        return pass(m, method, { ...p, flatten: true }, sid);
      case 'Page.navigate':
        if (!urlAllowed(p.url)) return refuse(m, 'this URL scheme is not available to a lease (file:, chrome:, view-source:, devtools: and the like are refused)');
        return pass(m, method, p, sid);
      case 'DOM.setFileInputFiles': {
        const files = Array.isArray(p.files) ? p.files : [];
        if (!files.every((f: unknown) => typeof f === 'string')) return refuse(m, 'files must be paths');
        if (!files.length) return pass(m, method, p, sid);
        if (!hooks.uploadFiles) return refuse(m, 'file uploads take files of the environment\'s disk, and this lease cannot reach it');
        let inside: string[];
        try {
          inside = await hooks.uploadFiles(files as string[]);
        } catch (err) {
          return refuse(m, `DOM.setFileInputFiles: ${(err as Error).message}`);
        }
        if (closed) return;
        return pass(m, method, { ...p, files: inside }, sid);
      }
      case 'Input.dispatchDragEvent':
        if (Array.isArray(p.data?.files) && p.data.files.length) return refuse(m, 'dragging files into a page is not available to a lease');
        return pass(m, method, p, sid);
      case 'Storage.getCookies':
      case 'Storage.setCookies':
      case 'Storage.clearCookies':
        // Sent on a page's session, Chromium answers for the browser's default context, not the
        // page's: they go to the connection's browser session, pinned to the lease's context.
        return pass(m, method, { ...p, browserContextId: contextId }, root!, method === 'Storage.getCookies' ? stripHttpOnly : undefined);
      default:
        if (COOKIE_READS.has(method)) return pass(m, method, p, sid, stripHttpOnly);
        return pass(m, method, p, sid, mayCarrySession(method) ? redactSession : undefined);
    }
  }

  function browserCommand(m: Msg, method: string, p: Record<string, any>): void {
    const r = root!;
    switch (method) {
      case 'Browser.getVersion':
        return pass(m, method, {}, r);
      case 'Target.getBrowserContexts':
        // The lease's context is the client's default one.
        return toClient({ id: m.id, result: { browserContextIds: [] } });
      case 'Target.setDiscoverTargets':
        discover = Boolean(p.discover);
        toClient({ id: m.id, result: {} });
        if (discover) for (const t of browser.targets.values()) if (browser.ours(t, contextId)) toClient({ method: 'Target.targetCreated', params: { targetInfo: t } });
        return;
      case 'Target.setAutoAttach':
        autoAttach = Boolean(p.autoAttach);
        toClient({ id: m.id, result: {} });
        if (autoAttach) for (const t of browser.pages(contextId)) void attach(t.targetId);
        return;
      case 'Target.getTargets':
        return toClient({ id: m.id, result: { targetInfos: [...browser.targets.values()].filter((t) => browser.ours(t, contextId)) } });
      case 'Target.createTarget': {
        const url = typeof p.url === 'string' ? p.url : 'about:blank';
        if (!urlAllowed(url)) return refuse(m, 'this URL scheme is not available to a lease (file:, chrome:, view-source:, devtools: and the like are refused)');
        if (!browser.roomForPage(contextId)) return refuse(m, 'the lease has as many pages open as it may (GATEWAY_BROWSER_PAGES_PER_LEASE)');
        const created = (a: Msg): void => {
          const targetId = (a.result as { targetId?: string } | undefined)?.targetId;
          const answer = (): void => toClient(a.error ? { id: m.id, error: a.error } : { id: m.id, result: a.result });
          if (targetId && autoAttach) void attach(targetId).then(answer);
          else answer();
        };
        const params: Record<string, unknown> = { url, browserContextId: contextId };
        for (const k of ['width', 'height', 'newWindow', 'background']) if (p[k] !== undefined) params[k] = p[k];
        // The context's blank page, when it has one (env-browser.ts, Spare): its renderer is up, or starting.
        void browser.takeBlankPage(contextId, { url, sized: p.width !== undefined || p.height !== undefined }).then((blank) => {
          if (closed) return;
          if (blank) return created({ result: { targetId: blank } });
          pipe.call(method, params, r, (a) => {
            const targetId = (a.result as { targetId?: string } | undefined)?.targetId;
            // Known at once: an attachToTarget right after the answer must find it (issue 23, item 6).
            if (targetId) browser.knownPage(targetId, contextId, url);
            created(a);
          });
        });
        return;
      }
      case 'Target.attachToTarget':
        if (!ours(p.targetId)) return refuse(m, 'no such target');
        return pass(m, method, { targetId: p.targetId, flatten: true }, r);
      case 'Target.detachFromTarget': {
        const owner = sessions.get(String(p.sessionId));
        if (!owner) return refuse(m, 'no such session');
        return pass(m, method, { sessionId: p.sessionId }, owner);
      }
      case 'Browser.setDownloadBehavior':
        // Answered, never applied: downloads stay refused for the lease (docs/browser.md).
        return toClient({ id: m.id, result: {} });
      case 'Storage.getCookies':
      case 'Storage.setCookies':
      case 'Storage.clearCookies':
        return pass(m, method, { ...p, browserContextId: contextId }, r, method === 'Storage.getCookies' ? stripHttpOnly : undefined);
      default:
        // The browser target's own info (no targetId): what a CDP client asks first.
        if (method === 'Target.getTargetInfo' && p.targetId === undefined) return pass(m, method, {}, r);
        if (TARGET_SCOPED.has(method)) {
          if (!ours(p.targetId)) return refuse(m, 'no such target');
          return pass(m, method, { ...p, targetId: p.targetId }, r);
        }
        return refuse(m, `${method} is not available through a lease's CDP endpoint`);
    }
  }

  function command(data: RawData): void {
    let m: Msg;
    try {
      m = JSON.parse(data.toString());
    } catch {
      return;
    }
    if (!m || typeof m !== 'object' || typeof m.id !== 'number' || typeof m.method !== 'string') {
      return toClient({ id: typeof m?.id === 'number' ? m.id : undefined, error: { code: -32600, message: 'not a CDP command' } });
    }
    if (hooks.takenOver()) return refuse(m, 'the browser is taken over by a person; commands are refused until it is handed back');
    const p = m.params && typeof m.params === 'object' && !Array.isArray(m.params) ? m.params : {};
    if (m.sessionId !== undefined) {
      if (typeof m.sessionId !== 'string' || !sessions.has(m.sessionId)) return refuse(m, 'no such session');
      void sessionCommand(m, m.method, p, m.sessionId);
      return;
    }
    if (STORAGE_COOKIES.has(m.method) || m.method.startsWith('Target.') || m.method.startsWith('Browser.')) return browserCommand(m, m.method, p);
    return refuse(m, `${m.method} is not available through a lease's CDP endpoint`);
  }

  client.on('message', (data) => {
    if (root) command(data);
    else waiting.push(data);
  });

  const close = async (code = 1000, reason = ''): Promise<void> => {
    if (closed) return;
    closed = true;
    unsubscribe();
    offPipe();
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) client.close(code, reason);
    // Detach every session this connection had: with them go its bindings, scripts and
    // subscriptions (issue 23, item 3). Children first, then the browser session itself.
    const mine = [...sessions.entries()];
    sessions.clear();
    for (const [s] of mine) pipe.release(s);
    await Promise.all(mine.filter(([, owner]) => owner === root).map(([s]) => pipe.request('Target.detachFromTarget', { sessionId: s }, root!)));
    if (root) {
      pipe.release(root);
      await pipe.request('Target.detachFromTarget', { sessionId: root });
    }
  };
  client.on('close', () => void close());
  client.on('error', () => void close());
  const offPipe = pipe.onClose(() => void close(1011, 'the browser ended'));

  void pipe.request('Target.attachToBrowserTarget').then((a) => {
    const sid = (a.result as { sessionId?: string } | undefined)?.sessionId;
    if (!sid) return void close(1011, 'the browser could not be reached');
    if (closed) {
      void pipe.request('Target.detachFromTarget', { sessionId: sid });
      return;
    }
    root = sid;
    pipe.claim(sid, fromRootSession);
    unsubscribe = browser.subscribe(onTarget);
    for (const d of waiting.splice(0)) command(d);
  });

  return { close };
}
