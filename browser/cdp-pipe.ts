import type { Readable, Writable } from 'node:stream';

/**
 * One CDP connection to a browser over `--remote-debugging-pipe` (issue 23, item 1): Chromium
 * reads NUL-terminated JSON messages on its fd 3 and writes them on its fd 4. There is no
 * DevTools port at all, so nothing but this process can drive the browser.
 *
 * Several users share the one pipe: the broker's own commands (root level), and each agent
 * connection, which works in a browser session of its own (`Target.attachToBrowserTarget`),
 * so that Chromium keeps each one's discovery, auto-attach and sessions apart. Messages are
 * routed by their `sessionId`: a session belongs to exactly one handler, and messages of a
 * session nobody claimed are dropped. Command ids are the pipe's own; the caller's ids never
 * reach Chromium.
 */
export interface CdpMessage {
  id?: number;
  method?: string;
  params?: Record<string, any>;
  sessionId?: string;
  result?: any;
  error?: { code?: number; message?: string; data?: unknown };
}

export type SessionHandler = (m: CdpMessage) => void;

export class CdpError extends Error {
  constructor(readonly method: string, readonly cdp: CdpMessage['error']) {
    super(`${method}: ${cdp?.message ?? 'failed'}`);
  }
}

/** Bytes of one message Chromium may send before it is cut off (a screenshot of a huge page is ~tens of MiB). */
const MAX_INBOUND = 256 * 1024 * 1024;

export class CdpPipe {
  #next = 0;
  readonly #pending = new Map<number, (m: CdpMessage) => void>();
  readonly #sessions = new Map<string, SessionHandler>();
  readonly #root = new Set<SessionHandler>();
  #parts: Buffer[] = [];
  #partsLen = 0;
  #closed = false;
  readonly #onClose = new Set<() => void>();

  constructor(private readonly out: Writable, private readonly inp: Readable) {
    inp.on('data', (d: Buffer) => this.#data(d));
    const end = (): void => this.#close();
    inp.on('end', end);
    inp.on('close', end);
    inp.on('error', end);
    out.on('error', end);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Calls `f` when the browser is gone; returns the unsubscribe (an agent connection that ends first). */
  onClose(f: () => void): () => void {
    if (this.#closed) {
      f();
      return () => {};
    }
    this.#onClose.add(f);
    return () => this.#onClose.delete(f);
  }

  #data(d: Buffer): void {
    // Closed (the browser gone, or a message past MAX_INBOUND): nothing more is kept.
    if (this.#closed) return;
    let from = 0;
    for (let i = d.indexOf(0); i !== -1; i = d.indexOf(0, from)) {
      const piece = d.subarray(from, i);
      from = i + 1;
      if (this.#partsLen + piece.length > MAX_INBOUND) return this.#tooLarge();
      let m: CdpMessage;
      try {
        // The decode too: a message past V8's longest string throws here, and a throw in a
        // stream listener would end the whole service (every tenant), not this browser.
        const text = this.#partsLen ? Buffer.concat([...this.#parts, piece]).toString('utf8') : piece.toString('utf8');
        this.#parts = [];
        this.#partsLen = 0;
        m = JSON.parse(text) as CdpMessage;
      } catch {
        this.#parts = [];
        this.#partsLen = 0;
        continue;
      }
      this.#dispatch(m);
    }
    if (from < d.length) {
      this.#parts.push(d.subarray(from));
      this.#partsLen += d.length - from;
      if (this.#partsLen > MAX_INBOUND) this.#tooLarge();
    }
  }

  /**
   * A message past MAX_INBOUND (a page can make Chromium answer with hundreds of MiB:
   * `'\x01'.repeat(9e7)` evaluated by value): what arrived is dropped, the pipe stops
   * reading, and the browser is treated as gone (its owner ends it), rather than the
   * service holding it or decoding it.
   */
  #tooLarge(): void {
    this.#parts = [];
    this.#partsLen = 0;
    this.#close();
    this.inp.destroy();
  }

  #dispatch(m: CdpMessage): void {
    if (typeof m.id === 'number') {
      const f = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      f?.(m);
      return;
    }
    if (m.sessionId !== undefined) {
      this.#sessions.get(m.sessionId)?.(m);
      return;
    }
    for (const h of this.#root) h(m);
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const f of this.#pending.values()) f({ error: { code: -32000, message: 'the browser is gone' } });
    this.#pending.clear();
    for (const f of this.#onClose) f();
    this.#onClose.clear();
    this.#sessions.clear();
    this.#root.clear();
  }

  /** Sends a command; resolves with Chromium's whole answer (`result` or `error`), never rejects. */
  request(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<CdpMessage> {
    return new Promise((resolve) => this.call(method, params, sessionId, resolve));
  }

  /**
   * Sends a command; `cb` gets Chromium's answer synchronously as it is read, in order with
   * the events around it (the relay passes answers on in the order Chromium sent them).
   */
  call(method: string, params: Record<string, unknown>, sessionId: string | undefined, cb: (m: CdpMessage) => void): void {
    if (this.#closed) {
      cb({ error: { code: -32000, message: 'the browser is gone' } });
      return;
    }
    const id = ++this.#next;
    this.#pending.set(id, cb);
    const m: CdpMessage = sessionId === undefined ? { id, method, params } : { id, method, params, sessionId };
    this.out.write(`${JSON.stringify(m)}\0`);
  }

  /** Sends a command; the result, or a CdpError. */
  async send<T = any>(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<T> {
    const a = await this.request(method, params, sessionId);
    if (a.error) throw new CdpError(method, a.error);
    return a.result as T;
  }

  /** Every message of this session (events; answers come back to `request`'s caller). */
  claim(sessionId: string, h: SessionHandler): void {
    this.#sessions.set(sessionId, h);
  }

  release(sessionId: string): void {
    this.#sessions.delete(sessionId);
  }

  /** Root-level events (no sessionId): target discovery, sessions attached from the root. */
  onRoot(h: SessionHandler): () => void {
    this.#root.add(h);
    return () => this.#root.delete(h);
  }
}
