/**
 * Google Calendar API (connector `calendar`): `/calendar/v3/...` on any *.googleapis.com
 * host. Reference: https://developers.google.com/calendar/api/v3/reference
 */
import { methodRule } from './generic.js';
import { matchRows } from './rows.js';
import type { Row } from './rows.js';
import type { ParsedRequest, Verdict } from './types.js';

/**
 * An event write mails the guests when `sendUpdates` is `all` or `externalOnly`, or when
 * the deprecated `sendNotifications` is true (still honoured by Google; without this an
 * agent could send invitations under a `write` allow rule). Any one value among repeated
 * parameters is enough; values are compared case-insensitively.
 */
export function notifiesGuests(query: URLSearchParams): boolean {
  for (const v of query.getAll('sendUpdates')) {
    const s = v.trim().toLowerCase();
    if (s === 'all' || s === 'externalonly') return true;
  }
  for (const v of query.getAll('sendNotifications')) {
    const s = v.trim().toLowerCase();
    if (s !== 'false' && s !== '0' && s !== '') return true;
  }
  return false;
}

/** Paths are relative to `calendar/v3/`. */
export const CALENDAR_ROWS: readonly Row[] = [
  { rule: 'calendar.acl', methods: 'any_write', path: ['calendars', '*', 'acl', '**'], category: 'change_permission' },
  // DELETE with sendUpdates=all both deletes and mails a cancellation: delete wins
  // (DANGER_ORDER), because every matching row is considered and the most dangerous wins.
  { rule: 'calendar.events.delete', methods: 'DELETE', path: ['calendars', '*', 'events', '**'], category: 'delete' },
  { rule: 'calendar.events.send', methods: 'any_write', path: ['calendars', '*', 'events', '**'], category: 'send', when: (p) => notifiesGuests(p.query) },
  { rule: 'calendar.events.write', methods: 'any_write', path: ['calendars', '*', 'events', '**'], category: 'write' },
  // Beyond the brief's list, same meaning ("deleting ... an event"): deleting a calendar
  // and `clear` (deletes every event of the primary calendar).
  { rule: 'calendar.calendars.delete', methods: 'DELETE', path: ['calendars', '*'], category: 'delete' },
  { rule: 'calendar.calendars.clear', methods: 'any_write', path: ['calendars', '*', 'clear'], category: 'delete' },
  // freeBusy.query is a POST that only reads.
  { rule: 'calendar.freeBusy', methods: 'POST', path: ['freebusy'], category: 'read' },
];

export function isCalendarPath(lower: readonly string[]): boolean {
  return lower[0] === 'calendar' && lower[1] === 'v3';
}

export function classifyCalendar(p: ParsedRequest, method: string): Verdict {
  return matchRows(CALENDAR_ROWS, p, method, p.lower.slice(2)) ?? methodRule(method, 'calendar');
}
