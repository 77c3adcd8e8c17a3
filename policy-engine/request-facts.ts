/**
 * factsOf(): what a request would do, decoded for rule conditions and grant limits (issue
 * 26, item 1): the amount of a Stripe payment, the recipients of a Gmail send or of a
 * calendar event's guests, the channel of a Slack post. PURE.
 *
 * The agent wrote every byte and is treated as an attacker, so a field is read the one way
 * the provider reads it or not at all (null: "could not be read", which conditions and
 * limits take as the riskier reading). Never a guess, never a partial list:
 *  - a compressed body, bytes that are not UTF-8, JSON repeating a key, a body that was not
 *    buffered whole: null;
 *  - a value the provider may take from two places (`amount` twice in a form, or in the
 *    query and the body; two `To` headers; `channel` in the query and the body): null;
 *  - a mail header block that describe.ts could not read whole (mixed line ends, a NUL,
 *    more than one message part, ...), an address that is not well-formed: null.
 * The caller passes the body the agent sent, before any credential was swapped in.
 */
import { isGoogleHost } from './classify/index.js';
import { bodyJsonStrict, bodyTextStrict, contentEncoded, fieldKey, googleMethods, normalizeHost, parseRequest } from './classify/http.js';
import { gmailBase } from './classify/gmail.js';
import { isCalendarPath } from './classify/calendar.js';
import { isSlackApiPath, isSlackHost } from './classify/slack.js';
import { STRIPE_HOST } from './classify/stripe.js';
import type { ClassifyRequest, ParsedRequest } from './classify/types.js';
import { parseAddressList } from './address-list.js';
import { MAX_MESSAGE_BYTES, mimeHeaders, readHeaderBlock, rfc822Part } from './mime-headers.js';
import type { Money, RequestFacts } from './facts.js';

const NONE: RequestFacts = Object.freeze({});

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The one member whose name folds (fieldKey) to `field`; undefined when none, null when several. */
function member(obj: Record<string, unknown>, field: string): unknown {
  const keys = Object.keys(obj).filter((k) => fieldKey(k) === field);
  if (keys.length > 1) return null;
  return keys.length === 1 ? obj[keys[0]!] : undefined;
}

function bodyBytes(p: ParsedRequest): Uint8Array | undefined {
  if (p.body === undefined) return undefined;
  return typeof p.body === 'string' ? Buffer.from(p.body, 'utf8') : p.body;
}

// ---------------------------------------------------------------- Stripe

/**
 * `amount` and `currency` of a form request (Stripe v1 takes forms; Stripe's `amount` is
 * already in minor units). Exactly one of each, across query and body; any other spelling
 * that folds to either (`Amount`, `amount[]`) makes it unreadable.
 */
function stripeAmount(p: ParsedRequest): Money | null {
  if (p.method !== 'POST' && !p.overrides.includes('POST')) return null;
  const text = bodyTextStrict(p.body, p.headers);
  if (text === undefined) return null;
  const ct = (p.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (text.trim() !== '' && ct !== '' && ct !== 'application/x-www-form-urlencoded') return null;
  const amounts: string[] = [];
  const currencies: string[] = [];
  for (const params of [p.query, new URLSearchParams(text)]) {
    for (const [k, v] of params) {
      const top = fieldKey(k.split('[')[0]!);
      if (top === 'amount') {
        if (k !== 'amount') return null;
        amounts.push(v);
      } else if (top === 'currency') {
        if (k !== 'currency') return null;
        currencies.push(v);
      }
    }
  }
  if (amounts.length !== 1 || currencies.length !== 1) return null;
  const a = amounts[0]!;
  const c = currencies[0]!;
  if (!/^\d{1,15}$/.test(a) || !/^[A-Za-z]{3}$/.test(c)) return null;
  return { currency: c.toLowerCase(), minor_units: Number(a) };
}

// ---------------------------------------------------------------- Gmail

const RECIPIENT_HEADERS = ['to', 'cc', 'bcc'] as const;

/** Recipients of a message's header block: every To, Cc and Bcc address; null when not one reading. */
function messageRecipients(bytes: Uint8Array): string[] | null {
  const block = readHeaderBlock(bytes);
  if (block.error !== undefined) return null;
  const h = mimeHeaders(block.text);
  const out: string[] = [];
  for (const name of RECIPIENT_HEADERS) {
    const values = h.get(name) ?? [];
    // Two `To` headers: which one a mail system honours is its choice (issue 26: unreadable).
    if (values.length > 1) return null;
    for (const value of values) {
      const parsed = parseAddressList(value);
      if (parsed.error !== undefined) return null;
      for (const a of parsed.addresses) {
        if (a.address === '' && a.group !== undefined) continue; // an empty group (`undisclosed-recipients:;`)
        // Anything noted (not well-formed, two <…> in one entry, text after <…>) has no single reading.
        if (a.note !== undefined || a.address === '' || a.address.length > 320) return null;
        // eslint-disable-next-line no-control-regex
        if (/[\s\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/.test(a.address)) return null;
        out.push(a.address.toLowerCase());
      }
    }
  }
  return out;
}

/** A `raw` message (base64url, as Gmail reads it): its bytes, or null. */
function rawMessage(raw: string): Uint8Array | null {
  if (raw.length > Math.ceil(MAX_MESSAGE_BYTES / 3) * 4) return null;
  if (!/^[A-Za-z0-9_\-+/]*={0,2}$/.test(raw) || raw.replace(/=+$/, '').length % 4 === 1) return null;
  return Buffer.from(raw, 'base64url');
}

/** `users/{id}/messages/send` or `users/{id}/drafts/send` (either base). */
function isGmailSend(p: ParsedRequest): boolean {
  const base = gmailBase(p.lower);
  if (base === -1 || p.lower[base] !== 'users') return false;
  const rel = p.lower.slice(base + 2);
  return rel.length === 2 && rel[1] === 'send' && (rel[0] === 'messages' || rel[0] === 'drafts');
}

/** messages.send and drafts.send: the message's recipients, or null; undefined for other calls. */
function gmailRecipients(p: ParsedRequest): string[] | null | undefined {
  if (!isGmailSend(p)) return undefined;
  const base = gmailBase(p.lower);
  const draft = p.lower[base + 2] === 'drafts';
  if (contentEncoded(p.headers)) return null;
  const upload = base === 3;
  const ct = (p.contentType ?? '').toLowerCase();
  if (upload && p.query.get('uploadType') !== 'resumable') {
    if (p.query.getAll('uploadType').length > 1) return null;
    const bytes = bodyBytes(p);
    if (bytes === undefined) return null;
    if (ct.startsWith('message/rfc822')) return messageRecipients(bytes);
    if (ct.startsWith('multipart/')) {
      const part = rfc822Part(bytes, p.contentType ?? '');
      if (part === undefined || 'error' in part) return null;
      return messageRecipients(part.bytes);
    }
    return null;
  }
  // A resumable upload carries the message in a later request: not readable here.
  if (upload) return null;
  const json = bodyJsonStrict(p.body, p.headers);
  if (!isObject(json)) return null;
  const holder = draft ? member(json, 'message') : json;
  if (!isObject(holder)) return null; // a saved draft by id: its recipients are not in the request
  // A saved draft's id beside a message: which one Gmail sends is not documented (a fourth review).
  if (draft && member(json, 'id') !== undefined) return null;
  const raw = member(holder, 'raw');
  if (typeof raw !== 'string') return null;
  const bytes = rawMessage(raw);
  return bytes === null ? null : messageRecipients(bytes);
}

// ---------------------------------------------------------------- Calendar

/** The guests of an event insert/update/patch: every attendee's email; null when not all have one. */
function calendarGuests(p: ParsedRequest): string[] | null | undefined {
  const rel = p.lower.slice(2);
  if (rel[0] !== 'calendars' || rel[2] !== 'events') return undefined;
  const methods = googleMethods(p);
  if (methods.length !== 1) return null;
  const method = methods[0]!;
  if (method === 'GET' || method === 'HEAD') return undefined;
  // insert: events; update/patch: events/{id}. Anything else (import, quickAdd, move,
  // instances, delete) does not say who the guests are in the request.
  const insert = rel.length === 3 && method === 'POST';
  const change = rel.length === 4 && (method === 'PUT' || method === 'PATCH') && rel[3] !== 'quickadd' && rel[3] !== 'import';
  if (!insert && !change) return null;
  const json = bodyJsonStrict(p.body, p.headers);
  if (!isObject(json)) return null;
  const attendees = member(json, 'attendees');
  if (attendees === undefined) return method === 'PATCH' ? null : []; // PATCH without it keeps the guests there are
  if (!Array.isArray(attendees)) return null;
  const out: string[] = [];
  for (const a of attendees) {
    if (!isObject(a)) return null;
    const email = member(a, 'email');
    if (typeof email !== 'string' || email.trim() === '' || /\s/.test(email.trim())) return null;
    out.push(email.trim().toLowerCase());
  }
  return out;
}

// ---------------------------------------------------------------- Slack

/** The one channel a Slack call names (query and JSON or form body alike); null when none or several. */
function slackChannel(p: ParsedRequest): string | null {
  const values: unknown[] = [];
  const take = (k: string, v: unknown) => {
    if (['channel', 'channels', 'channelid'].includes(fieldKey(k))) values.push(v);
  };
  for (const [k, v] of p.query) take(k, v);
  const text = bodyTextStrict(p.body, p.headers);
  if (text === undefined) return null;
  if (text.trim() !== '') {
    const ct = (p.contentType ?? '').toLowerCase();
    if (ct.includes('json')) {
      const json = bodyJsonStrict(p.body, p.headers);
      if (!isObject(json)) return null;
      for (const [k, v] of Object.entries(json)) take(k, v);
    } else if (ct.startsWith('application/x-www-form-urlencoded') || ct === '') {
      for (const [k, v] of new URLSearchParams(text)) take(k, v);
    } else return null;
  }
  if (values.length !== 1) return null;
  const ch = values[0];
  if (typeof ch !== 'string' || ch === '' || ch.length > 255 || /[\s,]/.test(ch)) return null;
  return ch;
}

/**
 * The decoded facts of a request for `connector` (the credential's connector). Which
 * decoder runs is chosen by host and path, as classify() chooses its table: a Slack token
 * kept as a `secret:` still posts to a channel. Fields a request has no decoder for are
 * absent (unreadable); a decoder that cannot read its field sets it to null. Never throws.
 */
/**
 * Whether a decoder could apply to this host at all: a host of none of them has no facts and
 * needs no parse (every request with a credential passes here: the profile of the gateway
 * bench showed the parse at ~3 % of its CPU; issue 29). The same normalisation parseRequest
 * uses; an empty host (absolute-form target) is left to the full parse.
 */
function decodable(host: string): boolean {
  if (host === '') return true;
  const h = normalizeHost(host);
  return h === STRIPE_HOST || isSlackHost(h) || isGoogleHost(h);
}

/**
 * Recipients a request may name and still be read: more are unreadable (the riskier
 * reading). Gmail takes at most 500 a message; a 10 MiB calendar body named ~300,000 guests,
 * each checked against every rule's domains (a fourth review).
 */
export const MAX_RECIPIENTS = 1000;

function bounded(r: readonly string[] | null): readonly string[] | null {
  return r !== null && r.length > MAX_RECIPIENTS ? null : r;
}

export function factsOf(req: ClassifyRequest, connector: string): RequestFacts {
  void connector;
  if (!decodable(req.host)) return NONE;
  try {
    const p = parseRequest(req);
    if (isGoogleHost(p.host)) {
      if (gmailBase(p.lower) !== -1) {
        const r = gmailRecipients(p);
        return r === undefined ? NONE : { recipients: bounded(r) };
      }
      if (isCalendarPath(p.lower)) {
        const r = calendarGuests(p);
        return r === undefined ? NONE : { recipients: bounded(r) };
      }
      return NONE;
    }
    if (isSlackHost(p.host) && isSlackApiPath(p.lower)) return { channel: slackChannel(p) };
    if (p.host === STRIPE_HOST) return { amount: stripeAmount(p) };
    return NONE;
  } catch {
    return { amount: null, recipients: null, channel: null };
  }
}

/**
 * Whether factsOf() reads this request's body (so the gateway buffers it whole before
 * deciding, when the policy has conditions): writes to Stripe, Gmail sends, calendar
 * event writes, Slack API calls.
 */
export function factsNeedBody(req: Pick<ClassifyRequest, 'method' | 'host' | 'path' | 'headers'>): boolean {
  if (!decodable(req.host)) return false;
  const p = parseRequest({ ...req, body: undefined });
  if (isSlackHost(p.host) && isSlackApiPath(p.lower)) return true;
  if (p.host === STRIPE_HOST) return p.method !== 'GET' && p.method !== 'HEAD';
  if (!isGoogleHost(p.host)) return false;
  if (!googleMethods(p).some((m) => m !== 'GET' && m !== 'HEAD')) return false;
  if (gmailBase(p.lower) !== -1) return isGmailSend(p);
  return isCalendarPath(p.lower) && p.lower[4] === 'events';
}
