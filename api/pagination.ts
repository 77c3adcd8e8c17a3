import { ServiceError } from '../lib/errors.js';

export interface PageParams {
  limit: number;
  after: string | null;
}

/**
 * `limit` is clamped to 1..200 without an error (spec); a limit that is not an integer
 * at all is an unparsable query: 400 `invalid_request`.
 */
export function parseLimit(raw: unknown, defaultLimit = 50): number {
  if (raw === undefined || raw === '') return defaultLimit;
  if (typeof raw !== 'string' || !/^[+-]?\d{1,15}$/.test(raw.trim())) {
    throw new ServiceError('invalid_request', 'limit must be an integer');
  }
  return Math.min(200, Math.max(1, Number(raw)));
}

export function parsePage(query: Record<string, unknown>, defaultLimit = 50): PageParams {
  const after = query.after;
  if (after !== undefined && typeof after !== 'string') throw new ServiceError('invalid_request', 'after must be a string');
  return { limit: parseLimit(query.limit, defaultLimit), after: after === undefined || after === '' ? null : after };
}

/** `{data, next}` with `next` the id of the last item when more items follow. */
export function page<T extends { id: string }>(items: T[], limit: number): { data: T[]; next: string | null } {
  const more = items.length > limit;
  const data = more ? items.slice(0, limit) : items;
  return { data, next: more ? data[data.length - 1]!.id : null };
}

export function optionalString(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalid_request', `${name} must be a single string`);
  return v;
}
