import { randomBytes } from 'node:crypto';

export const ID_PREFIXES = [
  'env', 'apr', 'grt', 'evt', 'conn', 'wak', 'bpr', 'bls', 'key', 'sec', 'aud', 'dlv',
  'dev', 'tpl', 'sch',
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

/** `<prefix>_<24 lowercase hex>` (decisions.md, Conventions). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

export function isId(prefix: IdPrefix, value: unknown): value is string {
  return typeof value === 'string' && new RegExp(`^${prefix}_[0-9a-f]{24}$`).test(value);
}
