/**
 * Gmail API (connector `gmail`): `/gmail/v1/users/{userId}/...` and the media-upload
 * form `/upload/gmail/v1/users/{userId}/...` on any *.googleapis.com host.
 * Reference: https://developers.google.com/gmail/api/reference/rest
 */
import { bodyJsonStrict } from './http.js';
import { methodRule } from './generic.js';
import { matchRows } from './rows.js';
import type { Row } from './rows.js';
import type { ParsedRequest, Verdict } from './types.js';

/**
 * Whether a label change adds `label`, failing closed (issue 9, hole 5): a body that does
 * not parse, repeats a key, is not an object, or whose label list is not a list of strings
 * counts as adding it. Google's JSON parser also takes the proto field name, so
 * `add_label_ids` counts as much as `addLabelIds`.
 */
function labelIdsAdd(p: ParsedRequest, label: string): boolean {
  // Body not available: assume it does (fail closed; see needsBody()).
  if (p.body === undefined) return true;
  const json = bodyJsonStrict(p.body);
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return true;
  for (const key of ['addLabelIds', 'add_label_ids']) {
    if (!Object.hasOwn(json, key)) continue;
    const add = (json as Record<string, unknown>)[key];
    if (!Array.isArray(add)) return true;
    if (add.some((l) => typeof l !== 'string' || l.toUpperCase() === label)) return true;
  }
  return false;
}

/** Whether a filter forwards mail; an unreadable body (as above) counts as forwarding. */
function filterForwards(p: ParsedRequest): boolean {
  if (p.body === undefined) return true;
  const json = bodyJsonStrict(p.body);
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return true;
  if (!Object.hasOwn(json, 'action')) return false;
  const action = (json as { action?: unknown }).action;
  if (action === null) return false;
  if (typeof action !== 'object' || Array.isArray(action)) return true;
  const fwd = (action as { forward?: unknown }).forward;
  return fwd !== undefined && fwd !== null && fwd !== '';
}

const addsTrash = (p: ParsedRequest): boolean => labelIdsAdd(p, 'TRASH');

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
  // Adding the TRASH label is trashing by another door.
  { rule: 'gmail.messages.modify.trash', methods: 'any_write', path: ['messages', '*', 'modify'], category: 'delete', when: addsTrash },
  { rule: 'gmail.messages.batchModify.trash', methods: 'any_write', path: ['messages', 'batchmodify'], category: 'delete', when: addsTrash },
  { rule: 'gmail.threads.modify.trash', methods: 'any_write', path: ['threads', '*', 'modify'], category: 'delete', when: addsTrash },
  // Giving someone else the mailbox, or a copy of all future mail, is changing access.
  { rule: 'gmail.settings.delegates', methods: 'any_write', path: ['settings', 'delegates', '**'], category: 'change_permission' },
  { rule: 'gmail.settings.forwardingAddresses', methods: 'any_write', path: ['settings', 'forwardingaddresses', '**'], category: 'change_permission' },
  { rule: 'gmail.settings.autoForwarding', methods: 'any_write', path: ['settings', 'autoforwarding'], category: 'change_permission' },
  { rule: 'gmail.settings.filters.forward', methods: 'any_write', path: ['settings', 'filters'], category: 'change_permission', when: filterForwards },
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
