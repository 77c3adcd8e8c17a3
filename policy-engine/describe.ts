/**
 * describeRequest(): what a held request would do, in the words a person approves or denies
 * it by (issue 15, item 2): the decoded To/Cc/Bcc/Subject of a Gmail send, the channel and
 * text of a Slack post, the guests of a calendar write, the amount of a Stripe payment.
 *
 * PURE: a function of the request alone. The agent wrote every byte read here and is
 * treated as an attacker, so:
 *  - the body is read the one way the provider reads it or not at all: a compressed body,
 *    bytes that are not UTF-8 where JSON is expected, or JSON that repeats a key give
 *    `unreadable` (the card then says it could not show the content), never a guess;
 *  - where the provider may act on several values (two `To` headers, a `channel` in the
 *    query and in the body) every value is shown;
 *  - what a provider displays instead of the text (Slack blocks and attachments) is shown
 *    too, so a harmless `text` cannot hide what the recipients will read;
 *  - control, bidi-override and zero-width characters become U+FFFD, so a value cannot
 *    reorder or hide the rest of the card; every value is bounded in length;
 *  - strings in `hide` (the agent's placeholders and stand-ins) never appear in a value.
 * The caller passes the body the agent sent, before any credential was swapped in.
 */
import { isGoogleHost } from './classify/index.js';
import { bodyJsonStrict, bodyTextStrict, contentEncoded, googleMethods, parseRequest } from './classify/http.js';
import { gmailBase } from './classify/gmail.js';
import { isCalendarPath, notifiesGuests } from './classify/calendar.js';
import { isSlackApiPath, isSlackHost } from './classify/slack.js';
import { STRIPE_HOST } from './classify/stripe.js';
import type { ClassifyRequest, ParsedRequest } from './classify/types.js';

export interface DetailField {
  readonly label: string;
  readonly value: string;
}

export interface RequestDetails {
  /** `email`, `draft`, `slack_message`, `slack_file`, `slack_members`, `calendar_event`, `payment`. */
  readonly kind: string;
  readonly fields: readonly DetailField[];
  /** Why the content could not be shown (the card says so rather than guess). */
  readonly unreadable?: string;
}

/** A value longer than this is cut, saying how much was left out. */
export const MAX_DETAIL_VALUE = 500;
/** At most this many fields per request. */
export const MAX_DETAIL_FIELDS = 12;
/** Base64 characters of a Gmail `raw` message decoded to find its headers (they come first). */
const MAX_RAW_CHARS = 256 * 1024;

// C0 (but tab and newline), DEL, C1, bidi embeddings/overrides/isolates, zero-width and
// other invisible formatting characters, line and paragraph separators.
// eslint-disable-next-line no-control-regex
const UNSAFE_CHARS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\ufff9-\ufffb]/g;

function clean(s: string, hide: readonly string[]): string {
  let v = s;
  for (const h of hide) if (h.length >= 8) v = v.split(h).join('[credential]');
  v = v.replace(UNSAFE_CHARS, '\uFFFD');
  if (v.length > MAX_DETAIL_VALUE) v = `${v.slice(0, MAX_DETAIL_VALUE)}… (${v.length - MAX_DETAIL_VALUE} more characters)`;
  return v;
}

class Fields {
  readonly out: DetailField[] = [];
  constructor(private readonly hide: readonly string[]) {}
  add(label: string, values: readonly string[] | string | undefined | null): void {
    const list = (typeof values === 'string' ? [values] : values ?? []).filter((v) => v !== '');
    if (list.length === 0 || this.out.length >= MAX_DETAIL_FIELDS) return;
    this.out.push({ label, value: clean(list.join(list.length > 1 && list.some((v) => v.includes(',')) ? ' | ' : ', '), this.hide) });
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

// ---------------------------------------------------------------- MIME headers (Gmail)

/** RFC 2047 encoded words (`=?utf-8?B?...?=`, `=?iso-8859-1?Q?...?=`); others left as they are. */
export function decodeEncodedWords(s: string): string {
  return s
    .replace(/(=\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)\s+(?==\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)/g, '$1')
    .replace(/=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g, (whole, charset: string, enc: string, text: string) => {
      let bytes: Buffer;
      if (enc.toUpperCase() === 'B') bytes = Buffer.from(text, 'base64');
      else {
        const t = text.replace(/_/g, ' ');
        const arr: number[] = [];
        for (let i = 0; i < t.length; i++) {
          const hex = t.slice(i + 1, i + 3);
          if (t[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
            arr.push(parseInt(hex, 16));
            i += 2;
          } else arr.push(t.charCodeAt(i) & 0xff);
        }
        bytes = Buffer.from(arr);
      }
      try {
        return new TextDecoder(charset.split('*')[0]!.toLowerCase()).decode(bytes);
      } catch {
        return whole; // a charset we do not know: shown as sent
      }
    });
}

/** The header block of an RFC 5322 message, unfolded: name (lowercased) → values in order. */
export function mimeHeaders(message: string): Map<string, string[]> {
  const m = /\r?\n\r?\n/.exec(message);
  const block = m ? message.slice(0, m.index) : message;
  const out = new Map<string, string[]>();
  let current: { name: string; value: string } | null = null;
  const flush = () => {
    if (current) out.set(current.name, [...(out.get(current.name) ?? []), current.value.trim()]);
    current = null;
  };
  for (const line of block.split(/\r?\n/)) {
    if ((line.startsWith(' ') || line.startsWith('\t')) && current) {
      current.value += ` ${line.trim()}`;
      continue;
    }
    flush();
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    current = { name: line.slice(0, colon).trim().toLowerCase(), value: line.slice(colon + 1) };
  }
  flush();
  return out;
}

function describeMessage(message: string, f: Fields, kind: string): RequestDetails {
  const h = mimeHeaders(message);
  const get = (n: string) => (h.get(n) ?? []).map(decodeEncodedWords);
  f.add('From', get('from'));
  f.add('To', get('to'));
  f.add('Cc', get('cc'));
  f.add('Bcc', get('bcc'));
  f.add('Subject', get('subject'));
  if (!h.has('to') && !h.has('cc') && !h.has('bcc')) f.add('Recipients', '(none in the message headers)');
  return { kind, fields: f.out };
}

function base64urlMessage(raw: string): string {
  return Buffer.from(raw.slice(0, MAX_RAW_CHARS - (MAX_RAW_CHARS % 4)), 'base64url').toString('utf8');
}

/** The message/rfc822 part of a multipart upload, or undefined. */
function rfc822Part(body: string, contentType: string): string | undefined {
  const b = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
  if (!b) return undefined;
  for (const part of body.split(`--${b}`)) {
    const head = /\r?\n\r?\n/.exec(part);
    if (!head) continue;
    const headers = mimeHeaders(part.replace(/^\r?\n/, ''));
    if ((headers.get('content-type') ?? []).some((t) => t.toLowerCase().startsWith('message/rfc822'))) return part.slice(head.index + head[0].length);
  }
  return undefined;
}

function describeGmail(p: ParsedRequest, f: Fields): RequestDetails | null {
  const base = gmailBase(p.lower);
  if (p.lower[base] !== 'users') return null;
  const rel = p.lower.slice(base + 2);
  const draft = rel[0] === 'drafts';
  if (rel.length !== 2 || rel[1] !== 'send' || (rel[0] !== 'messages' && !draft)) return null;
  const kind = 'email';
  const unreadable = (why: string): RequestDetails => ({ kind, fields: f.out, unreadable: why });
  if (contentEncoded(p.headers)) return unreadable('the message is compressed');
  const upload = base === 3;
  const ct = (p.contentType ?? '').toLowerCase();
  if (upload && p.query.get('uploadType') !== 'resumable') {
    const text = bodyText(p);
    if (text === undefined) return unreadable('the message body was not read');
    if (ct.startsWith('message/rfc822')) return describeMessage(text, f, kind);
    if (ct.startsWith('multipart/')) {
      const part = rfc822Part(text, p.contentType ?? '');
      if (part !== undefined) return describeMessage(part, f, kind);
    }
    return unreadable('the upload carries no message/rfc822 part');
  }
  const json = bodyJsonStrict(p.body, p.headers);
  if (!isObject(json)) return unreadable('the body is not one JSON object');
  const raw = draft ? (isObject(json.message) ? json.message.raw : undefined) : json.raw;
  if (typeof raw === 'string') return describeMessage(base64urlMessage(raw), f, kind);
  if (draft && typeof json.id === 'string') {
    f.add('Draft', json.id);
    return { kind: 'draft', fields: f.out, unreadable: 'sends a saved draft: its recipients and subject are not in the request' };
  }
  return unreadable('the body has no raw message');
}

function bodyText(p: ParsedRequest): string | undefined {
  if (p.body === undefined) return undefined;
  return typeof p.body === 'string' ? p.body : Buffer.from(p.body.buffer, p.body.byteOffset, p.body.byteLength).toString('utf8');
}

// ---------------------------------------------------------------- Slack

const SLACK_MESSAGE = new Set(['chat.postmessage', 'chat.postephemeral', 'chat.schedulemessage', 'chat.update', 'chat.memessage']);
const SLACK_FILE = new Set(['files.completeuploadexternal', 'files.upload', 'files.remote.share']);
const SLACK_MEMBERS = new Set(['conversations.invite', 'conversations.kick']);

/** Every string under a text-bearing key of blocks or attachments (depth-bounded). */
function visibleTexts(v: unknown, out: string[], depth = 0): void {
  if (depth > 12 || out.length > 50) return;
  if (Array.isArray(v)) for (const x of v) visibleTexts(x, out, depth + 1);
  else if (isObject(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'string' && ['text', 'title', 'pretext', 'fallback', 'footer', 'author_name', 'alt_text', 'value', 'url', 'image_url', 'title_link'].includes(k)) out.push(x);
      else visibleTexts(x, out, depth + 1);
    }
  }
}

function describeSlack(p: ParsedRequest, f: Fields): RequestDetails | null {
  const method = p.lower[1]!;
  const kind = SLACK_MESSAGE.has(method) ? 'slack_message' : SLACK_FILE.has(method) ? 'slack_file' : SLACK_MEMBERS.has(method) ? 'slack_members' : null;
  if (kind === null) return null;
  const unreadable = (why: string): RequestDetails => ({ kind, fields: f.out, unreadable: why });
  // Slack reads arguments from the query string and from a JSON or form body alike.
  const args = new Map<string, unknown[]>();
  const put = (k: string, v: unknown) => args.set(k, [...(args.get(k) ?? []), v]);
  for (const [k, v] of p.query) put(k, v);
  const ct = (p.contentType ?? '').toLowerCase();
  const text = bodyTextStrict(p.body, p.headers);
  if (text === undefined) return unreadable(contentEncoded(p.headers) ? 'the body is compressed' : 'the body is not UTF-8 text');
  if (text.trim() !== '') {
    if (ct.includes('json')) {
      const json = bodyJsonStrict(p.body, p.headers);
      if (!isObject(json)) return unreadable('the body is not one JSON object (or repeats a key)');
      for (const [k, v] of Object.entries(json)) put(k, v);
    } else if (ct.startsWith('application/x-www-form-urlencoded') || ct === '') {
      for (const [k, v] of new URLSearchParams(text)) put(k, v);
    } else return unreadable(`the body is ${ct.split(';')[0]}, not read here`);
  }
  const all = (k: string): string[] => (args.get(k) ?? []).map(str).filter((s): s is string => s !== undefined);
  const structured = (k: string): string[] => {
    const texts: string[] = [];
    for (const v of args.get(k) ?? []) {
      let x = v;
      if (typeof v === 'string') {
        try {
          x = JSON.parse(v);
        } catch {
          texts.push(v);
          continue;
        }
      }
      visibleTexts(x, texts);
    }
    return texts;
  };
  f.add('Channel', [...all('channel'), ...all('channels'), ...all('channel_id')]);
  if (kind === 'slack_members') {
    f.add('Users', [...all('users'), ...all('user')]);
    return { kind, fields: f.out };
  }
  if (method === 'chat.postephemeral') f.add('Visible only to', all('user'));
  if (method === 'chat.update') f.add('Replaces message', all('ts'));
  f.add('In thread', all('thread_ts'));
  f.add('Post at', all('post_at').map((s) => (/^\d{9,11}$/.test(s) ? new Date(Number(s) * 1000).toISOString() : s)));
  f.add('Text', all('text'));
  f.add('Comment', all('initial_comment'));
  f.add('Title', all('title'));
  f.add('Blocks', structured('blocks'));
  f.add('Attachments', structured('attachments'));
  f.add('Files', structured('files'));
  return { kind, fields: f.out };
}

// ---------------------------------------------------------------- Google Calendar

function when(v: unknown): string | undefined {
  if (!isObject(v)) return undefined;
  return str(v.dateTime) ?? str(v.date);
}

function describeCalendar(p: ParsedRequest, f: Fields): RequestDetails | null {
  const rel = p.lower.slice(2);
  if (rel[0] !== 'calendars' || rel[2] !== 'events') return null;
  const method = googleMethods(p)[0]!;
  if (method === 'GET' || method === 'HEAD') return null;
  const kind = 'calendar_event';
  f.add('Calendar', p.segments[3]);
  if (rel[3] !== undefined && rel[3] !== 'quickadd' && rel[3] !== 'import') f.add('Event', p.segments[5]);
  f.add('Guests are emailed', notifiesGuests(p.query) ? 'yes' : 'no');
  if (method === 'DELETE') return { kind, fields: f.out };
  if (rel[3] === 'quickadd') {
    f.add('Text', p.query.getAll('text'));
    return { kind, fields: f.out, unreadable: p.query.has('text') ? undefined : 'no text given' };
  }
  if (rel[4] === 'move') {
    f.add('Move to calendar', p.query.getAll('destination'));
    return { kind, fields: f.out };
  }
  const json = bodyJsonStrict(p.body, p.headers);
  if (!isObject(json)) return { kind, fields: f.out, unreadable: 'the event body is not one JSON object (or repeats a key)' };
  f.add('Title', str(json.summary));
  const start = when(json.start);
  const end = when(json.end);
  if (start !== undefined || end !== undefined) f.add('When', `${start ?? '?'} → ${end ?? '?'}`);
  f.add('Location', str(json.location));
  if (Array.isArray(json.attendees)) {
    const guests = json.attendees.map((a) => (isObject(a) ? `${str(a.email) ?? str(a.id) ?? '?'}${a.optional === true ? ' (optional)' : ''}` : '?'));
    f.add('Guests', guests.length > 0 ? guests : ['(none)']);
  } else f.add('Guests', method === 'PATCH' ? '(unchanged)' : '(none)');
  return { kind, fields: f.out };
}

// ---------------------------------------------------------------- Stripe

const ZERO_DECIMAL = new Set(['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf']);

function describeStripe(p: ParsedRequest, f: Fields): RequestDetails | null {
  if (p.method !== 'POST') return null;
  const text = bodyTextStrict(p.body, p.headers);
  if (text === undefined) return { kind: 'payment', fields: [], unreadable: 'the body is compressed or not UTF-8' };
  const form = new URLSearchParams(text);
  const amounts = form.getAll('amount');
  if (amounts.length === 0) return null;
  const currency = form.getAll('currency').join('/');
  const money = amounts.map((a) => {
    if (!/^\d{1,15}$/.test(a)) return a;
    const cur = currency.toLowerCase();
    const n = Number(a);
    return `${ZERO_DECIMAL.has(cur) ? String(n) : (n / 100).toFixed(2)} ${cur.toUpperCase() || '(no currency)'}`;
  });
  f.add('Amount', money);
  f.add('Customer', form.getAll('customer'));
  f.add('Destination', [...form.getAll('destination'), ...form.getAll('transfer_data[destination]')]);
  f.add('Description', form.getAll('description'));
  return { kind: 'payment', fields: f.out };
}

/** The details of a request a person is asked to approve; null when there is nothing more to show than its summary. */
export function describeRequest(req: ClassifyRequest, opts: { hide?: readonly string[] } = {}): RequestDetails | null {
  const p = parseRequest(req);
  const f = new Fields(opts.hide ?? []);
  if (isGoogleHost(p.host)) {
    if (gmailBase(p.lower) !== -1) return describeGmail(p, f);
    if (isCalendarPath(p.lower)) return describeCalendar(p, f);
    return null;
  }
  if (isSlackHost(p.host) && isSlackApiPath(p.lower)) return describeSlack(p, f);
  if (p.host === STRIPE_HOST) return describeStripe(p, f);
  return null;
}
