/**
 * Redaction of an upstream's answer (issue 9, hole 1): when the gateway swapped a real
 * value into a request, the answer the agent receives never contains that value. Every
 * spelling in the list (raw, JSON-escaped, percent-encoded, ... see credentials.ts
 * redactionsFor) is replaced by what the agent sent (its placeholder) in headers and in
 * the body as it streams.
 *
 * Streaming: a value can be cut across two chunks, so the end of a chunk that could be
 * the start of a value is held back until the next chunk (or the end) shows whether it
 * is. Only such a tail is held, never a fixed window: a server-sent event stream is not
 * delayed unless its last bytes happen to begin like a secret.
 */
export interface RedactPair {
  find: Buffer;
  replace: Buffer;
}

export class StreamRedactor {
  readonly #pairs: RedactPair[];
  readonly #first = new Uint8Array(256);
  readonly #maxLen: number;
  #carry: Buffer | null = null;
  /** How many values were replaced so far (headers and body). */
  replaced = 0;

  constructor(pairs: readonly { sent: string; shown: string }[]) {
    const seen = new Set<string>();
    const list: RedactPair[] = [];
    for (const p of pairs) {
      if (p.sent.length === 0 || p.sent === p.shown || seen.has(p.sent)) continue;
      seen.add(p.sent);
      list.push({ find: Buffer.from(p.sent, 'utf8'), replace: Buffer.from(p.shown, 'utf8') });
    }
    // Longest first: at one position the longest spelling wins (a value inside its own encoding).
    list.sort((a, b) => b.find.length - a.find.length);
    this.#pairs = list;
    this.#maxLen = list.reduce((m, p) => Math.max(m, p.find.length), 0);
    for (const p of list) this.#first[p.find[0]!] = 1;
  }

  get active(): boolean {
    return this.#pairs.length > 0;
  }

  /** A header value with every spelling replaced. */
  header(value: string): string {
    let out = value;
    for (const p of this.#pairs) {
      const find = p.find.toString('latin1');
      if (!out.includes(find)) continue;
      const parts = out.split(find);
      this.replaced += parts.length - 1;
      out = parts.join(p.replace.toString('latin1'));
    }
    return out;
  }

  /** The pieces to write for this chunk (possibly none: all held back). */
  push(chunk: Buffer): Buffer[] {
    const buf = this.#carry ? Buffer.concat([this.#carry, chunk]) : chunk;
    this.#carry = null;
    const out: Buffer[] = [];
    let pos = 0;
    for (;;) {
      let at = -1;
      let pair: RedactPair | null = null;
      for (const p of this.#pairs) {
        const i = buf.indexOf(p.find, pos);
        if (i >= 0 && (at < 0 || i < at)) {
          at = i;
          pair = p;
        }
      }
      if (!pair) break;
      if (at > pos) out.push(buf.subarray(pos, at));
      out.push(pair.replace);
      this.replaced++;
      pos = at + pair.find.length;
    }
    const keep = this.#heldTail(buf, pos);
    if (buf.length - keep > pos) out.push(buf.subarray(pos, buf.length - keep));
    if (keep > 0) this.#carry = Buffer.from(buf.subarray(buf.length - keep));
    return out;
  }

  /** What is still held back, at the end of the body. */
  end(): Buffer[] {
    const rest = this.#carry;
    this.#carry = null;
    return rest ? [rest] : [];
  }

  /** Length of the longest tail of buf[from..] that is a proper prefix of some value. */
  #heldTail(buf: Buffer, from: number): number {
    const len = buf.length;
    const start = Math.max(from, len - this.#maxLen + 1);
    for (let s = start; s < len; s++) {
      if (!this.#first[buf[s]!]) continue;
      const k = len - s;
      for (const p of this.#pairs) {
        if (p.find.length > k && buf.compare(p.find, 0, k, s, len) === 0) return k;
      }
    }
    return 0;
  }
}
