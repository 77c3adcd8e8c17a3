import { WebSocket } from 'ws';

/**
 * A raw CDP client for attack tests (issue 23, item 7): it sends exactly what it is told,
 * ids, session ids and target ids of anyone's, the way an attacker would (Playwright never
 * sends a foreign id). Every frame it receives is kept, so a test can assert that a secret
 * never appeared in any of them.
 */
export interface CdpAnswer {
  id?: number;
  result?: any;
  error?: { code?: number; message?: string };
  sessionId?: string;
}

export class RawCdp {
  readonly frames: string[] = [];
  readonly events: Array<{ method: string; params: any; sessionId?: string }> = [];
  #next = 0;
  readonly #waiting = new Map<number, (a: CdpAnswer) => void>();
  readonly #eventWaiters = new Set<{ test: (e: { method: string; params: any; sessionId?: string }) => boolean; resolve: (e: any) => void }>();
  closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      const text = d.toString();
      this.frames.push(text);
      let m: any;
      try {
        m = JSON.parse(text);
      } catch {
        return;
      }
      if (typeof m.id === 'number' && this.#waiting.has(m.id)) {
        this.#waiting.get(m.id)!(m);
        this.#waiting.delete(m.id);
      } else if (typeof m.method === 'string') {
        const e = { method: m.method, params: m.params, sessionId: m.sessionId };
        this.events.push(e);
        for (const w of this.#eventWaiters) {
          if (w.test(e)) {
            this.#eventWaiters.delete(w);
            w.resolve(e);
          }
        }
      }
    });
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    void this.closed.then(() => {
      for (const f of this.#waiting.values()) f({ error: { message: 'closed' } });
      this.#waiting.clear();
    });
  }

  static connect(url: string, opts: { maxPayload?: number } = {}): Promise<RawCdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: opts.maxPayload ?? 512 * 1024 * 1024 });
      const c = new RawCdp(ws);
      ws.once('open', () => resolve(c));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
  }

  /** Sends a command; resolves with the answer (result or error), or `{error: closed}`. */
  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<CdpAnswer> {
    const id = ++this.#next;
    return new Promise((resolve) => {
      if (this.ws.readyState !== WebSocket.OPEN) return resolve({ error: { message: 'closed' } });
      this.#waiting.set(id, resolve);
      this.ws.send(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }));
    });
  }

  /** The result of a command that must succeed. */
  async ok(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<any> {
    const a = await this.send(method, params, sessionId);
    if (a.error) throw new Error(`${method}: ${a.error.message}`);
    return a.result;
  }

  /** The first event (already seen or coming) that passes `test`. */
  event(test: (e: { method: string; params: any; sessionId?: string }) => boolean, ms = 10_000): Promise<{ method: string; params: any; sessionId?: string }> {
    const seen = this.events.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = { test, resolve };
      this.#eventWaiters.add(w);
      setTimeout(() => {
        if (this.#eventWaiters.delete(w)) reject(new Error('no such event in time'));
      }, ms).unref();
    });
  }

  /** A page of the lease, attached: its target and flat session ids. */
  async newPage(url = 'about:blank'): Promise<{ targetId: string; sessionId: string }> {
    const { targetId } = await this.ok('Target.createTarget', { url });
    const { sessionId } = await this.ok('Target.attachToTarget', { targetId, flatten: true });
    return { targetId, sessionId };
  }

  /** Runs an expression in a page; its value. */
  async evaluate(sessionId: string, expression: string): Promise<any> {
    const r = await this.ok('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, sessionId);
    if (r.exceptionDetails) throw new Error(`evaluate: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  }

  /** Navigates and waits for the load event (Page.enable'd on the way). */
  async navigate(sessionId: string, url: string): Promise<any> {
    await this.ok('Page.enable', {}, sessionId);
    const loaded = this.event((e) => e.method === 'Page.loadEventFired' && e.sessionId === sessionId && !this.#loads.has(e));
    const r = await this.send('Page.navigate', { url }, sessionId);
    if (!r.error && !r.result?.errorText) this.#loads.add(await loaded);
    return r;
  }

  readonly #loads = new Set<unknown>();

  close(): void {
    this.ws.close();
  }
}
