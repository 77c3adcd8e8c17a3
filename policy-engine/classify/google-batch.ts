/**
 * Google batch requests: `POST /batch/gmail/v1`, `/batch/calendar/v3`, `/batch` (any
 * `/batch...` path on a *.googleapis.com host). The body is `multipart/mixed`; each part
 * is `Content-Type: application/http` holding one HTTP request (request line, headers,
 * blank line, body). Reference: https://developers.google.com/gmail/api/guides/batch
 *
 * This file only parses. Whatever cannot be parsed the way Google would (no body, not
 * multipart/mixed, no boundary, no parts, a part that is not an HTTP request, an encoded
 * part, a batch inside a batch) makes the whole batch "unparsable", which the classifier
 * puts in the most dangerous category: a request we cannot read must not pass as a read.
 * So does anything a server might parse differently from us (issue 9, hole 5): the
 * Content-Type's parameters, where the parts start and end, and the part headers must
 * each have one reading; see batchContentType, parseHeaderLines and parseGoogleBatch.
 */
import { bodyText } from './http.js';
import type { ClassifyRequest } from './types.js';

export type BatchParse = { ok: true; parts: ClassifyRequest[] } | { ok: false; why: string };

export function isGoogleBatchPath(lower: readonly string[]): boolean {
  return lower[0] === 'batch';
}

/** RFC 7230 token: a header or parameter name. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 2046 boundary: 1 to 70 bchars, not ending in a space. */
const BOUNDARY = /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/;

export type BatchContentType = { type: string; boundary: string } | { why: string };

/**
 * The media type and its one boundary. Unparsable (a server may read it otherwise): two
 * `boundary` parameters (equal or not, any case: a server may split on either, and the
 * parts it finds are not the ones we read), a `boundary*` parameter (an RFC 2231 form
 * some MIME parsers decode and prefer), a parameter that is not `name=value` (so
 * `boundary="a;boundary=b"` is one quoted value, never two parameters), an unterminated
 * or backslash-escaped quoted string, a boundary outside RFC 2046's alphabet or length.
 */
export function batchContentType(ct: string): BatchContentType {
  const semi = ct.indexOf(';');
  const type = (semi === -1 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  let rest = semi === -1 ? '' : ct.slice(semi + 1);
  const boundaries: string[] = [];
  while (rest.trim() !== '') {
    // `name=` by index, not by a regular expression: the agent writes this header, and a
    // pattern with overlapping quantifiers backtracks in polynomial time on a run of spaces
    // with no `=` (seconds of the event loop for every tenant from one 3 KB header).
    const eq = rest.indexOf('=');
    const semiAt = rest.indexOf(';');
    if (eq === -1 || (semiAt !== -1 && semiAt < eq)) return { why: 'malformed content-type parameter' };
    const name = trimSpTab(rest.slice(0, eq)).toLowerCase();
    if (!TOKEN.test(name)) return { why: 'malformed content-type parameter' };
    rest = rest.slice(skipSpTab(rest, eq + 1));
    let value: string;
    if (rest.startsWith('"')) {
      const close = rest.indexOf('"', 1);
      if (close === -1) return { why: 'unterminated quoted parameter' };
      value = rest.slice(1, close);
      if (value.includes('\\')) return { why: 'escaped quoted parameter' };
      rest = rest.slice(close + 1);
      const after = /^[ \t]*(?:;|$)/.exec(rest);
      if (after === null) return { why: 'characters after a quoted parameter' };
      rest = rest.slice(after[0].length);
    } else {
      const end = rest.indexOf(';');
      value = (end === -1 ? rest : rest.slice(0, end)).trim();
      rest = end === -1 ? '' : rest.slice(end + 1);
    }
    if (name === 'boundary') boundaries.push(value);
    else if (name.startsWith('boundary*')) return { why: 'RFC 2231 boundary parameter' };
  }
  if (boundaries.length > 1) return { why: 'more than one boundary parameter' };
  const boundary = boundaries[0];
  if (boundary === undefined || boundary === '') return { why: 'no boundary' };
  if (!BOUNDARY.test(boundary)) return { why: 'boundary outside RFC 2046' };
  return { type, boundary };
}

/** Headers of which a part or an inner request may carry one: which of two counts is the server's choice. */
const SINGLE = new Set(['content-type', 'content-transfer-encoding', 'content-encoding']);

/**
 * Header lines of a part or of its inner request. Unparsable (null): a folded line (one
 * starting with a space or tab: an RFC 822 reader appends it to the header before, and
 * `\tContent-Type: application/http` must not pass as a header of its own), a name that
 * is not a token (`Content-Type :`, `Content Type:`), a second header of SINGLE.
 */
function parseHeaderLines(lines: readonly string[]): Map<string, string> | null {
  const headers = new Map<string, string>();
  for (const line of lines) {
    if (line.startsWith(' ') || line.startsWith('\t')) return null;
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).toLowerCase();
    if (!TOKEN.test(name)) return null;
    const value = line.slice(colon + 1).trim();
    const prev = headers.get(name);
    if (prev !== undefined && SINGLE.has(name)) return null;
    headers.set(name, prev === undefined ? value : `${prev},${value}`);
  }
  return headers;
}

/** Splits at the first empty line: [header lines, rest]. */
function splitHead(lines: readonly string[]): [string[], string[]] {
  const blank = lines.indexOf('');
  return blank === -1 ? [lines.slice(), []] : [lines.slice(0, blank), lines.slice(blank + 1)];
}

const REQUEST_LINE = /^([A-Za-z]+)[ \t]+(\S+)(?:[ \t]+HTTP\/\d(?:\.\d)?)?[ \t]*$/;

function parsePart(lines: readonly string[], outerHost: string): ClassifyRequest | string {
  const [headLines, content] = splitHead(lines);
  const head = parseHeaderLines(headLines);
  if (head === null) return 'malformed part header';
  const ct = head.get('content-type');
  if (ct !== undefined && ct.split(';')[0]!.trim().toLowerCase() !== 'application/http') return `part content-type ${ct}`;
  const cte = head.get('content-transfer-encoding');
  if (cte !== undefined && !['binary', '7bit', '8bit'].includes(cte.toLowerCase())) return `part encoding ${cte}`;
  let i = 0;
  while (i < content.length && content[i]!.trim() === '') i++;
  const m = REQUEST_LINE.exec(content[i] ?? '');
  if (m === null) return 'part is not an HTTP request';
  const [innerHeadLines, innerBody] = splitHead(content.slice(i + 1));
  const innerHead = parseHeaderLines(innerHeadLines);
  if (innerHead === null) return 'malformed inner header';
  const target = m[2]!;
  let host = outerHost;
  let path = target;
  if (!target.startsWith('/')) {
    try {
      const u = new URL(target);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') return `part target ${target}`;
      host = u.host;
      path = u.pathname + u.search;
    } catch {
      return `part target ${target}`;
    }
  }
  const headers: Record<string, string> = Object.fromEntries(innerHead);
  return {
    method: m[1]!,
    host,
    path,
    headers,
    // Bytes again (latin1 kept one char per byte), so a body condition decodes them as
    // strict UTF-8 like any other body.
    body: Buffer.from(innerBody.join('\r\n'), 'latin1'),
    contentType: innerHead.get('content-type'),
  };
}

/** The index of the first character at or after `from` that is not a space or a tab. */
function skipSpTab(s: string, from: number): number {
  let i = from;
  while (i < s.length && (s.charCodeAt(i) === 0x20 || s.charCodeAt(i) === 0x09)) i++;
  return i;
}

/**
 * `s` without trailing spaces and tabs (RFC 2046 LWSP: transport padding after a
 * delimiter), in linear time: `/[ \t]*$/` is quadratic on a long run of spaces that ends in
 * another character, and each body line of a batch is trimmed.
 */
function trimPadding(s: string): string {
  let end = s.length;
  while (end > 0 && (s.charCodeAt(end - 1) === 0x20 || s.charCodeAt(end - 1) === 0x09)) end--;
  return end === s.length ? s : s.slice(0, end);
}

/** `s` without leading and trailing spaces and tabs. */
function trimSpTab(s: string): string {
  return trimPadding(s.slice(skipSpTab(s, 0)));
}

/**
 * Parses a batch body into its inner requests, or says why it cannot.
 *
 * Where the parts are is the one thing we and the server must agree on, so the boundary
 * may appear *only* as the delimiter lines we split on: RFC 2046 forbids it inside the
 * parts, and any other occurrence is a place where a parser with other line or case rules
 * starts a part we did not read: `--b` after a lone CR, `--b--\xa0` (not padding to RFC
 * 2046, so our "close" would be content to a strict parser, and the parts after it real),
 * `--B` in another case, anything after the close delimiter that names the boundary.
 */
export function parseGoogleBatch(contentType: string | undefined, body: Uint8Array | string | undefined, outerHost: string): BatchParse {
  if (body === undefined) return { ok: false, why: 'body not available' };
  if (contentType === undefined) return { ok: false, why: 'no content-type' };
  const ct = batchContentType(contentType);
  if ('why' in ct) return { ok: false, why: ct.why };
  if (ct.type !== 'multipart/mixed') return { ok: false, why: `content-type ${ct.type}` };
  const { boundary } = ct;
  // latin1 keeps every byte as one char, so binary part bodies cannot shift the lines.
  const text = bodyText(body, 'latin1')!;
  const open = `--${boundary}`;
  const close = `--${boundary}--`;
  const rawParts: string[][] = [];
  /** Offsets of the delimiter lines we split on. */
  const delimiters = new Set<number>();
  let closeAt = -1;
  let current: string[] | null = null;
  for (let start = 0; start <= text.length; ) {
    const nl = text.indexOf('\n', start);
    const end = nl === -1 ? text.length : nl;
    let line = text.slice(start, end);
    if (line.endsWith('\r')) line = line.slice(0, -1);
    const t = trimPadding(line);
    if (t === open || t === close) {
      delimiters.add(start);
      if (current !== null) rawParts.push(current);
      current = null;
      if (t === close) {
        closeAt = start;
        break;
      }
      current = [];
    } else if (current !== null) current.push(line);
    if (nl === -1) break;
    start = nl + 1;
  }
  if (current !== null) rawParts.push(current); // no close delimiter: take what is there
  const lowerText = text.toLowerCase();
  const lowerOpen = open.toLowerCase();
  for (let at = lowerText.indexOf(lowerOpen); at !== -1; at = lowerText.indexOf(lowerOpen, at + 1)) {
    // Inside the close delimiter itself: a boundary of dashes overlaps its own `--` suffix.
    const inClose = closeAt !== -1 && at > closeAt && at <= closeAt + close.length - open.length;
    if (!delimiters.has(at) && !inClose) return { ok: false, why: `boundary outside a delimiter line at ${at}` };
  }
  if (rawParts.length === 0) return { ok: false, why: 'no parts' };
  const parts: ClassifyRequest[] = [];
  for (const raw of rawParts) {
    const part = parsePart(raw, outerHost);
    if (typeof part === 'string') return { ok: false, why: part };
    parts.push(part);
  }
  return { ok: true, parts };
}
