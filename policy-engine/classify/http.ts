/**
 * Request normalization for the classifier. The tables match on what these functions
 * return, so every trick that could make a dangerous request look harmless has to be
 * undone here: percent-encoded keywords (`/messages/%73end`), doubled slashes, dot
 * segments, upper case (`/messages/SEND`), ports and trailing dots in the host.
 */
import { dangerRank } from '../categories.js';
import type { ClassifyRequest, ParsedRequest, Verdict } from './types.js';

export const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isReadMethod(method: string): boolean {
  return READ_METHODS.has(method);
}

export function headerValue(headers: ClassifyRequest['headers'], name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(',');
}

export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end === -1 ? h : h.slice(0, end + 1);
  }
  const colon = h.lastIndexOf(':');
  if (colon !== -1) h = h.slice(0, colon);
  while (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

function decodeSegment(seg: string): string {
  try {
    return decodeURIComponent(seg);
  } catch {
    return seg;
  }
}

/** Splits a path into decoded segments; `//`, `.` and `..` resolved as a URL parser would. */
export function pathSegments(pathname: string): string[] {
  const out: string[] = [];
  for (const raw of pathname.split('/')) {
    const seg = decodeSegment(raw);
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      out.pop();
      continue;
    }
    out.push(seg);
  }
  return out;
}

export function parseRequest(req: ClassifyRequest): ParsedRequest {
  let host = req.host;
  let target = req.path;
  if (!target.startsWith('/')) {
    // Absolute-form target (`https://host/path`): take host and path from it.
    try {
      const u = new URL(target);
      if (host === '') host = u.host;
      target = u.pathname + u.search;
    } catch {
      target = '/' + target;
    }
  }
  const hash = target.indexOf('#');
  if (hash !== -1) target = target.slice(0, hash);
  const q = target.indexOf('?');
  const pathname = q === -1 ? target : target.slice(0, q);
  const search = q === -1 ? '' : target.slice(q + 1);
  const segments = pathSegments(pathname);
  const override = headerValue(req.headers, 'x-http-method-override');
  const overrides =
    override === undefined
      ? []
      : override
          .split(',')
          .map((s) => s.trim().toUpperCase())
          .filter((s) => s.length > 0);
  return {
    method: req.method.trim().toUpperCase(),
    overrides,
    host: normalizeHost(host),
    segments,
    lower: segments.map((s) => s.toLowerCase()),
    query: new URLSearchParams(search),
    headers: req.headers,
    body: req.body,
    contentType: req.contentType ?? headerValue(req.headers, 'content-type'),
  };
}

/**
 * The methods a request is classified under, X-HTTP-Method-Override counting as the
 * method (decisions.md).
 *  - Google honours the header on POST (its own client libraries turn a long GET into a POST
 *    with `X-HTTP-Method-Override: GET`), so for Google APIs the override *replaces* a POST;
 *    with any other wire method both count, as elsewhere.
 *  - Elsewhere the server may ignore the header, so both the wire method and the override
 *    are classified and the more dangerous answer wins: a POST with "override: GET" sent
 *    to a server that ignores the header is still a POST.
 */
export function googleMethods(p: ParsedRequest): readonly string[] {
  // Google documents the override on POST (its libraries' long GETs); on any other wire
  // method it may run the wire method, so both count there and the more dangerous wins:
  // `DELETE` with `X-HTTP-Method-Override: GET` is a delete.
  if (p.overrides.length > 0 && p.method !== 'POST') return [p.method, ...p.overrides];
  // Media uploads (`/upload/...`) are served by Google's upload front end, which is not
  // documented to honour the header: there both count too (a fourth review; a Gmail send by
  // upload with `override: GET` was a read).
  if (p.overrides.length > 0 && p.lower[0] === 'upload') return [p.method, ...p.overrides];
  return p.overrides.length > 0 ? p.overrides : [p.method];
}

export function wireAndOverrideMethods(p: ParsedRequest): readonly string[] {
  return p.overrides.length > 0 ? [p.method, ...p.overrides] : [p.method];
}

/** The most dangerous verdict; the first one on a tie. */
export function mostDangerousVerdict<V extends Verdict>(verdicts: readonly V[]): V {
  let best = verdicts[0]!;
  for (let i = 1; i < verdicts.length; i++) {
    const v = verdicts[i]!;
    if (dangerRank(v.category) > dangerRank(best.category)) best = v;
  }
  return best;
}

export function bodyText(body: Uint8Array | string | undefined, encoding: 'utf8' | 'latin1' = 'utf8'): string | undefined {
  if (body === undefined) return undefined;
  if (typeof body === 'string') return body;
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString(encoding);
}

/** A Content-Encoding other than `identity`: the bytes on the wire are not the body the server reads. */
export function contentEncoded(headers: ClassifyRequest['headers']): boolean {
  const enc = headerValue(headers, 'content-encoding');
  return enc !== undefined && enc.split(',').some((e) => e.trim() !== '' && e.trim().toLowerCase() !== 'identity');
}

/**
 * The headers say the request carries no body: no Transfer-Encoding, and Content-Length
 * absent or 0 (HTTP/1.1, the only protocol the gateway speaks to agents). A body that was
 * not passed is then empty, not unread, so `POST /v1/customers` with nothing in it is not
 * taken for the dangerous reading of a body nobody saw.
 */
export function declaredBodyless(headers: ClassifyRequest['headers']): boolean {
  if (headers['transfer-encoding'] !== undefined) return false;
  const cl = headerValue(headers, 'content-length');
  return cl === undefined || cl.trim() === '0';
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The body as text for a body condition, or undefined when it cannot be read the one way
 * the server reads it: not passed while the headers announce one (declaredBodyless);
 * sent with a Content-Encoding (we do not inflate, and a
 * compressed body is a different text from the bytes we hold); bytes that are not valid
 * UTF-8 (an overlong or broken sequence is U+FFFD to us and may be a letter to a lenient
 * decoder). A string body is taken as it is.
 */
export function bodyTextStrict(body: Uint8Array | string | undefined, headers: ClassifyRequest['headers']): string | undefined {
  if (contentEncoded(headers)) return undefined;
  if (body === undefined) return declaredBodyless(headers) ? '' : undefined;
  if (typeof body === 'string') return body;
  try {
    return STRICT_UTF8.decode(body);
  } catch {
    return undefined;
  }
}

/**
 * The body as JSON, read the way a strict server must be assumed to read it: undefined when
 * it cannot be read as text (bodyTextStrict), is not JSON, or when any object in it repeats
 * a key (which of the two a server keeps is its choice, so the request has no single
 * reading; callers fail closed).
 */
export function bodyJsonStrict(body: Uint8Array | string | undefined, headers: ClassifyRequest['headers']): unknown {
  const text = bodyTextStrict(body, headers);
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
  return hasDuplicateKeys(text) ? undefined : value;
}

/**
 * A field name as a lenient parser may match it, for body conditions: lowercased, with
 * everything but letters and digits removed. Google's JSON parser takes a field's JSON
 * name (`addLabelIds`) and its proto name (`add_label_ids`); folding every spelling
 * (`AddLabelIds`, `add-label-ids`, `addLabelIds\u0000`) onto one key means no spelling a
 * server might map onto the field escapes the check.
 */
export function fieldKey(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/**
 * A key as a case-insensitive JSON decoder matches it (Go's encoding/json, which MCP
 * servers written in Go decode with): Unicode case folded, so `Method`, `METHOD` and
 * `\u212Aey` (the Kelvin sign, which folds to `k`) meet their lower-case spellings.
 * Upper then lower case folds the letters whose lower case is not their fold (`ſ`, U+017F: `s`).
 */
export function foldKey(key: string): string {
  return key.toUpperCase().toLowerCase();
}

/**
 * Whether any object in a JSON text (already known to parse) repeats a key. Keys are
 * compared decoded, as JSON.parse decodes them: `"add\u004cabelIds"` is `addLabelIds`.
 * `fold`: also two keys that differ only in letter case (foldKey), for bodies a
 * case-insensitive decoder may read (MCP).
 */
export function hasDuplicateKeys(text: string, fold = false): boolean {
  const stack: Array<Set<string> | null> = [];
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      while (j < text.length && text.charCodeAt(j) !== 0x22) j += text.charCodeAt(j) === 0x5c ? 2 : 1;
      let k = j + 1;
      while (k < text.length && (text[k] === ' ' || text[k] === '\t' || text[k] === '\n' || text[k] === '\r')) k++;
      const top = stack[stack.length - 1];
      if (text[k] === ':' && top) {
        let key: string;
        try {
          key = JSON.parse(text.slice(i, j + 1)) as string;
        } catch {
          return true;
        }
        if (fold) key = foldKey(key);
        if (top.has(key)) return true;
        top.add(key);
      }
      i = j + 1;
      continue;
    }
    if (c === 0x7b /* { */) stack.push(new Set());
    else if (c === 0x5b /* [ */) stack.push(null);
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) stack.pop();
    i++;
  }
  return false;
}

/**
 * A path pattern over lowercased segments: a literal, `*` for exactly one segment (an
 * id), and a trailing `**` for zero or more further segments.
 */
export function matchPath(lower: readonly string[], pattern: readonly string[]): boolean {
  const rest = pattern.length > 0 && pattern[pattern.length - 1] === '**';
  const fixed = rest ? pattern.length - 1 : pattern.length;
  if (rest ? lower.length < fixed : lower.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    const want = pattern[i]!;
    if (want !== '*' && want !== lower[i]) return false;
  }
  return true;
}

/** Which methods a table row applies to. */
export type MethodClass = 'any_write' | 'DELETE' | 'POST';

export function methodMatches(method: string, cls: MethodClass): boolean {
  if (cls === 'any_write') return !isReadMethod(method);
  return method === cls;
}
