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
 * A mail's recipients are never cut (issue 23, item 5): the whole header block is read (up
 * to the 35 MiB Gmail accepts) or the card says it could not be shown; each address of
 * From, Reply-To, To, Cc and Bcc is an entry of its own (`addresses`), the address whole and
 * its display name bounded apart, so a long name cannot push an address off the card; past
 * MAX_ADDRESSES the card says how many more there are and that it could not show them all.
 * The caller passes the body the agent sent, before any credential was swapped in.
 */
import { isGoogleHost } from './classify/index.js';
import { bodyJsonStrict, bodyTextStrict, contentEncoded, googleMethods, hasDuplicateKeys, parseRequest } from './classify/http.js';
import { isGoogleBatchPath, parseGoogleBatch } from './classify/google-batch.js';
import { factsOf } from './request-facts.js';
import type { RequestFacts } from './facts.js';
import { gmailBase } from './classify/gmail.js';
import { isCalendarPath, notifiesGuests } from './classify/calendar.js';
import { isSlackApiPath, isSlackHost } from './classify/slack.js';
import { STRIPE_HOST } from './classify/stripe.js';
import { parseMcpBody } from './classify/mcp.js';
import type { ClassifyRequest, ParsedRequest } from './classify/types.js';
import { parseAddressList } from './address-list.js';
import { decodeEncodedWords, MAX_MESSAGE_BYTES, mimeHeaders, readHeaderBlock, rfc822Part, type HeaderBlock } from './mime-headers.js';

export { decodeEncodedWords, mimeHeaders, MAX_MESSAGE_BYTES } from './mime-headers.js';
export { parseAddressList } from './address-list.js';

/** One address of a mail's From, Reply-To, To, Cc or Bcc, as the card shows it (one a line). */
export interface DetailAddress {
  /** The address, whole: never cut (one longer than MAX_ADDRESS_CHARS makes the content unreadable instead); '' for an empty group or `<>`. */
  readonly address: string;
  /** Its display name, cut at MAX_NAME_CHARS. */
  readonly name?: string;
  /** The group it is listed under (`Team: a@x, b@x;`), cut at MAX_NAME_CHARS. */
  readonly group?: string;
  /** Why it is not a plain address (not well-formed, non-ASCII characters, an empty group). */
  readonly note?: string;
}

export interface DetailField {
  readonly label: string;
  /** The value as text; for an address field, its listed addresses, comma-separated (names are in `addresses`). */
  readonly value: string;
  /** An address field's entries, one per address, in header order (duplicate headers included). */
  readonly addresses?: readonly DetailAddress[];
  /** How many more addresses the field names than `addresses` lists (the card says so). */
  readonly more?: number;
}

export interface RequestDetails {
  /** `email`, `draft`, `slack_message`, `slack_file`, `slack_members`, `calendar_event`, `payment`. */
  readonly kind: string;
  readonly fields: readonly DetailField[];
  /** Why the content could not be shown (the card says so rather than guess). */
  readonly unreadable?: string;
}

/** A value longer than this is cut, saying how much was left out (addresses never are). */
export const MAX_DETAIL_VALUE = 500;
/** At most this many fields per request (address fields always count in). */
export const MAX_DETAIL_FIELDS = 12;
/**
 * An address longer than this makes the mail's content unreadable: no deliverable address is
 * (RFC 5321: 64 octets of local part, 255 of domain), and an address is never cut.
 */
export const MAX_ADDRESS_CHARS = 320;
/** A display name or group name is cut here (the address beside it is whole). */
export const MAX_NAME_CHARS = 80;
/** A mail's card lists at most this many addresses; past it, each field says how many more. */
export const MAX_ADDRESSES = 200;
/**
 * …and at most this many bytes of them (JSON, as stored): the details are stored in a TEXT
 * column (64 KiB on MySQL), and 200 addresses of 320 characters with 80-character names
 * would not fit. Taken round-robin over the fields, so no field is crowded out by another.
 */
export const MAX_ADDRESS_BYTES = 32 * 1024;
/** A batch's parts' fields, at most (JSON bytes): the whole card stays within the 64 KiB column. */
export const MAX_BATCH_DETAIL_BYTES = 40 * 1024;

// C0 (but tab and newline), DEL, C1, bidi embeddings/overrides/isolates, zero-width and
// other invisible formatting characters, line and paragraph separators.
// eslint-disable-next-line no-control-regex
const UNSAFE_CHARS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\ufff9-\ufffb]/g;
/** In a one-line value (an address, a name) a tab or newline would fake a line of its own; a lone surrogate is no character. */
// eslint-disable-next-line no-control-regex
const LINE_UNSAFE = /[\t\n]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function hidden(s: string, hide: readonly string[]): string {
  let v = s;
  for (const h of hide) if (h.length >= 8) v = v.split(h).join('[credential]');
  return v.replace(UNSAFE_CHARS, '\uFFFD');
}

function cut(v: string, max: number): string {
  if (v.length <= max) return v;
  const at = /[\ud800-\udbff]/.test(v[max - 1]!) ? max - 1 : max;
  return `${v.slice(0, at)}… (${v.length - at} more characters)`;
}

/** One line, whole (the caller bounds it). */
function cleanLine(s: string, hide: readonly string[]): string {
  return hidden(s, hide).replace(LINE_UNSAFE, '\uFFFD');
}

class Fields {
  readonly out: DetailField[] = [];
  /** Fields left out for MAX_DETAIL_FIELDS, and values cut at MAX_DETAIL_VALUE: the card says so (withLosses). */
  dropped = 0;
  cutValues = 0;
  constructor(readonly hide: readonly string[]) {}
  add(label: string, values: readonly string[] | string | undefined | null): void {
    const list = (typeof values === 'string' ? [values] : values ?? []).filter((v) => v !== '');
    if (list.length === 0) return;
    if (this.out.length >= MAX_DETAIL_FIELDS) {
      this.dropped++;
      return;
    }
    const whole = hidden(list.join(list.length > 1 && list.some((v) => v.includes(',')) ? ' | ' : ', '), this.hide);
    if (whole.length > MAX_DETAIL_VALUE) this.cutValues++;
    this.out.push({ label, value: cut(whole, MAX_DETAIL_VALUE) });
  }
  /** Fields of another card (a part of a batch), their labels prefixed. */
  addAll(prefix: string, fields: readonly DetailField[]): void {
    for (const field of fields) {
      if (this.out.length >= MAX_DETAIL_FIELDS && field.addresses === undefined) {
        this.dropped++;
        continue;
      }
      this.out.push({ ...field, label: `${prefix}${field.label}` });
    }
  }
  /** Address fields are never dropped for MAX_DETAIL_FIELDS (a mail has at most 7 fields). */
  addAddresses(label: string, addresses: readonly DetailAddress[], more: number): void {
    const shown = addresses.map(addressText);
    if (more > 0) shown.push(`… ${more} more not shown`);
    this.out.push({ label, value: shown.join(', '), addresses, ...(more > 0 ? { more } : {}) });
  }
}

function addressText(a: DetailAddress): string {
  return a.address !== '' ? a.address : a.group !== undefined ? `${a.group}:;` : '<>';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

// ---------------------------------------------------------------- Gmail

/** The address headers shown, in card order: who it is from, where replies go, who receives it. */
const ADDRESS_HEADERS: ReadonlyArray<readonly [string, string]> = [['from', 'From'], ['reply-to', 'Reply-To'], ['to', 'To'], ['cc', 'Cc'], ['bcc', 'Bcc']];
const RECIPIENT_LABELS = new Set(['To', 'Cc', 'Bcc']);

/**
 * Which entries of each list the card lists: round-robin (every list's first address, then
 * every list's second, ...) until MAX_ADDRESSES or MAX_ADDRESS_BYTES, so 200 harmless `To`
 * addresses cannot crowd a `Bcc` out; what is left is counted, never dropped unsaid.
 */
function allot(lists: ReadonlyArray<readonly DetailAddress[]>): number[] {
  const shown = lists.map(() => 0);
  let count = 0;
  let bytes = 0;
  for (let i = 0; ; i++) {
    let any = false;
    for (let k = 0; k < lists.length; k++) {
      const e = lists[k]![i];
      if (e === undefined) continue;
      any = true;
      const cost = Buffer.byteLength(JSON.stringify(e)) + Buffer.byteLength(addressText(e)) + 2;
      if (count >= MAX_ADDRESSES || bytes + cost > MAX_ADDRESS_BYTES) return shown;
      shown[k]!++;
      count++;
      bytes += cost;
    }
    if (!any) return shown;
  }
}

/** The card of a message given by its whole header block (or why it has none). */
function describeMessage(block: HeaderBlock, f: Fields, kind: string): RequestDetails {
  // Never a partial list: what cannot be read whole shows no recipient at all.
  if (block.error !== undefined) return { kind, fields: [], unreadable: block.error };
  const h = mimeHeaders(block.text);
  const lists: Array<{ label: string; entries: DetailAddress[] }> = [];
  for (const [name, label] of ADDRESS_HEADERS) {
    const entries: DetailAddress[] = [];
    for (const value of h.get(name) ?? []) {
      const parsed = parseAddressList(value);
      if (parsed.error !== undefined) return { kind, fields: [], unreadable: `the ${label} header is not an address list the card can read (${parsed.error})` };
      for (const a of parsed.addresses) {
        const address = cleanLine(a.address, f.hide);
        if (address.length > MAX_ADDRESS_CHARS) return { kind, fields: [], unreadable: `an address in ${label} is longer than ${MAX_ADDRESS_CHARS} characters` };
        const name = cut(cleanLine(a.name, f.hide), MAX_NAME_CHARS);
        const notes = [a.note, /[^\x20-\x7e]/.test(address) ? 'has characters outside ASCII' : undefined].filter((n): n is string => n !== undefined);
        entries.push({
          address,
          ...(name !== '' ? { name } : {}),
          ...(a.group !== undefined ? { group: cut(cleanLine(a.group, f.hide), MAX_NAME_CHARS) } : {}),
          ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
        });
      }
    }
    lists.push({ label, entries });
  }
  const shown = allot(lists.map((l) => l.entries));
  let total = 0;
  let listed = 0;
  lists.forEach((l, k) => {
    total += l.entries.length;
    listed += shown[k]!;
    if (l.entries.length > 0) f.addAddresses(l.label, l.entries.slice(0, shown[k]), l.entries.length - shown[k]!);
  });
  f.add('Subject', (h.get('subject') ?? []).map(decodeEncodedWords));
  if (!lists.some((l) => RECIPIENT_LABELS.has(l.label) && l.entries.some((e) => e.address !== ''))) f.add('Recipients', '(none in the message headers)');
  if (listed < total) return { kind, fields: f.out, unreadable: `the message names ${total} addresses; the card lists ${listed} of them` };
  return { kind, fields: f.out };
}

/**
 * A `raw` message (base64url, as Gmail reads `format: byte`): its bytes, or why not. The
 * base64 alphabets and padding only; anything else (white space, stray characters, a lone
 * trailing character) is not skipped, as a lenient decoder would, but refused.
 */
function rawMessage(raw: string): Uint8Array | string {
  if (raw.length > Math.ceil(MAX_MESSAGE_BYTES / 3) * 4) return `the message is larger than the ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB Gmail accepts`;
  if (!/^[A-Za-z0-9_\-+/]*={0,2}$/.test(raw) || raw.replace(/=+$/, '').length % 4 === 1) return 'the raw message is not base64url';
  return Buffer.from(raw, 'base64url');
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
    const bytes = bodyBytes(p);
    if (bytes === undefined) return unreadable('the message body was not read');
    if (ct.startsWith('message/rfc822')) return describeMessage(readHeaderBlock(bytes), f, kind);
    if (ct.startsWith('multipart/')) {
      const part = rfc822Part(bytes, p.contentType ?? '');
      if (part !== undefined) return 'error' in part ? unreadable(part.error) : describeMessage(readHeaderBlock(part.bytes), f, kind);
    }
    return unreadable('the upload carries no message/rfc822 part');
  }
  const json = bodyJsonStrict(p.body, p.headers);
  if (!isObject(json)) return unreadable('the body is not one JSON object');
  const raw = draft ? (isObject(json.message) ? json.message.raw : undefined) : json.raw;
  // A saved draft's id beside a message: Gmail may send the saved draft, whose recipients are not in the request.
  if (draft && typeof raw === 'string' && json.id !== undefined) {
    f.add('Draft', str(json.id) ?? '?');
    return { kind: 'draft', fields: f.out, unreadable: 'names a saved draft and a message: which one Gmail sends is not known, and the saved draft\'s recipients are not in the request' };
  }
  if (typeof raw === 'string') {
    const bytes = rawMessage(raw);
    return typeof bytes === 'string' ? unreadable(bytes) : describeMessage(readHeaderBlock(bytes), f, kind);
  }
  if (draft && typeof json.id === 'string') {
    f.add('Draft', json.id);
    return { kind: 'draft', fields: f.out, unreadable: 'sends a saved draft: its recipients and subject are not in the request' };
  }
  return unreadable('the body has no raw message');
}

function bodyBytes(p: ParsedRequest): Uint8Array | undefined {
  if (p.body === undefined) return undefined;
  return typeof p.body === 'string' ? Buffer.from(p.body, 'utf8') : p.body;
}

// ---------------------------------------------------------------- Slack

const SLACK_MESSAGE = new Set(['chat.postmessage', 'chat.postephemeral', 'chat.schedulemessage', 'chat.update', 'chat.memessage']);
const SLACK_FILE = new Set(['files.completeuploadexternal', 'files.upload', 'files.remote.share']);
const SLACK_MEMBERS = new Set(['conversations.invite', 'conversations.kick']);

/** Texts of blocks or attachments a card lists, and how deep it looks; past either the card says it could not show them all. */
const MAX_VISIBLE_TEXTS = 50;
const MAX_VISIBLE_DEPTH = 12;
const VISIBLE_KEYS = new Set(['text', 'title', 'pretext', 'fallback', 'footer', 'author_name', 'alt_text', 'value', 'url', 'image_url', 'title_link']);

/** What Slack shows of blocks or attachments: every string under a text-bearing key, and the mentions of rich text. */
interface VisibleTexts {
  texts: string[];
  /** Texts beyond MAX_VISIBLE_TEXTS, or structure deeper than MAX_VISIBLE_DEPTH. */
  lost: boolean;
}

function visibleTexts(v: unknown, out: VisibleTexts, depth = 0): void {
  if (depth > MAX_VISIBLE_DEPTH) {
    out.lost = true;
    return;
  }
  const push = (t: string): void => {
    if (t.trim() === '') return; // blank texts would fill the list and show nothing
    if (out.texts.length >= MAX_VISIBLE_TEXTS) out.lost = true;
    else out.texts.push(t);
  };
  if (Array.isArray(v)) for (const x of v) visibleTexts(x, out, depth + 1);
  else if (isObject(v)) {
    // Rich text mentions: @channel / @here / @everyone, a user, a user group, a channel.
    if (v.type === 'broadcast' && typeof v.range === 'string') push(`@${v.range}`);
    if (v.type === 'user' && typeof v.user_id === 'string') push(`@user ${v.user_id}`);
    if (v.type === 'usergroup' && typeof v.usergroup_id === 'string') push(`@group ${v.usergroup_id}`);
    if (v.type === 'channel' && typeof v.channel_id === 'string') push(`#${v.channel_id}`);
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'string' && VISIBLE_KEYS.has(k)) push(x);
      else if (typeof x === 'object') visibleTexts(x, out, depth + 1);
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
  let textsLost = false;
  const structured = (k: string): string[] => {
    const seen: VisibleTexts = { texts: [], lost: false };
    for (const v of args.get(k) ?? []) {
      let x = v;
      if (typeof v === 'string') {
        try {
          x = JSON.parse(v);
        } catch {
          seen.texts.push(v);
          continue;
        }
        // Read the one way, as the outer body is: a repeated key is two readings.
        if (hasDuplicateKeys(v, true)) textsLost = true;
      }
      visibleTexts(x, seen);
    }
    if (seen.lost) textsLost = true;
    return seen.texts;
  };
  f.add('Channel', [...all('channel'), ...all('channels'), ...all('channel_id')]);
  if (kind === 'slack_members') {
    f.add('Users', [...all('users'), ...all('user')]);
    return { kind, fields: f.out };
  }
  if (method === 'chat.postephemeral') f.add('Visible only to', all('user'));
  if (method === 'chat.update') f.add('Replaces message', all('ts'));
  f.add('In thread', all('thread_ts'));
  f.add('Also sent to the channel', all('reply_broadcast').filter((v) => v !== 'false' && v !== '0'));
  f.add('Post at', all('post_at').map((s) => (/^\d{9,11}$/.test(s) ? new Date(Number(s) * 1000).toISOString() : s)));
  // Who the post appears to be from: a name and an icon of the agent's choosing.
  f.add('Posted as', all('username'));
  f.add('Icon', [...all('icon_url'), ...all('icon_emoji')]);
  f.add('Text', all('text'));
  f.add('Markdown text', all('markdown_text'));
  f.add('Comment', all('initial_comment'));
  f.add('Title', all('title'));
  f.add('Blocks', structured('blocks'));
  f.add('Attachments', structured('attachments'));
  f.add('Files', structured('files'));
  if (textsLost) return unreadable(`its blocks or attachments hold more than the card lists (${MAX_VISIBLE_TEXTS} texts, ${MAX_VISIBLE_DEPTH} levels deep), or read more than one way`);
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
  // An event call the card knows: insert, quickAdd, import, an event's update/patch/delete, move.
  // Another (`events/watch`: notifications to an address of the agent's) is not an event edit.
  const known = rel.length === 3 || (rel.length === 4 && rel[3] !== 'watch') || (rel.length === 5 && rel[4] === 'move');
  if (!known) {
    f.add('Call', p.segments.slice(4).join('/'));
    return { kind, fields: f.out, unreadable: 'this calendar call is not one the card can show' };
  }
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
  const zone = isObject(json.start) ? str(json.start.timeZone) : undefined;
  if (start !== undefined || end !== undefined) f.add('When', `${start ?? '?'} → ${end ?? '?'}${zone ? ` (${zone})` : ''}`);
  // A series is many meetings, each inviting its guests (a fourth review: it looked like one).
  if (Array.isArray(json.recurrence)) f.add('Repeats', json.recurrence.map((r) => str(r) ?? '?'));
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
  // Stripe reads a parameter from the query string as from the body: both, every value.
  const form = new URLSearchParams(text);
  const all = (k: string): string[] => [...p.query.getAll(k), ...form.getAll(k)];
  const amounts = all('amount');
  const currency = all('currency').join('/');
  const money = amounts.map((a) => {
    if (!/^\d{1,15}$/.test(a)) return a;
    const cur = currency.toLowerCase();
    const n = Number(a);
    return `${ZERO_DECIMAL.has(cur) ? String(n) : (n / 100).toFixed(2)} ${cur.toUpperCase() || '(no currency)'}`;
  });
  const account = p.headers['stripe-account'];
  const accounts = (Array.isArray(account) ? account : account === undefined ? [] : [account]).map(String);
  const parties = [...all('customer'), ...all('destination'), ...all('transfer_data[destination]'), ...all('charge'), ...all('payment_intent')];
  if (amounts.length === 0 && accounts.length === 0 && parties.length === 0) return null;
  f.add('Amount', money.length > 0 ? money : '(none in the request: the provider\'s default, e.g. the whole charge)');
  f.add('On connected account', accounts);
  f.add('Customer', all('customer'));
  f.add('Destination', [...all('destination'), ...all('transfer_data[destination]')]);
  f.add('Charge', [...all('charge'), ...all('payment_intent')]);
  f.add('Description', all('description'));
  return { kind: 'payment', fields: f.out };
}

// ---------------------------------------------------------------- MCP (issue 28)

/** Tool calls a card lists; a batch calling more says how many it leaves out. */
export const MAX_MCP_CALLS = 4;

/** An argument's value as one line of text: a string as it is, anything else as JSON (bounded by the field). */
function argumentText(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    const j = JSON.stringify(v);
    return j === undefined ? String(v) : j.length > 4 * MAX_DETAIL_VALUE ? `${j.slice(0, 4 * MAX_DETAIL_VALUE)}…` : j;
  } catch {
    return '?';
  }
}

/**
 * The card of a held request to a registered MCP server (docs/mcp.md): the server, each
 * tool called and its arguments as `<tool>.<argument>` fields, under the same hostile-input
 * rules as every card (values cleaned and bounded, placeholders hidden, at most
 * MAX_DETAIL_FIELDS fields). A body the classifier could not read (compressed, not UTF-8, a
 * repeated key, not JSON-RPC) says so, listing what it could read, escaped.
 */
export function describeMcpRequest(req: Pick<ClassifyRequest, 'method' | 'headers' | 'body'>, opts: { server: string; hide?: readonly string[] }): RequestDetails {
  const f = new Fields(opts.hide ?? []);
  const kind = 'mcp_tool_call';
  f.add('MCP server', opts.server);
  try {
    if (req.method.toUpperCase() !== 'POST') {
      f.add('Request', `${req.method.toUpperCase()} (the server's event stream or session)`);
      return { kind, fields: f.out };
    }
    const parsed = parseMcpBody(req.body, req.headers);
    const calls = parsed.messages.filter((m) => m.method === 'tools/call');
    const others = parsed.messages.filter((m) => m.method !== 'tools/call').map((m) => m.method || '(a response)');
    let omitted = 0;
    calls.forEach((m, i) => {
      if (i >= MAX_MCP_CALLS) {
        omitted++;
        return;
      }
      const tool = m.tool ?? '(no tool name)';
      f.add('Tool', tool);
      const args = m.arguments;
      if (isObject(args)) {
        for (const [k, v] of Object.entries(args)) {
          f.add(cut(`${cleanLine(tool, f.hide)}.${cleanLine(k, f.hide)}`, MAX_NAME_CHARS), argumentText(v) === '' ? '""' : argumentText(v));
        }
      } else if (args !== undefined) f.add(`${tool}: arguments`, argumentText(args));
    });
    if (others.length > 0) f.add('Also in the request', others);
    if (!parsed.ok) return { kind, fields: f.out, unreadable: `the request could not be read as MCP (${parsed.why}): it is treated as the riskiest kind of call` };
    omitted += f.dropped;
    if (omitted > 0) return { kind, fields: f.out, unreadable: `the card leaves out ${omitted} tool call(s), argument(s) or other part(s); the request is judged by all of them` };
    return withLosses({ kind, fields: f.out }, f);
  } catch {
    return { kind, fields: f.out, unreadable: 'the request could not be decoded' };
  }
}

/**
 * The details of a request a person is asked to approve; null when there is nothing more to
 * show than its summary. Never throws: a request whose decoding fails says it could not be
 * shown (a card with no details and no warning would hide what it does).
 */
export function describeRequest(req: ClassifyRequest, opts: { hide?: readonly string[] } = {}): RequestDetails | null {
  try {
    const f = new Fields(opts.hide ?? []);
    const d = describeOne(req, f, true);
    return d === null ? null : withLosses(crossChecked(d, req), f);
  } catch {
    return { kind: 'request', fields: [], unreadable: 'the request could not be decoded' };
  }
}

function describeOne(req: ClassifyRequest, f: Fields, outer: boolean): RequestDetails | null {
  const p = parseRequest(req);
  if (isGoogleHost(p.host)) {
    if (outer && isGoogleBatchPath(p.lower)) return describeGoogleBatch(req, p, f);
    if (gmailBase(p.lower) !== -1) return describeGmail(p, f);
    if (isCalendarPath(p.lower)) return describeCalendar(p, f);
    return null;
  }
  if (isSlackHost(p.host) && isSlackApiPath(p.lower)) return describeSlack(p, f);
  if (p.host === STRIPE_HOST) return describeStripe(p, f);
  return null;
}

/**
 * A Google batch: each inner request as the classifier reads it (its method and path), with
 * its own card's fields under `n: `. A batch the classifier cannot split, or a part whose
 * card could not be shown, makes the card unreadable: a Gmail send in a batch showed nothing.
 */
function describeGoogleBatch(req: ClassifyRequest, p: ParsedRequest, f: Fields): RequestDetails {
  const kind = 'batch';
  const batch = parseGoogleBatch(p.contentType, p.body, p.host);
  if (!batch.ok) return { kind, fields: f.out, unreadable: `the batch could not be split into its requests (${batch.why})` };
  const unread: string[] = [];
  let bytes = 0;
  let unshown = 0;
  batch.parts.forEach((part, i) => {
    const n = i + 1;
    f.add(`${n}: Request`, `${part.method.toUpperCase()} ${part.host}${part.path.split('?')[0]}`);
    const inner = new Fields(f.hide);
    const d = describeOne(part, inner, false);
    if (d === null) return;
    const checked = withLosses(crossChecked(d, part), inner);
    // The details are stored in a TEXT column (64 KiB on MySQL): each part's card is up to
    // MAX_ADDRESS_BYTES of addresses, so past MAX_BATCH_DETAIL_BYTES a part's fields are left out, said so.
    const size = Buffer.byteLength(JSON.stringify(checked.fields));
    if (bytes + size > MAX_BATCH_DETAIL_BYTES) {
      unshown++;
      return;
    }
    bytes += size;
    f.addAll(`${n}: `, checked.fields);
    if (checked.unreadable !== undefined) unread.push(`request ${n}: ${checked.unreadable}`);
  });
  if (unshown > 0) unread.push(`the card leaves out the content of ${unshown} of the batch's ${batch.parts.length} requests`);
  const why = unread.length > 4 ? `${unread.slice(0, 4).join('; ')}; and ${unread.length - 4} more` : unread.join('; ');
  return unread.length > 0 ? { kind, fields: f.out, unreadable: why } : { kind, fields: f.out };
}

/** Fields whose value is a fact the policy reads (request-facts.ts). */
const FACT_LABELS: Readonly<Record<keyof RequestFacts, readonly string[]>> = {
  amount: ['Amount'],
  recipients: ['To', 'Cc', 'Bcc', 'Guests'],
  channel: ['Channel'],
};

/**
 * The card against the policy's own reading (request-facts.ts): where the decoder finds a
 * value the card shows unreadable (two spellings of a key a lenient parser folds together,
 * `raw` and `RAW`, `channel` and ` channel`), the card says so rather than show one reading.
 */
function crossChecked(d: RequestDetails, req: ClassifyRequest): RequestDetails {
  if (d.unreadable !== undefined) return d;
  const facts = factsOf(req, '');
  for (const [fact, labels] of Object.entries(FACT_LABELS) as Array<[keyof RequestFacts, readonly string[]]>) {
    if (facts[fact] === null && d.fields.some((x) => labels.includes(x.label))) {
      return { ...d, unreadable: `the policy could not read its ${fact} (more than one way to read it, or more than it reads): what it does may differ from what is shown` };
    }
  }
  return d;
}

/** A readable card that left fields out or cut a value says so. */
function withLosses(d: RequestDetails, f: Fields): RequestDetails {
  if (d.unreadable !== undefined || (f.dropped === 0 && f.cutValues === 0)) return d;
  const parts = [
    ...(f.dropped > 0 ? [`leaves out ${f.dropped} field(s)`] : []),
    ...(f.cutValues > 0 ? [`cuts ${f.cutValues} value(s) longer than ${MAX_DETAIL_VALUE} characters`] : []),
  ];
  return { ...d, unreadable: `the card ${parts.join(' and ')}: the request is judged by all of it` };
}
