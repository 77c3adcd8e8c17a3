import type { Slot } from '../lib/credential-slots.js';
import type { ListedTool, McpToolTable } from '../policy-engine/classify/mcp.js';

export type { Slot } from '../lib/credential-slots.js';
export { DEFAULT_SLOTS, connectionSlots, secretSlots } from '../lib/credential-slots.js';

/**
 * Credential detection, placement and swap (pure). The VM holds placeholders
 * (`svcph_<hex>`) and stand-in tokens; the gateway puts the real value in their place
 * only where a credential goes (issue 9, hole 1): a request that carried a placeholder in
 * a body field, a URL path or an arbitrary header would have the real value reflected to
 * the agent by any API that echoes its input (a Stripe customer's metadata, an error
 * message quoting a parameter, a chat message read back).
 *
 * - Detection finds every known token anywhere it can look: URL (percent-decoded),
 *   every header (inside `Basic base64(user:pass)` too) and a textual body the gateway
 *   buffered. What it finds decides the policy connector, the host check and refusals.
 * - Placement checks each occurrence against the credential's *slots*. By default a
 *   secret has one: the `Authorization` header as `Bearer <t>`, `token <t>`, or Basic with
 *   the token as the whole user or the whole password. A secret may declare more with
 *   `inject` (header names, query parameter names, form or JSON field names). A
 *   connection's stand-in has the Authorization slot, and Slack's also the `token` field.
 *   An occurrence outside every slot makes the request misplaced: it is refused whole
 *   (403 `secret_location_not_allowed`), nothing is swapped and nothing is sent.
 * - The swap writes the real value into the slots found, encoded for where it stands,
 *   and returns the (real, sent form) pairs the answer must be redacted of.
 */

export interface Credential {
  /** The placeholder or stand-in token the VM sees. */
  token: string;
  /** `secret:NAME`, or a connection connector (`gmail`, `calendar`, `slack`). */
  connector: string;
  kind: 'secret' | 'connection';
  infrastructure: boolean;
  /** Whether this credential may be sent to that host and port (a secret: 443 unless its pattern names the port). */
  hostAllowed(host: string, port: number): boolean;
  /** Where it may be swapped in. */
  slots: readonly Slot[];
  /** Whether it may be sent to an endpoint that mints new credentials (policy-engine/classify/minting.ts). */
  allowMinting: boolean;
  /** The real value; only called once the request may go out. */
  value(): string | Promise<string>;
  /** A connection's stand-in: only that connector's API paths on its hosts (connections/stand-ins.ts). */
  pathAllowed?(host: string, path: string): boolean;
  /** A stand-in of a revoked or failed connection: the gateway answers 401 with this code. */
  unusable?: 'connection_revoked' | 'connection_error' | null;
}

export interface CredentialSet {
  byToken: ReadonlyMap<string, Credential>;
  /** The environment's registered MCP servers (issue 28, docs/mcp.md); absent when it has none (the common case costs nothing). */
  mcp?: McpServers;
}

/** A registered MCP server as the pipeline classifies it (mcp/mcp-servers.service.ts builds it). */
export interface McpServerRoute extends McpToolTable {
  /** The secret whose placeholder the agent sends as its bearer token; null: none. */
  readonly secret: string | null;
  /** The path of its URL (another spelling of it is still the server's request). */
  readonly path: string;
  /** Remembers the annotations of a tools/list answer this server gave (per server, never across servers). */
  learn(tools: readonly ListedTool[]): void;
}

export interface McpServers {
  /** The registration whose URL is https://host:port/path; null: none. */
  match(host: string, port: number, path: string): McpServerRoute | null;
  /** The registrations on https://host:port, whatever their path (a secret sent to another path of the server's origin). */
  sameOrigin(host: string, port: number): readonly McpServerRoute[];
}

/**
 * For a request to an MCP server (issue 28): the server's secret goes in `Authorization`
 * only (Bearer or token), whatever its inject list says for other APIs. True when the
 * request carries it anywhere else.
 */
export function mcpSecretMisplaced(placement: Placement, token: string): boolean {
  for (const h of placement.hits) {
    if (h.at === 'auth-param') continue;
    if (h.at === 'basic' ? h.user === token || h.pass === token : h.token === token) return true;
  }
  return false;
}

/** Every token shape the gateway hands out. */
const TOKEN = /svcph_[0-9a-f]{32}|svcst_[A-Za-z0-9_-]{20,}/g;
const HAS_TOKEN = new RegExp(TOKEN.source);

export type Headers = Record<string, string | string[] | undefined>;

// ---------------------------------------------------------------------------------------
// Slots (lib/credential-slots.ts: the domain that stores secrets validates them too)

function hasSlot(c: Credential, want: (s: Slot) => boolean): boolean {
  for (const s of c.slots) if (want(s)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------
// Placement

/** One occurrence in a slot, and how to swap it. */
type Hit =
  | { at: 'auth-param'; header: string; index: number; token: string }
  | { at: 'basic'; header: string; index: number; user: string; pass: string }
  | { at: 'header'; header: string; index: number; token: string }
  | { at: 'query'; pair: number; token: string }
  | { at: 'form'; pair: number; token: string }
  | { at: 'json'; token: string };

export interface Placement {
  /** Every known credential the request carries, wherever it is, in order of first sight. */
  found: Credential[];
  /** A credential seen outside every slot it may use, and where; null when all are in slots. */
  misplaced: { credential: Credential; where: string } | null;
  /** The occurrences in slots (what swap() rewrites). */
  hits: readonly Hit[];
}

export interface RequestParts {
  /** Origin-form target: path and query. */
  url: string;
  headers: Headers;
  /** A textual body the gateway buffered whole, or null (none, binary, or too large to scan). */
  body?: Buffer | null;
  contentType?: string;
}

export type BodyEncoding = 'json' | 'form' | 'raw';

export function bodyEncoding(contentType: string | undefined): BodyEncoding {
  const t = (contentType ?? '').toLowerCase();
  if (t.includes('json')) return 'json';
  if (t.startsWith('application/x-www-form-urlencoded')) return 'form';
  return 'raw';
}

function basicParts(value: string): string | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value);
  return m ? Buffer.from(m[1]!, 'base64').toString('utf8') : null;
}

function decodeComponent(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A query or form pair's name and value, decoded as a server would (`+` is a space). */
function formDecode(s: string): string {
  return decodeComponent(s.replace(/\+/g, ' '));
}

/** The `&`-separated pairs of a query string or form body, raw. */
function splitPairs(text: string): { name: string; value: string | null }[] {
  if (text === '') return [];
  return text.split('&').map((part) => {
    const eq = part.indexOf('=');
    return eq < 0 ? { name: part, value: null } : { name: part.slice(0, eq), value: part.slice(eq + 1) };
  });
}

function tokensIn(text: string): string[] {
  if (!text.includes('svc')) return [];
  return [...text.matchAll(TOKEN)].map((m) => m[0]);
}

/** A JSON value's occurrences of `token` in keys and strings, and the value at `path`. */
function jsonCount(value: unknown, token: string, depth = 0): number {
  if (typeof value === 'string') return value.split(token).length - 1;
  if (value === null || typeof value !== 'object' || depth > 64) return 0;
  let n = 0;
  if (Array.isArray(value)) for (const v of value) n += jsonCount(v, token, depth + 1);
  else for (const [k, v] of Object.entries(value)) n += k.split(token).length - 1 + jsonCount(v, token, depth + 1);
  return n;
}

function jsonAt(value: unknown, path: readonly string[]): unknown {
  let v = value;
  for (const p of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, p)) return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

/**
 * Where the request's credentials are. Pure; never throws for any input. `found` is empty
 * when the set is empty or nothing matched (the common request without a credential).
 */
export function placeCredentials(req: RequestParts, set: CredentialSet): Placement {
  const none: Placement = { found: [], misplaced: null, hits: [] };
  if (set.byToken.size === 0) return none;
  const found = new Map<string, Credential>();
  const hits: Hit[] = [];
  let misplaced: Placement['misplaced'] = null;
  const see = (token: string): Credential | undefined => {
    const c = set.byToken.get(token);
    if (c && !found.has(token)) found.set(token, c);
    return c;
  };
  const elsewhere = (text: string, where: string): void => {
    for (const t of tokensIn(text)) {
      const c = see(t);
      if (c && !misplaced) misplaced = { credential: c, where };
    }
  };

  // Headers.
  for (const name in req.headers) {
    const v = req.headers[name];
    if (v === undefined || name === 'proxy-authorization') continue;
    const values = Array.isArray(v) ? v : [v];
    for (let index = 0; index < values.length; index++) {
      const value = values[index]!;
      const basic = basicParts(value);
      if (!HAS_TOKEN.test(value) && (basic === null || !HAS_TOKEN.test(basic))) continue;
      if (name === 'authorization') {
        if (basic !== null) {
          const colon = basic.indexOf(':');
          const user = colon < 0 ? basic : basic.slice(0, colon);
          const pass = colon < 0 ? '' : basic.slice(colon + 1);
          const userC = set.byToken.get(user);
          const passC = set.byToken.get(pass);
          const userOk = userC !== undefined && hasSlot(userC, (s) => s.in === 'authorization' || (s.in === 'header' && s.name === 'authorization'));
          const passOk = passC !== undefined && hasSlot(passC, (s) => s.in === 'authorization' || (s.in === 'header' && s.name === 'authorization'));
          if (userOk) see(user);
          else elsewhere(user, 'the Basic user of the Authorization header');
          if (passOk) see(pass);
          else elsewhere(pass, 'the Basic password of the Authorization header');
          if (userOk || passOk) hits.push({ at: 'basic', header: name, index, user: userOk ? user : '', pass: passOk ? pass : '' });
          continue;
        }
        const m = /^([A-Za-z][A-Za-z0-9._~+-]*)[ \t]+(\S+)[ \t]*$/.exec(value);
        const c = m ? set.byToken.get(m[2]!) : undefined;
        if (m && c) {
          const scheme = m[1]!.toLowerCase();
          const ok = ((scheme === 'bearer' || scheme === 'token') && hasSlot(c, (s) => s.in === 'authorization')) || hasSlot(c, (s) => s.in === 'header' && s.name === 'authorization');
          if (ok) {
            see(c.token);
            hits.push({ at: 'auth-param', header: name, index, token: c.token });
            continue;
          }
        }
        elsewhere(value, 'the Authorization header (only Bearer, token and Basic carry a credential)');
        continue;
      }
      // Any other header: a slot when the credential names it, as the whole value or after a scheme word.
      const m = /^(?:[A-Za-z][A-Za-z0-9._~+-]*[ \t]+)?(\S+)$/.exec(value.trim());
      const c = m ? set.byToken.get(m[1]!) : undefined;
      if (c && hasSlot(c, (s) => s.in === 'header' && s.name === name)) {
        see(c.token);
        hits.push({ at: 'header', header: name, index, token: c.token });
        continue;
      }
      elsewhere(value, `the ${name} header`);
      if (basic !== null) elsewhere(basic, `the ${name} header`);
    }
  }

  // URL: the path never carries a credential; query parameters may.
  const hashAt = req.url.indexOf('#');
  const target = hashAt < 0 ? req.url : req.url.slice(0, hashAt);
  if (hashAt >= 0) elsewhere(decodeComponent(req.url.slice(hashAt)), 'the URL fragment');
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  elsewhere(path, 'the URL path');
  elsewhere(decodeComponent(path), 'the URL path');
  if (q >= 0) placePairs(target.slice(q + 1), 'query', 'the query string');

  // Body.
  // A server decodes a form value (`%73vcph_...`) and a JSON string (`"svc\u0070h_..."`)
  // before using it, so those are read decoded; other bodies are used as they are.
  const body = req.body;
  if (body && body.length > 0) {
    const text = body.toString('latin1');
    const enc = bodyEncoding(req.contentType);
    if (enc === 'form') placePairs(text, 'form', 'the form body');
    else if (enc === 'json') {
      if (HAS_TOKEN.test(text) || text.includes('\\u')) placeJson(body.toString('utf8'), text);
    } else if (HAS_TOKEN.test(text)) elsewhere(text, 'the request body');
  }

  function placePairs(text: string, kind: 'query' | 'form', where: string): void {
    const pairs = splitPairs(text);
    for (let i = 0; i < pairs.length; i++) {
      const { name, value } = pairs[i]!;
      const dName = formDecode(name);
      const dValue = value === null ? '' : formDecode(value);
      const c = value === null ? undefined : set.byToken.get(dValue);
      if (c && hasSlot(c, (s) => s.in === kind && s.name === dName) && !HAS_TOKEN.test(dName) && !HAS_TOKEN.test(name)) {
        see(c.token);
        hits.push({ at: kind, pair: i, token: c.token });
        continue;
      }
      const label = `${where} (${dName.slice(0, 40)})`;
      elsewhere(name, label);
      elsewhere(dName, label);
      if (value !== null) {
        elsewhere(value, label);
        elsewhere(dValue, label);
      }
    }
  }

  function placeJson(utf8: string, latin1: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(utf8);
    } catch {
      return elsewhere(latin1, 'the request body (not valid JSON)');
    }
    const tokens = new Set([...tokensIn(latin1), ...tokensIn(JSON.stringify(parsed))]);
    for (const t of tokens) {
      if (!set.byToken.has(t)) continue;
      const c = see(t);
      if (!c) continue;
      let slotted = 0;
      for (const s of c.slots) if (s.in === 'json' && jsonAt(parsed, s.path) === t) slotted++;
      // Every occurrence, parsed and literal, must be one of those slots, written plainly:
      // an escaped spelling or a duplicate key would make the two counts differ.
      const literal = latin1.split(t).length - 1;
      if (slotted === 0 || jsonCount(parsed, t) !== slotted || literal !== slotted) {
        if (!misplaced) misplaced = { credential: c, where: 'the JSON body (only the fields named in the secret\'s inject list, written plainly)' };
        continue;
      }
      hits.push({ at: 'json', token: t });
    }
  }

  return { found: [...found.values()], misplaced, hits };
}

/** For callers that only need to know which credentials a request carries (upgrades). */
export function detectCredentials(req: RequestParts, set: CredentialSet): Credential[] {
  return placeCredentials(req, set).found;
}

// ---------------------------------------------------------------------------------------
// Swap

/** A real value as it was sent, and what the agent's answer shows in its place. */
export interface Redaction {
  sent: string;
  shown: string;
}

const jsonEscape = (v: string) => JSON.stringify(v).slice(1, -1);
const HEADER_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Percent-encodes every UTF-8 byte of `v` but the characters `keep` matches, in upper- or lower-case hex. */
function percentEncode(v: string, keep: RegExp, lower: boolean): string {
  let out = '';
  for (const ch of v) {
    if (keep.test(ch)) {
      out += ch;
      continue;
    }
    for (const b of Buffer.from(ch, 'utf8')) {
      const hex = b.toString(16).padStart(2, '0');
      out += `%${lower ? hex : hex.toUpperCase()}`;
    }
  }
  return out;
}

/** RFC 3986 unreserved characters (what Go's QueryEscape and Python's quote_plus leave as they are). */
const UNRESERVED = /^[A-Za-z0-9._~-]$/;
/** …and `/` (Python's quote by default). */
const UNRESERVED_SLASH = /^[A-Za-z0-9._~/-]$/;
/** What JavaScript's encodeURIComponent leaves as it is. */
const URI_COMPONENT = /^[A-Za-z0-9._~!'()*-]$/;

/**
 * Every spelling of `value` an upstream is likely to echo, each shown as `token`: raw;
 * JSON-escaped with and without `\/`, and as Go's encoding/json escapes `<`, `>`, `&`
 * (`\u003c`); percent-encoded as JavaScript, Go and Python encoders do (which characters
 * stay, `+` or `%20` for a space, upper- or lower-case hex); HTML-escaped as common template
 * engines do (`&#39;` or `&#x27;`, `&quot;` or `&#34;`, Go's `&#43;`). A fourth review found an
 * echo in Go's JSON and a `Location` in lower-case hex reaching the agent.
 */
export function redactionsFor(value: string, token: string): readonly Redaction[] {
  const key = `${token}\u0000${value}`;
  const hit = redactionLists.get(key);
  if (hit) return hit;
  const html = value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  const htmlPython = html.replace(/&#39;/g, '&#x27;');
  const htmlGo = value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&#34;').replace(/'/g, '&#39;').replace(/\+/g, '&#43;');
  const json = jsonEscape(value);
  const goJson = json.replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
  const percent: string[] = [];
  for (const keep of [URI_COMPONENT, UNRESERVED, UNRESERVED_SLASH]) {
    for (const lower of [false, true]) {
      const p = percentEncode(value, keep, lower);
      percent.push(p, p.replace(/%20/g, '+'));
    }
  }
  const forms = [value, json, json.replace(/\//g, '\\/'), goJson, goJson.replace(/\\u00([0-9a-f]{2})/g, (_, h: string) => `\\u00${h.toUpperCase()}`), ...percent, html, htmlPython, htmlGo];
  const list = Object.freeze([...new Set(forms)].filter((s) => s.length > 0).map((sent) => Object.freeze({ sent, shown: token })));
  // Bounded by count and by size: a 64 KiB value (the secret limit) and its spellings are
  // not worth keeping, 1000 typical keys (~100 bytes each, six spellings) are under 1 MiB.
  if (value.length <= 1024) {
    if (redactionLists.size >= 1000) redactionLists.delete(redactionLists.keys().next().value as string);
    redactionLists.set(key, list);
  }
  return list;
}

/**
 * Redaction lists by credential and value, built once: a frozen list is also compiled once
 * by the redactor (proxy/redact.ts). Bounded; values are in this process's memory anyway
 * (the secrets snapshot keeps them for its life).
 */
const redactionLists = new Map<string, readonly Redaction[]>();

/**
 * The request with each slot's token replaced by its real value (`values` by token),
 * and the redactions its answer needs. Throws when a value cannot be put in a header
 * (CR/LF would split it). Only `placement.hits` are touched: a token anywhere else is
 * left as it is (and a request with one is refused before this runs).
 */
export function swapCredentials(req: RequestParts, placement: Placement, values: ReadonlyMap<string, string>): { url: string; headers: Headers; body: Buffer | null; redactions: readonly Redaction[] } {
  // One credential in the Authorization header (the common request): its cached list as it is.
  let redactions: readonly Redaction[] | Redaction[] = [];
  for (const [token, value] of values) redactions = redactions.length === 0 ? redactionsFor(value, token) : [...redactions, ...redactionsFor(value, token)];
  const extra: Redaction[] = [];
  const real = (t: string): string => {
    const v = values.get(t);
    if (v === undefined) throw new Error('a credential in a slot has no value');
    return v;
  };
  const headerValue = (v: string): string => {
    if (!HEADER_SAFE.test(v)) throw new Error('a credential value cannot be sent in a header');
    return v;
  };

  const headers: Headers = { ...req.headers };
  const setHeader = (name: string, index: number, v: string): void => {
    const cur = headers[name];
    if (Array.isArray(cur)) {
      const copy = [...cur];
      copy[index] = v;
      headers[name] = copy;
    } else headers[name] = v;
  };
  const getHeader = (name: string, index: number): string => {
    const cur = headers[name];
    return (Array.isArray(cur) ? cur[index] : cur) ?? '';
  };
  let queryEdits: Map<number, string> | null = null;
  let formEdits: Map<number, string> | null = null;
  let jsonTokens: Set<string> | null = null;
  for (const h of placement.hits) {
    switch (h.at) {
      case 'auth-param':
      case 'header': {
        const cur = getHeader(h.header, h.index);
        setHeader(h.header, h.index, headerValue(cur.replace(h.token, () => real(h.token))));
        break;
      }
      case 'basic': {
        const decoded = basicParts(getHeader(h.header, h.index)) ?? '';
        const colon = decoded.indexOf(':');
        const user = colon < 0 ? decoded : decoded.slice(0, colon);
        const pass = colon < 0 ? '' : decoded.slice(colon + 1);
        const out = `${h.user ? real(h.user) : user}${colon < 0 && !h.pass ? '' : ':'}${h.pass ? real(h.pass) : pass}`;
        const blob = Buffer.from(out, 'utf8').toString('base64');
        const agentBlob = Buffer.from(decoded, 'utf8').toString('base64');
        extra.push({ sent: blob, shown: agentBlob });
        setHeader(h.header, h.index, `Basic ${blob}`);
        break;
      }
      case 'query':
        (queryEdits ??= new Map()).set(h.pair, h.token);
        break;
      case 'form':
        (formEdits ??= new Map()).set(h.pair, h.token);
        break;
      case 'json':
        (jsonTokens ??= new Set()).add(h.token);
        break;
    }
  }

  const rewritePairs = (text: string, edits: Map<number, string>): string =>
    splitPairs(text)
      .map((p, i) => {
        const t = edits.get(i);
        if (t === undefined) return p.value === null ? p.name : `${p.name}=${p.value}`;
        return `${p.name}=${encodeURIComponent(real(t))}`;
      })
      .join('&');

  let url = req.url;
  if (queryEdits) {
    const hashAt = url.indexOf('#');
    const frag = hashAt < 0 ? '' : url.slice(hashAt);
    const target = hashAt < 0 ? url : url.slice(0, hashAt);
    const q = target.indexOf('?');
    url = `${target.slice(0, q)}?${rewritePairs(target.slice(q + 1), queryEdits)}${frag}`;
  }
  let body = req.body ?? null;
  if (body && formEdits) body = Buffer.from(rewritePairs(body.toString('latin1'), formEdits), 'latin1');
  if (body && jsonTokens) {
    let text = body.toString('utf8');
    for (const t of jsonTokens) text = text.split(t).join(jsonEscape(real(t)));
    body = Buffer.from(text, 'utf8');
  }
  return { url, headers, body, redactions: extra.length > 0 ? [...redactions, ...extra] : redactions };
}
