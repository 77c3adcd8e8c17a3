import { iso } from '../lib/clock.js';
import { scrubHostString, scrubString } from '../lib/log.js';
import type { RequestFacts } from '../policy-engine/facts.js';

/**
 * One audit entry: what the egress proxy writes once per request (decisions.md,
 * "Audit entry"). The writer takes exactly these fields, never headers or bodies, so a
 * credential can reach the log only through a field the proxy fills in; every string is
 * scrubbed as well (lib/log.ts scrubString) in case one does.
 */

export const CREDENTIALS = ['connection', 'secret', 'none'] as const;
export type CredentialKind = (typeof CREDENTIALS)[number];
export const DECISIONS = ['allow', 'deny', 'ask'] as const;
export type AuditDecision = (typeof DECISIONS)[number];

/** What the proxy hands the writer. */
export interface AuditEntryInput {
  developer_id: string;
  environment_id: string | null;
  method: string;
  host: string;
  /** Path and query as the agent sent them; query values are redacted by the writer. */
  path: string;
  connector?: string | null;
  category?: string | null;
  credential: CredentialKind;
  decision: AuditDecision;
  /** The fixed reason of the verdict (policy reason or gateway error code). */
  reason: string | null;
  /** Indices of the policy rules that matched (JSON-serialisable). Default []. */
  matched_rules?: unknown;
  approval_id?: string | null;
  grant_id?: string | null;
  /** The HTTP status the agent got. */
  status: number;
  upstream_status?: number | null;
  bytes_in?: number;
  bytes_out?: number;
  duration_ms?: number;
  /** The gateway replaced a swapped-in real value in the answer before the agent got it. */
  redacted?: boolean;
  /** When the request finished, ms (service clock); default: when it was queued. */
  created_at?: number;
  /**
   * What the policy read from the request (policy-engine/facts.ts: amount, recipients,
   * channel), decoded from the agent's own body before any swap. Stored bounded and
   * scrubbed (sanitizeFacts), so a simulation can replay the policy on it (issue 26).
   */
  facts?: RequestFacts | null;
  /** The MCP tool(s) the request called (issue 28, docs/mcp.md); absent or null: none. */
  tool?: string | null;
}

/** A sanitised entry before it is chained: everything but seq, prev_hash and hash. */
export interface UnchainedRow {
  id: string;
  developer_id: string;
  created_at: number;
  environment_id: string | null;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  credential: CredentialKind;
  decision: AuditDecision;
  reason: string | null;
  /** JSON text, exactly as stored and hashed. */
  matched_rules: string;
  approval_id: string | null;
  grant_id: string | null;
  status: number;
  upstream_status: number | null;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  /** Hashed only when true (audit/chain.ts): rows from before the column keep their hashes. */
  redacted: boolean;
  /**
   * StoredFacts as JSON text, exactly as stored and hashed, or null (no facts). Hashed only
   * when not null (audit/chain.ts): rows from before the column keep their hashes.
   */
  facts: string | null;
  /** The MCP tool(s) called, or null. Hashed only when not null (audit/chain.ts): older rows keep their hashes. */
  tool?: string | null;
}

/** A row of `audit_log`. */
export interface AuditRow extends UnchainedRow {
  seq: number;
  prev_hash: string;
  hash: string;
}

/** The API record: decisions.md's field list, in its order. */
export interface AuditEntry {
  id: string;
  created_at: string | null;
  environment_id: string | null;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  credential: CredentialKind;
  decision: AuditDecision;
  reason: string | null;
  matched_rules: unknown;
  approval_id: string | null;
  grant_id: string | null;
  status: number;
  upstream_status: number | null;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  /** Present (true) only when the gateway redacted a real value from the answer. */
  redacted?: true;
  /** Present only when the request's facts were recorded (issue 26); null for a stored value that does not parse. */
  facts?: StoredFacts | null;
  /** Present only on a request that called an MCP tool (issue 28). */
  tool?: string;
  prev_hash: string;
  hash: string;
}

/**
 * Column sizes of migrations/0005_audit.ts, in characters (MySQL VARCHAR counts code
 * points). The writer truncates to them: an over-long value must not fail the batch insert
 * it rides in, or every entry queued behind it would wait on a row that can never be written.
 */
export const LIMITS = {
  id: 40,
  method: 16,
  host: 255,
  path: 4096,
  connector: 100,
  category: 32,
  reason: 255,
  matched_rules: 4096,
  /** Facts (sanitizeFacts): recipients kept, code points per address, channel, currency, and the whole JSON text. */
  facts_recipients: 50,
  facts_address: 254,
  facts_channel: 100,
  facts_currency: 16,
  facts: 16_384,
  /** MCP tool names (128 each), a batch's joined with `,`. */
  tool: 4096,
} as const;

/**
 * The facts as stored with an entry (issue 26): RequestFacts bounded and scrubbed. A key
 * is present when the decoder set it (null: it could not read the value). When the
 * request named more recipients than are kept, `recipients` holds the first
 * LIMITS.facts_recipients and `recipients_total` how many there were; a reader must then
 * treat the list as incomplete (the simulation does: unknown, the riskier reading).
 */
export interface StoredFacts {
  amount?: { currency: string; minor_units: number } | null;
  recipients?: string[] | null;
  recipients_total?: number;
  channel?: string | null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

const ANY_SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Scrubbed, well-formed (a lone surrogate cannot round-trip through utf8mb4, so the stored
 * text would differ from the hashed text) and at most `max` code points.
 */
export function cleanString(value: string, max: number, scrub: (s: string) => string = scrubString): string {
  let s = String(value);
  if (ANY_SURROGATE.test(s)) s = s.replace(LONE_SURROGATE, '\uFFFD');
  s = scrub(s);
  if (s.length > max) {
    const points = Array.from(s);
    if (points.length > max) s = points.slice(0, max - 1).join('') + '…';
  }
  return s;
}

function cleanOptional(value: string | null | undefined, max: number): string | null {
  return value == null || value === '' ? null : cleanString(value, max);
}

/**
 * The path with every query value (and matrix parameter value, `;jsessionid=...`) replaced
 * by `[redacted]`, keys kept: `/s?q=secret&x=1` → `/s?q=[redacted]&x=[redacted]`. A key
 * without `=` stays as it is; a fragment is redacted whole. Values are what carry tokens
 * (`?access_token=`, `?key=`, signed URLs); the keys say what the request did.
 */
export function redactPath(path: string): string {
  let p = path;
  let fragment = '';
  const hashAt = p.indexOf('#');
  if (hashAt >= 0) {
    fragment = hashAt < p.length - 1 ? '#[redacted]' : '#';
    p = p.slice(0, hashAt);
  }
  const qAt = p.indexOf('?');
  let base = qAt >= 0 ? p.slice(0, qAt) : p;
  base = base.replace(/;([^;/=]*)=[^;/]*/g, ';$1=[redacted]');
  if (qAt < 0) return base + fragment;
  const query = p
    .slice(qAt + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      return eq < 0 ? part : `${part.slice(0, eq)}=[redacted]`;
    })
    .join('&');
  return `${base}?${query}${fragment}`;
}

/** Strings anywhere in a JSON value scrubbed (matched_rules). */
function scrubJson(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (value == null || typeof value !== 'object' || depth > 8) return value;
  if (Array.isArray(value)) return value.map((v) => scrubJson(v, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [scrubString(k), scrubJson(v, depth + 1)]));
}

/**
 * Our own tokens (placeholders `svcph_`, stand-ins `svcst_`) anywhere in a string, in any
 * case: scrubString wants a word boundary before them and a whole token after them; a
 * fact value carrying even part of one is replaced whole.
 */
const OWN_TOKEN = /svc(?:ph|st)_/i;

/** A fact's string, bounded and scrubbed; null when it is not a string. */
function factString(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return null;
  if (OWN_TOKEN.test(value)) return '[redacted]';
  return cleanString(value, max);
}

/**
 * The request's facts as stored (StoredFacts as JSON text), or null when there are none.
 * Bounded whatever the request carried: an amount is kept as is when well-formed (currency
 * a string, cut to LIMITS.facts_currency; minor_units a safe integer), else null; at most
 * LIMITS.facts_recipients recipients of at most LIMITS.facts_address code points each,
 * `recipients_total` saying how many there were when more; a channel of at most
 * LIMITS.facts_channel. Every string is scrubbed like the other fields, and one holding
 * any part of a placeholder or stand-in token is replaced whole by `[redacted]` (facts are
 * decoded from the agent's own body, before any swap: a secret's real value is never in
 * them, but the agent can put a placeholder anywhere). Only these keys are taken.
 */
export function sanitizeFacts(facts: RequestFacts | null | undefined): string | null {
  if (facts == null || typeof facts !== 'object' || Array.isArray(facts)) return null;
  const out: StoredFacts = {};
  const amount = facts.amount as unknown;
  if (amount !== undefined) {
    const a = amount as { currency?: unknown; minor_units?: unknown } | null;
    out.amount = a !== null && typeof a === 'object' && typeof a.currency === 'string' && Number.isSafeInteger(a.minor_units)
      ? { currency: factString(a.currency, LIMITS.facts_currency)!, minor_units: a.minor_units as number }
      : null;
  }
  const recipients = facts.recipients as unknown;
  let total = 0;
  if (recipients !== undefined) {
    if (Array.isArray(recipients)) {
      total = recipients.length;
      const kept: string[] = [];
      for (let i = 0; i < total && kept.length < LIMITS.facts_recipients; i++) kept.push(factString(recipients[i], LIMITS.facts_address) ?? '[invalid]');
      out.recipients = kept;
      if (total > kept.length) out.recipients_total = total;
    } else {
      out.recipients = null;
    }
  }
  const channel = facts.channel as unknown;
  if (channel !== undefined) out.channel = channel === null ? null : factString(channel, LIMITS.facts_channel) ?? '[invalid]';
  if (Object.keys(out).length === 0) return null;
  let text = JSON.stringify(out);
  // JSON escapes can lengthen odd strings several times over: keep fewer recipients.
  while (text.length > LIMITS.facts && out.recipients && out.recipients.length > 0) {
    out.recipients.length = Math.floor(out.recipients.length / 2);
    out.recipients_total = total;
    text = JSON.stringify(out);
  }
  return text;
}

/** Stored facts back as a value; null for text that is not a JSON object (a tampered row: verify reports it). */
export function parseFacts(text: string): StoredFacts | null {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as StoredFacts) : null;
  } catch {
    return null;
  }
}

function count(value: number | null | undefined, name: string, nullable: false): number;
function count(value: number | null | undefined, name: string, nullable: true): number | null;
function count(value: number | null | undefined, name: string, nullable: boolean): number | null {
  if (value == null) return nullable ? null : 0;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError(`audit entry: ${name} must be a finite number`);
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.trunc(value)));
}

function httpStatus(value: number | null | undefined, name: string, nullable: boolean): number | null {
  if (value == null && nullable) return null;
  if (!Number.isInteger(value) || (value as number) < 100 || (value as number) > 999) {
    throw new TypeError(`audit entry: ${name} must be an HTTP status`);
  }
  return value as number;
}

/**
 * The entry as it will be stored. Throws TypeError for a programming error (an unknown
 * decision or credential kind, a status that is not a status) at the call site, rather
 * than letting a row that can never be written into the queue.
 */
export function sanitizeEntry(input: AuditEntryInput, id: string, createdAt: number): UnchainedRow {
  if (!(CREDENTIALS as readonly string[]).includes(input.credential)) throw new TypeError('audit entry: unknown credential kind');
  if (!(DECISIONS as readonly string[]).includes(input.decision)) throw new TypeError('audit entry: unknown decision');
  if (typeof input.developer_id !== 'string' || input.developer_id === '' || input.developer_id.length > LIMITS.id) {
    throw new TypeError('audit entry: developer_id is required');
  }
  const matched = input.matched_rules ?? [];
  // The proxy's matched_rules are rule indexes: nothing to scrub.
  let rules = JSON.stringify(Array.isArray(matched) && matched.every((v) => typeof v === 'number') ? matched : scrubJson(matched));
  if (rules.length > LIMITS.matched_rules) rules = JSON.stringify({ truncated: true });
  return {
    id,
    developer_id: input.developer_id,
    created_at: input.created_at == null ? createdAt : count(input.created_at, 'created_at', false),
    environment_id: cleanOptional(input.environment_id, LIMITS.id),
    method: cleanString(input.method ?? '', LIMITS.method),
    // Scrubbed of our own token formats only: no value is swapped into a host name, and a host
    // named like a provider's token (`ya29.exfil.attacker.example`) hid where data went (a fourth review).
    host: cleanString(input.host ?? '', LIMITS.host, scrubHostString),
    path: cleanString(redactPath(input.path ?? ''), LIMITS.path),
    // An `egress:<host>` connector names a host, likewise.
    connector: input.connector != null && input.connector.startsWith('egress:') ? cleanString(input.connector, LIMITS.connector, scrubHostString) : cleanOptional(input.connector, LIMITS.connector),
    category: cleanOptional(input.category, LIMITS.category),
    credential: input.credential,
    decision: input.decision,
    reason: cleanOptional(input.reason, LIMITS.reason),
    matched_rules: rules,
    approval_id: cleanOptional(input.approval_id, LIMITS.id),
    grant_id: cleanOptional(input.grant_id, LIMITS.id),
    status: httpStatus(input.status, 'status', false)!,
    upstream_status: httpStatus(input.upstream_status, 'upstream_status', true),
    bytes_in: count(input.bytes_in, 'bytes_in', false),
    bytes_out: count(input.bytes_out, 'bytes_out', false),
    duration_ms: count(input.duration_ms, 'duration_ms', false),
    redacted: input.redacted === true,
    facts: sanitizeFacts(input.facts),
    tool: cleanOptional(input.tool, LIMITS.tool),
  };
}

function num(v: unknown): number {
  return Number(v);
}
function numOrNull(v: unknown): number | null {
  return v == null ? null : Number(v);
}

export function toAuditEntry(r: AuditRow): AuditEntry {
  let rules: unknown;
  try {
    rules = typeof r.matched_rules === 'string' ? JSON.parse(r.matched_rules) : r.matched_rules;
  } catch {
    rules = null; // a tampered row; verify reports it
  }
  return {
    id: r.id,
    created_at: iso(num(r.created_at)),
    environment_id: r.environment_id ?? null,
    method: r.method,
    host: r.host,
    path: r.path,
    connector: r.connector ?? null,
    category: r.category ?? null,
    credential: r.credential,
    decision: r.decision,
    reason: r.reason ?? null,
    matched_rules: rules ?? [],
    approval_id: r.approval_id ?? null,
    grant_id: r.grant_id ?? null,
    status: num(r.status),
    upstream_status: numOrNull(r.upstream_status),
    bytes_in: num(r.bytes_in),
    bytes_out: num(r.bytes_out),
    duration_ms: num(r.duration_ms),
    // Only when it happened: every other entry is exactly decisions.md's field list.
    ...(Number(r.redacted) === 1 || r.redacted === true ? { redacted: true as const } : {}),
    // Only when recorded (issue 26): entries without facts keep decisions.md's field list.
    ...(r.facts != null ? { facts: parseFacts(r.facts) } : {}),
    // Only on an MCP tool call (issue 28).
    ...(r.tool != null ? { tool: r.tool } : {}),
    prev_hash: r.prev_hash,
    hash: r.hash,
  };
}
