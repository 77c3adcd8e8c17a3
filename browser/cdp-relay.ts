import { WebSocket, type RawData } from 'ws';

/**
 * The agent's CDP endpoint of one lease (issue 14, item 3): a relay between the agent's
 * CDP client (`chromium.connectOverCDP(cdp_url)`) and the shared browser, limited to the
 * lease's browser context. The agent sees a browser whose only pages are its context's:
 *
 * - browser-level commands pass only from an allow-list; `Target.createTarget` and
 *   `Browser.setDownloadBehavior` are pinned to the lease's context; target commands name
 *   a target of that context or are refused; `Target.getBrowserContexts` answers none, so
 *   the context is the client's default one;
 * - auto-attach is emulated: the relay attaches (flat sessions) to the context's pages
 *   itself, so setting it never pauses or exposes another lease's pages;
 * - events and answers of sessions the relay did not attach, and target events of other
 *   contexts, never reach the agent;
 * - while the lease is taken over by a person, every agent command is refused.
 */
const RELAY_IDS = 1_000_000_000;

interface TargetInfo {
  targetId: string;
  type: string;
  browserContextId?: string;
  [k: string]: unknown;
}

type Msg = { id?: number; method?: string; params?: Record<string, any>; sessionId?: string; result?: unknown; error?: unknown };

const PASS = new Set(['Browser.getVersion', 'Target.setRemoteLocations']);
const TARGET_SCOPED = new Set(['Target.closeTarget', 'Target.activateTarget', 'Target.getTargetInfo', 'Browser.getWindowForTarget']);

export interface RelayHooks {
  /** Whether a person holds the browser now (every agent command is refused). */
  takenOver(): boolean;
}

export function relayCdp(client: WebSocket, browserEndpoint: string, contextId: string, hooks: RelayHooks): void {
  const upstream = new WebSocket(browserEndpoint, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  const targets = new Map<string, TargetInfo>();
  const sessions = new Set<string>();
  const attaching = new Set<string>();
  const pending = new Map<number, (m: Msg) => void>();
  const queue: string[] = [];
  let relayId = RELAY_IDS;
  /** Client createTarget calls: their answer waits until the new page is attached (as real auto-attach does). */
  const creating = new Set<number>();
  const attached = new Map<string, Promise<void>>();
  let discover = false;
  let autoAttach = false;
  let ready = false;

  const toClient = (m: Msg): void => {
    if (client.readyState === WebSocket.OPEN) client.send(JSON.stringify(m));
  };
  const toUpstream = (m: Msg): void => {
    const text = JSON.stringify(m);
    if (ready) upstream.send(text);
    else queue.push(text);
  };
  const call = (method: string, params: Record<string, unknown> = {}): Promise<Msg> =>
    new Promise((resolve) => {
      const id = ++relayId;
      pending.set(id, resolve);
      toUpstream({ id, method, params });
    });
  const refuse = (m: Msg, message: string): void => toClient({ id: m.id, sessionId: m.sessionId, error: { code: -32000, message } });
  const ours = (t: TargetInfo | undefined): boolean => Boolean(t && t.browserContextId === contextId);

  function attach(targetId: string): Promise<void> {
    const seen = attached.get(targetId);
    if (seen) return seen;
    attaching.add(targetId);
    const done = call('Target.attachToTarget', { targetId, flatten: true }).then(() => undefined);
    attached.set(targetId, done);
    return done;
  }

  function fromClient(data: RawData): void {
    let m: Msg;
    try {
      m = JSON.parse(data.toString());
    } catch {
      return;
    }
    if (typeof m.id !== 'number' || m.id >= RELAY_IDS || typeof m.method !== 'string') return refuse(m, 'not a CDP command');
    if (hooks.takenOver()) return refuse(m, 'the browser is taken over by a person; commands are refused until it is handed back');
    if (m.sessionId !== undefined) {
      if (!sessions.has(m.sessionId)) return refuse(m, 'no such session');
      return toUpstream(m);
    }
    const p = m.params ?? {};
    if (PASS.has(m.method)) return toUpstream(m);
    switch (m.method) {
      case 'Target.getBrowserContexts':
        return toClient({ id: m.id, result: { browserContextIds: [] } });
      case 'Target.setDiscoverTargets':
        discover = Boolean(p.discover);
        toClient({ id: m.id, result: {} });
        if (discover) for (const t of targets.values()) toClient({ method: 'Target.targetCreated', params: { targetInfo: t } });
        return;
      case 'Target.setAutoAttach':
        autoAttach = Boolean(p.autoAttach);
        toClient({ id: m.id, result: {} });
        if (autoAttach) for (const t of targets.values()) if (t.type === 'page') void attach(t.targetId);
        return;
      case 'Target.getTargets':
        return toClient({ id: m.id, result: { targetInfos: [...targets.values()] } });
      case 'Target.createTarget':
        creating.add(m.id);
        return toUpstream({ ...m, params: { ...p, browserContextId: contextId } });
      case 'Browser.setDownloadBehavior':
        return toUpstream({ ...m, params: { ...p, browserContextId: contextId } });
      case 'Target.attachToTarget':
        if (!ours(targets.get(String(p.targetId)))) return refuse(m, 'no such target');
        return toUpstream({ ...m, params: { ...p, flatten: true } });
      case 'Target.detachFromTarget':
        if (!sessions.has(String(p.sessionId))) return refuse(m, 'no such session');
        return toUpstream(m);
      default:
        // The browser target's own info (no targetId): what a CDP client asks first.
        if (m.method === 'Target.getTargetInfo' && p.targetId === undefined) return toUpstream(m);
        if (TARGET_SCOPED.has(m.method)) {
          if (!ours(targets.get(String(p.targetId)))) return refuse(m, 'no such target');
          return toUpstream(m);
        }
        return refuse(m, `${m.method} is not available through a lease's CDP endpoint`);
    }
  }

  function fromUpstream(data: RawData): void {
    let m: Msg;
    try {
      m = JSON.parse(data.toString());
    } catch {
      return;
    }
    if (typeof m.id === 'number') {
      if (m.id > RELAY_IDS) {
        pending.get(m.id)?.(m);
        pending.delete(m.id);
        return;
      }
      if (m.sessionId !== undefined && !sessions.has(m.sessionId)) return;
      if (creating.delete(m.id)) {
        const targetId = (m.result as { targetId?: string } | undefined)?.targetId;
        if (targetId && autoAttach) {
          void attach(targetId).then(() => toClient(m));
          return;
        }
      }
      return toClient(m);
    }
    if (m.sessionId !== undefined) {
      if (!sessions.has(m.sessionId)) return;
      // A child of one of our sessions (an out-of-process iframe, a worker): ours too.
      if (m.method === 'Target.attachedToTarget' && typeof m.params?.sessionId === 'string') sessions.add(m.params.sessionId);
      if (m.method === 'Target.detachedFromTarget' && typeof m.params?.sessionId === 'string') sessions.delete(m.params.sessionId);
      toClient(m);
      return;
    }
    const p = m.params ?? {};
    switch (m.method) {
      case 'Target.targetCreated':
      case 'Target.targetInfoChanged': {
        const t = p.targetInfo as TargetInfo;
        if (!ours(t)) return;
        targets.set(t.targetId, t);
        if (discover) toClient(m);
        if (m.method === 'Target.targetCreated' && autoAttach && t.type === 'page') void attach(t.targetId);
        return;
      }
      case 'Target.targetDestroyed': {
        const id = String(p.targetId);
        if (!targets.has(id)) return;
        targets.delete(id);
        attaching.delete(id);
        attached.delete(id);
        if (discover) toClient(m);
        return;
      }
      case 'Target.attachedToTarget': {
        const t = p.targetInfo as TargetInfo;
        if (!ours(t)) return;
        sessions.add(String(p.sessionId));
        toClient({ ...m, params: { ...p, waitingForDebugger: false } });
        return;
      }
      case 'Target.detachedFromTarget': {
        const s = String(p.sessionId);
        if (!sessions.delete(s)) return;
        toClient(m);
        return;
      }
      default:
        return; // another context's, or the browser's own: not the agent's business
    }
  }

  upstream.on('open', () => {
    ready = true;
    for (const text of queue.splice(0)) upstream.send(text);
    // The relay's own view of targets: which are this context's.
    void call('Target.setDiscoverTargets', { discover: true });
  });
  upstream.on('message', fromUpstream);
  client.on('message', fromClient);
  const closeBoth = (): void => {
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) client.close();
    if (upstream.readyState === WebSocket.OPEN || upstream.readyState === WebSocket.CONNECTING) upstream.close();
  };
  upstream.on('close', closeBoth);
  upstream.on('error', closeBoth);
  client.on('close', closeBoth);
  client.on('error', closeBoth);
}
