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
  /** The same as latin1 strings, for header values (Node hands headers over as latin1). */
  findText: string;
  replaceText: string;
}

/** A redaction list compiled once: the per-request object only keeps its state. */
interface Compiled {
  pairs: RedactPair[];
  first: Uint8Array;
  maxLen: number;
}

/** Lists compiled before (the same array comes back for the same credential: credentials.ts). */
const compiledLists = new WeakMap<readonly object[], Compiled>();

function compile(pairs: readonly { sent: string; shown: string }[]): Compiled {
  const hit = compiledLists.get(pairs);
  if (hit) return hit;
  const seen = new Set<string>();
  const list: RedactPair[] = [];
  for (const p of pairs) {
    if (p.sent.length === 0 || p.sent === p.shown || seen.has(p.sent)) continue;
    seen.add(p.sent);
    const find = Buffer.from(p.sent, 'utf8');
    const replace = Buffer.from(p.shown, 'utf8');
    list.push({ find, replace, findText: find.toString('latin1'), replaceText: replace.toString('latin1') });
  }
  // Longest first: at one position the longest spelling wins (a value inside its own encoding).
  list.sort((a, b) => b.find.length - a.find.length);
  const first = new Uint8Array(256);
  for (const p of list) first[p.find[0]!] = 1;
  const compiled = { pairs: list, first, maxLen: list.reduce((m, p) => Math.max(m, p.find.length), 0) };
  if (Object.isFrozen(pairs)) compiledLists.set(pairs, compiled);
  return compiled;
}

export class StreamRedactor {
  readonly #pairs: RedactPair[];
  readonly #first: Uint8Array;
  readonly #maxLen: number;
  #carry: Buffer | null = null;
  /** How many values were replaced so far (headers and body). */
  replaced = 0;

  /** `pairs` frozen (as credentials.ts hands them out) are compiled once and reused. */
  constructor(pairs: readonly { sent: string; shown: string }[]) {
    const c = compile(pairs);
    this.#pairs = c.pairs;
    this.#first = c.first;
    this.#maxLen = c.maxLen;
  }

  get active(): boolean {
    return this.#pairs.length > 0;
  }

  /** A header value with every spelling replaced. */
  header(value: string): string {
    let out = value;
    for (const p of this.#pairs) {
      if (!out.includes(p.findText)) continue;
      const parts = out.split(p.findText);
      this.replaced += parts.length - 1;
      out = parts.join(p.replaceText);
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
