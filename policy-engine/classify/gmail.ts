/**
 * Gmail API (connector `gmail`): `/gmail/v1/users/{userId}/...` and the media-upload
 * form `/upload/gmail/v1/users/{userId}/...` on any *.googleapis.com host.
 * Reference: https://developers.google.com/gmail/api/reference/rest
 */
import { bodyJsonStrict, fieldKey } from './http.js';
import { methodRule } from './generic.js';
import { matchRows } from './rows.js';
import type { Row } from './rows.js';
import type { ParsedRequest, Verdict } from './types.js';

/**
 * Body conditions fail closed (issue 9, hole 5): a label change counts as trashing, and a
 * filter as forwarding, unless the body has one reading. No reading: no body, a
 * Content-Encoding, bytes that are not UTF-8, not JSON, a key repeated in any object, not
 * a JSON object (http.ts bodyJsonStrict).
 */
function bodyObject(p: ParsedRequest): Record<string, unknown> | null {
  const json = bodyJsonStrict(p.body, p.headers);
  return isObject(json) ? json : null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The values of every member whose name is a spelling of `field` (fieldKey form). */
function members(obj: Record<string, unknown>, field: string): unknown[] {
  return Object.keys(obj)
    .filter((k) => fieldKey(k) === field)
    .map((k) => obj[k]);
}

/**
 * A label list: 'trash' when a label contains TRASH (any case, anywhere: `" TRASH"` is not
 * a label we let a server trim for us), null when it is not an array of strings.
 */
function labelList(v: unknown): 'trash' | 'clean' | null {
  if (!Array.isArray(v)) return null;
  let trash = false;
  for (const l of v) {
    if (typeof l !== 'string') return null;
    if (l.toUpperCase().includes('TRASH')) trash = true;
  }
  return trash ? 'trash' : 'clean';
}

export type LabelChange = 'clean' | 'trash' | 'unreadable';

const labelCache = new WeakMap<ParsedRequest, LabelChange>();

/**
 * messages.modify, messages.batchModify, threads.modify: does the request add TRASH?
 * 'unreadable' when the body has no single reading or a member spelled like
 * `addLabelIds` / `add_label_ids` is not an array of strings. A query parameter of that
 * name naming TRASH counts too (Google maps fields to query parameters on other methods;
 * nothing is gained by trusting it not to here).
 */
export function labelChange(p: ParsedRequest): LabelChange {
  const cached = labelCache.get(p);
  if (cached !== undefined) return cached;
  let out: LabelChange = 'clean';
  for (const [k, v] of p.query) if (fieldKey(k) === 'addlabelids' && v.toUpperCase().includes('TRASH')) out = 'trash';
  const body = bodyObject(p);
  if (body === null) out = 'unreadable';
  else {
    for (const v of members(body, 'addlabelids')) {
      const l = labelList(v);
      if (l === null) {
        out = 'unreadable';
        break;
      }
      if (l === 'trash') out = 'trash';
    }
  }
  labelCache.set(p, out);
  return out;
}

export interface FilterReading {
  /** The body, an `action`, a `forward` or a label list has no single reading. */
  readonly unreadable: boolean;
  /** `action.forward` is a non-empty string: a copy of matching mail goes elsewhere. */
  readonly forwards: boolean;
  /** `action.addLabelIds` names TRASH: matching mail is trashed as it arrives. */
  readonly trashes: boolean;
}

const filterCache = new WeakMap<ParsedRequest, FilterReading>();

/**
 * settings.filters.create. A filter's action has one forwarding field, `forward` (its JSON
 * and proto names are the same word; fieldKey() catches other spellings). Unreadable: the
 * body, an `action` that is not an object (null included), a `forward` that is not a
 * string, a label list that is not an array of strings.
 */
export function filterReading(p: ParsedRequest): FilterReading {
  const cached = filterCache.get(p);
  if (cached !== undefined) return cached;
  let unreadable = false;
  let forwards = false;
  let trashes = false;
  const body = bodyObject(p);
  if (body === null) unreadable = true;
  else {
    for (const action of members(body, 'action')) {
      if (!isObject(action)) {
        unreadable = true;
        continue;
      }
      for (const fwd of members(action, 'forward')) {
        if (typeof fwd !== 'string') unreadable = true;
        else if (fwd !== '') forwards = true;
      }
      for (const labels of members(action, 'addlabelids')) {
        const l = labelList(labels);
        if (l === null) unreadable = true;
        else if (l === 'trash') trashes = true;
      }
    }
  }
  const out = { unreadable, forwards, trashes };
  filterCache.set(p, out);
  return out;
}

const addsTrash = (p: ParsedRequest): boolean => labelChange(p) === 'trash';
const labelsUnreadable = (p: ParsedRequest): boolean => labelChange(p) === 'unreadable';

/** Paths are relative to `users/{userId}/`. */
export const GMAIL_ROWS: readonly Row[] = [
  { rule: 'gmail.messages.send', methods: 'any_write', path: ['messages', 'send'], category: 'send' },
  { rule: 'gmail.drafts.send', methods: 'any_write', path: ['drafts', 'send'], category: 'send' },
  { rule: 'gmail.messages.delete', methods: 'DELETE', path: ['messages', '*'], category: 'delete' },
  { rule: 'gmail.messages.batchDelete', methods: 'any_write', path: ['messages', 'batchdelete'], category: 'delete' },
  { rule: 'gmail.messages.trash', methods: 'any_write', path: ['messages', '*', 'trash'], category: 'delete' },
  // Beyond the brief's list, same meaning ("deleting a mail"): threads and drafts.
  { rule: 'gmail.threads.delete', methods: 'DELETE', path: ['threads', '*'], category: 'delete' },
  { rule: 'gmail.threads.trash', methods: 'any_write', path: ['threads', '*', 'trash'], category: 'delete' },
  { rule: 'gmail.drafts.delete', methods: 'DELETE', path: ['drafts', '*'], category: 'delete' },
  // Adding the TRASH label is trashing by another door; a label change without a single
  // reading is taken as one (`.unreadable`, fail closed).
  { rule: 'gmail.messages.modify.trash', methods: 'any_write', path: ['messages', '*', 'modify'], category: 'delete', when: addsTrash },
  { rule: 'gmail.messages.modify.unreadable', methods: 'any_write', path: ['messages', '*', 'modify'], category: 'delete', when: labelsUnreadable },
  { rule: 'gmail.messages.batchModify.trash', methods: 'any_write', path: ['messages', 'batchmodify'], category: 'delete', when: addsTrash },
  { rule: 'gmail.messages.batchModify.unreadable', methods: 'any_write', path: ['messages', 'batchmodify'], category: 'delete', when: labelsUnreadable },
  { rule: 'gmail.threads.modify.trash', methods: 'any_write', path: ['threads', '*', 'modify'], category: 'delete', when: addsTrash },
  { rule: 'gmail.threads.modify.unreadable', methods: 'any_write', path: ['threads', '*', 'modify'], category: 'delete', when: labelsUnreadable },
  // Giving someone else the mailbox, or a copy of all future mail, is changing access.
  { rule: 'gmail.settings.delegates', methods: 'any_write', path: ['settings', 'delegates', '**'], category: 'change_permission' },
  { rule: 'gmail.settings.forwardingAddresses', methods: 'any_write', path: ['settings', 'forwardingaddresses', '**'], category: 'change_permission' },
  { rule: 'gmail.settings.autoForwarding', methods: 'any_write', path: ['settings', 'autoforwarding'], category: 'change_permission' },
  { rule: 'gmail.settings.filters.forward', methods: 'any_write', path: ['settings', 'filters'], category: 'change_permission', when: (p) => filterReading(p).forwards },
  { rule: 'gmail.settings.filters.unreadable', methods: 'any_write', path: ['settings', 'filters'], category: 'change_permission', when: (p) => filterReading(p).unreadable },
  // A filter that trashes matching mail as it arrives deletes the user's future mail (and
  // hides, say, the provider's security alerts from them).
  { rule: 'gmail.settings.filters.trash', methods: 'any_write', path: ['settings', 'filters'], category: 'delete', when: (p) => filterReading(p).trashes },
];

/** Index of the first segment after `gmail/v1` (or `upload/gmail/v1`), or -1. */
export function gmailBase(lower: readonly string[]): number {
  if (lower[0] === 'gmail' && lower[1] === 'v1') return 2;
  if (lower[0] === 'upload' && lower[1] === 'gmail' && lower[2] === 'v1') return 3;
  return -1;
}

export function isGmailPath(lower: readonly string[]): boolean {
  return gmailBase(lower) !== -1;
}

/** Whether a Gmail request's category can depend on its body. */
export function gmailNeedsBody(lower: readonly string[]): boolean {
  const base = gmailBase(lower);
  if (base === -1 || lower[base] !== 'users') return false;
  const rel = lower.slice(base + 2);
  return rel[rel.length - 1] === 'modify' || rel[1] === 'batchmodify' || (rel[0] === 'settings' && rel[1] === 'filters');
}

export function classifyGmail(p: ParsedRequest, method: string): Verdict {
  const base = gmailBase(p.lower);
  if (p.lower[base] === 'users' && p.lower.length > base + 1) {
    const hit = matchRows(GMAIL_ROWS, p, method, p.lower.slice(base + 2));
    if (hit !== null) return hit;
  }
  return methodRule(method, 'gmail');
}
