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
 */
import { bodyText } from './http.js';
import type { ClassifyRequest } from './types.js';

export type BatchParse = { ok: true; parts: ClassifyRequest[] } | { ok: false; why: string };

export function isGoogleBatchPath(lower: readonly string[]): boolean {
  return lower[0] === 'batch';
}

/** The media type and every `boundary` parameter (a server may take either of two). */
function contentTypeParts(ct: string): { type: string; boundaries: string[] } {
  const [type = '', ...params] = ct.split(';');
  const boundaries: string[] = [];
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq === -1) continue;
    if (param.slice(0, eq).trim().toLowerCase() !== 'boundary') continue;
    let v = param.slice(eq + 1).trim();
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    boundaries.push(v);
  }
  return { type: type.trim().toLowerCase(), boundaries };
}

function parseHeaderLines(lines: readonly string[]): Map<string, string> | null {
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const prev = headers.get(name);
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
  if (ct !== undefined && contentTypeParts(ct).type !== 'application/http') return `part content-type ${ct}`;
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
    body: innerBody.join('\r\n'),
    contentType: innerHead.get('content-type'),
  };
}

/** Parses a batch body into its inner requests, or says why it cannot. */
export function parseGoogleBatch(contentType: string | undefined, body: Uint8Array | string | undefined, outerHost: string): BatchParse {
  if (body === undefined) return { ok: false, why: 'body not available' };
  if (contentType === undefined) return { ok: false, why: 'no content-type' };
  const { type, boundaries } = contentTypeParts(contentType);
  if (type !== 'multipart/mixed') return { ok: false, why: `content-type ${type}` };
  // Two boundary parameters (even equal ones): which one a server splits on is its choice,
  // and a batch read with the other would hide its parts (issue 9, hole 5).
  if (boundaries.length > 1) return { ok: false, why: 'more than one boundary parameter' };
  const boundary = boundaries[0];
  if (boundary === undefined || boundary === '') return { ok: false, why: 'no boundary' };
  // latin1 keeps every byte as one char, so binary part bodies cannot shift the lines.
  const text = bodyText(body, 'latin1')!;
  const lines = text.split(/\r?\n/);
  const open = `--${boundary}`;
  const close = `--${boundary}--`;
  const rawParts: string[][] = [];
  let current: string[] | null = null;
  for (const line of lines) {
    const t = line.trimEnd();
    if (t === close) {
      if (current !== null) rawParts.push(current);
      current = null;
      break;
    }
    if (t === open) {
      if (current !== null) rawParts.push(current);
      current = [];
      continue;
    }
    if (current !== null) current.push(line);
  }
  if (current !== null) rawParts.push(current); // no close delimiter: take what is there
  if (rawParts.length === 0) return { ok: false, why: 'no parts' };
  const parts: ClassifyRequest[] = [];
  for (const raw of rawParts) {
    const part = parsePart(raw, outerHost);
    if (typeof part === 'string') return { ok: false, why: part };
    parts.push(part);
  }
  return { ok: true, parts };
}
