/**
 * Credential detection and swap (pure). The VM holds placeholders (`svcph_<hex>`) and
 * stand-in tokens; a request carries one wherever the agent's client put it: a header
 * (including inside `Authorization: Basic base64(user:pass)`), the URL, or a textual body.
 * Detection finds every known token; the swap writes the real value in its place, encoded
 * for where it stands (URL-encoded in the URL and in form bodies, JSON-escaped in JSON).
 */
export interface Credential {
  /** The placeholder or stand-in token the VM sees. */
  token: string;
  /** `secret:NAME`, or a connection connector (`gmail`, `calendar`, `slack`). */
  connector: string;
  kind: 'secret' | 'connection';
  infrastructure: boolean;
  /** Whether this credential may be sent to that host. */
  hostAllowed(host: string): boolean;
  /** The real value; only called once the request may go out. */
  value(): string | Promise<string>;
}

export interface CredentialSet {
  byToken: ReadonlyMap<string, Credential>;
}

/** Every token shape the gateway hands out. */
const TOKEN = /svcph_[0-9a-f]{32}|svcst_[A-Za-z0-9_-]{20,}/g;
const HAS_TOKEN = new RegExp(TOKEN.source);

export type Headers = Record<string, string | string[] | undefined>;

function scan(text: string, set: CredentialSet, found: Map<string, Credential>): void {
  for (const m of text.matchAll(TOKEN)) {
    const c = set.byToken.get(m[0]);
    if (c) found.set(c.token, c);
  }
}

function basicParts(value: string): string | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value);
  return m ? Buffer.from(m[1]!, 'base64').toString('utf8') : null;
}

export function detectCredentials(req: { url: string; headers: Headers; body?: Buffer | null }, set: CredentialSet): Credential[] {
  const found = new Map<string, Credential>();
  if (set.byToken.size === 0) return [];
  let url = req.url;
  try {
    url = decodeURIComponent(req.url);
  } catch {
    /* a malformed escape: scan as sent */
  }
  scan(url, set, found);
  for (const v of Object.values(req.headers)) {
    for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v]) {
      scan(one, set, found);
      const basic = basicParts(one);
      if (basic) scan(basic, set, found);
    }
  }
  if (req.body && req.body.length > 0) scan(req.body.toString('latin1'), set, found);
  return [...found.values()];
}

export type BodyEncoding = 'json' | 'form' | 'raw';

export function bodyEncoding(contentType: string | undefined): BodyEncoding {
  const t = (contentType ?? '').toLowerCase();
  if (t.includes('json')) return 'json';
  if (t.startsWith('application/x-www-form-urlencoded')) return 'form';
  return 'raw';
}

function replaceAll(text: string, values: ReadonlyMap<string, string>, encode: (v: string) => string): string {
  return text.replace(TOKEN, (tok) => {
    const v = values.get(tok);
    return v === undefined ? tok : encode(v);
  });
}

const jsonEscape = (v: string) => JSON.stringify(v).slice(1, -1);
const HEADER_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Returns the request with every token in `values` replaced by its real value. Throws
 * when a value cannot be put in a header (CR/LF would split the header).
 */
export function swapCredentials(
  req: { url: string; headers: Headers; body?: Buffer | null; contentType?: string },
  values: ReadonlyMap<string, string>,
): { url: string; headers: Headers; body: Buffer | null } {
  const url = replaceAll(req.url, values, encodeURIComponent);
  const headers: Headers = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue;
    const swapOne = (one: string): string => {
      const basic = basicParts(one);
      if (basic && HAS_TOKEN.test(basic)) {
        return `Basic ${Buffer.from(replaceAll(basic, values, (x) => x), 'utf8').toString('base64')}`;
      }
      const out = replaceAll(one, values, (x) => x);
      if (!HEADER_SAFE.test(out)) throw new Error('a credential value cannot be sent in a header');
      return out;
    };
    headers[k] = Array.isArray(v) ? v.map(swapOne) : swapOne(v);
  }
  let body = req.body ?? null;
  if (body && body.length > 0) {
    const enc = bodyEncoding(req.contentType);
    const text = body.toString('utf8');
    const swapped = replaceAll(text, values, enc === 'json' ? jsonEscape : enc === 'form' ? encodeURIComponent : (x) => x);
    if (swapped !== text) body = Buffer.from(swapped, 'utf8');
  }
  return { url, headers, body };
}
