/**
 * Policy rules and their validation (service.md "Policy rule", "Policies" endpoints;
 * decisions.md "Conventions" for 422 versus 400).
 *
 * Plain TypeScript on purpose: policy-engine/ is pure (no joi). The API layer calls
 * validateRules() on the body's `rules` and maps the result to 422 `invalid_body` or
 * 400 `invalid_request`.
 *
 * Order of checks: the whole array's *shape* first (422), then the *values* (400). So a
 * body that is both mis-shaped and breaks a value rule gets 422, the answer joi at the
 * edge would give before any business rule runs.
 */
import { CATEGORIES, EFFECTS, SCOPES, isCategory, isEffect, isHighRisk, isScope } from './categories.js';
import type { Category, Effect, Scope } from './categories.js';

export interface Rule {
  /** Omitted: matches every connector. */
  readonly connector?: string;
  /** Omitted: matches every category. */
  readonly category?: Category;
  readonly effect: Effect;
  /** Only on `ask` rules. Omitted: `permanent`. */
  readonly max_scope?: Scope;
}

export const MAX_RULES = 100;
export const MAX_CONNECTOR_LENGTH = 100;

export type ValidateRulesResult =
  | { ok: true; rules: Rule[] }
  | { ok: false; status: 400 | 422; message: string };

const RULE_FIELDS: ReadonlySet<string> = new Set(['connector', 'category', 'effect', 'max_scope']);

/**
 * Connector values: the spec names `gmail`, `calendar`, `slack` and `secret:<NAME>`, but
 * its only *rules* are "non-empty, at most 100 characters". Any such string is accepted,
 * so a policy written for a connector added later (or for a secret created after the
 * policy) is valid today. A rule for a connector that does not exist simply never matches.
 * Length is counted in Unicode code points ("characters"), not UTF-16 units.
 */
export function connectorLength(connector: string): number {
  let n = 0;
  for (const _ of connector) n++;
  return n;
}

function plainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function shapeError(rule: unknown, i: number): string | null {
  const at = `rules[${i}]`;
  if (!plainObject(rule)) return `${at} must be an object`;
  for (const key of Object.keys(rule)) {
    if (!RULE_FIELDS.has(key)) return `${at}.${key} is not allowed`;
  }
  if ('connector' in rule && typeof rule.connector !== 'string') return `${at}.connector must be a string`;
  if ('category' in rule && !isCategory(rule.category)) {
    return `${at}.category must be one of ${CATEGORIES.join(', ')}`;
  }
  if (!('effect' in rule)) return `${at}.effect is required`;
  if (!isEffect(rule.effect)) return `${at}.effect must be one of ${EFFECTS.join(', ')}`;
  if ('max_scope' in rule && !isScope(rule.max_scope)) {
    return `${at}.max_scope must be one of ${SCOPES.join(', ')}`;
  }
  return null;
}

function valueError(rule: Rule, i: number): string | null {
  const at = `rules[${i}]`;
  if (rule.connector !== undefined) {
    if (rule.connector.length === 0) return `${at}.connector must not be empty`;
    if (connectorLength(rule.connector) > MAX_CONNECTOR_LENGTH) {
      return `${at}.connector must be at most ${MAX_CONNECTOR_LENGTH} characters`;
    }
  }
  if (rule.effect === 'allow' && rule.category !== undefined && isHighRisk(rule.category)) {
    return `${at} allows the high-risk category ${rule.category}; use ask`;
  }
  if (rule.max_scope !== undefined && rule.effect !== 'ask') {
    return `${at}.max_scope is only permitted when effect is ask`;
  }
  return null;
}

/**
 * Validates a policy's `rules` array. On success returns fresh rule objects holding only
 * the fields that were sent (in the order connector, category, effect, max_scope), safe
 * to store and to echo back.
 *
 * 422: not an array; a rule that is not an object; an unknown field; a wrong type; effect,
 *      category or max_scope outside its enum; a missing effect.
 * 400: more than 100 rules; an empty connector or one longer than 100 characters; an allow
 *      rule naming a high-risk category; max_scope on a rule that is not `ask`.
 */
export function validateRules(rules: unknown): ValidateRulesResult {
  if (!Array.isArray(rules)) return { ok: false, status: 422, message: 'rules must be an array' };
  for (let i = 0; i < rules.length; i++) {
    const err = shapeError(rules[i], i);
    if (err !== null) return { ok: false, status: 422, message: err };
  }
  if (rules.length > MAX_RULES) {
    return { ok: false, status: 400, message: `a policy holds at most ${MAX_RULES} rules (got ${rules.length})` };
  }
  const out: Rule[] = [];
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i] as Record<string, unknown>;
    const rule: { connector?: string; category?: Category; effect: Effect; max_scope?: Scope } = {
      ...(r.connector !== undefined ? { connector: r.connector as string } : {}),
      ...(r.category !== undefined ? { category: r.category as Category } : {}),
      effect: r.effect as Effect,
      ...(r.max_scope !== undefined ? { max_scope: r.max_scope as Scope } : {}),
    };
    const err = valueError(rule, i);
    if (err !== null) return { ok: false, status: 400, message: err };
    out.push(rule);
  }
  return { ok: true, rules: out };
}
