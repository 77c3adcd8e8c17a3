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
import { COUNT_SCOPES, COUNT_WINDOWS, type Conditions, type CountOver } from './conditions.js';
import type { Money } from './facts.js';
import { TOOL_NAME } from './classify/mcp.js';

export interface Rule {
  /** Omitted: matches every connector. */
  readonly connector?: string;
  /** Omitted: matches every category. */
  readonly category?: Category;
  readonly effect: Effect;
  /** Only on `ask` rules. Omitted: `permanent`. */
  readonly max_scope?: Scope;
  /**
   * Conditions (issue 26): the rule matches only when every one holds as well. What cannot
   * be read takes the riskier reading (policy-engine/conditions.ts).
   */
  readonly when?: Conditions;
  /**
   * An MCP tool (issue 28, docs/mcp.md): the rule matches only requests calling exactly this
   * tool (a batch calling several tools matches no rule with `tool`). Omitted: any.
   */
  readonly tool?: string;
}

export const MAX_RULES = 100;
/** Entries of recipients_outside or channels_outside. */
export const MAX_CONDITION_LIST = 100;
/** count_over.max (a day of one request a second is 86,400). */
export const MAX_COUNT = 1_000_000;
export const MAX_CONNECTOR_LENGTH = 100;

export type ValidateRulesResult =
  | { ok: true; rules: Rule[] }
  | { ok: false; status: 400 | 422; message: string };

const RULE_FIELDS: ReadonlySet<string> = new Set(['connector', 'category', 'effect', 'max_scope', 'when', 'tool']);
const WHEN_FIELDS: ReadonlySet<string> = new Set(['amount_over', 'recipients_outside', 'channels_outside', 'count_over']);
const AMOUNT_FIELDS: ReadonlySet<string> = new Set(['currency', 'minor_units']);
const COUNT_FIELDS: ReadonlySet<string> = new Set(['max', 'per', 'scope']);

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
  if ('tool' in rule && typeof rule.tool !== 'string') return `${at}.tool must be a string`;
  if ('when' in rule) return whenShapeError(rule.when, `${at}.when`);
  return null;
}

function unknownKey(o: Record<string, unknown>, allowed: ReadonlySet<string>, at: string): string | null {
  for (const key of Object.keys(o)) if (!allowed.has(key)) return `${at}.${key} is not allowed`;
  return null;
}

function stringList(v: unknown, at: string): string | null {
  if (!Array.isArray(v)) return `${at} must be an array of strings`;
  for (const x of v) if (typeof x !== 'string') return `${at} must be an array of strings`;
  return null;
}

/** 422: the shape of `when` (unknown keys, wrong types, values outside an enum). */
function whenShapeError(when: unknown, at: string): string | null {
  if (!plainObject(when)) return `${at} must be an object`;
  const unknown = unknownKey(when, WHEN_FIELDS, at);
  if (unknown) return unknown;
  if ('amount_over' in when) {
    const a = when.amount_over;
    if (!plainObject(a)) return `${at}.amount_over must be an object {currency, minor_units}`;
    const k = unknownKey(a, AMOUNT_FIELDS, `${at}.amount_over`);
    if (k) return k;
    if (typeof a.currency !== 'string') return `${at}.amount_over.currency must be a string`;
    if (typeof a.minor_units !== 'number' || !Number.isInteger(a.minor_units)) return `${at}.amount_over.minor_units must be an integer`;
  }
  if ('recipients_outside' in when) {
    const e = stringList(when.recipients_outside, `${at}.recipients_outside`);
    if (e) return e;
  }
  if ('channels_outside' in when) {
    const e = stringList(when.channels_outside, `${at}.channels_outside`);
    if (e) return e;
  }
  if ('count_over' in when) {
    const c = when.count_over;
    if (!plainObject(c)) return `${at}.count_over must be an object {max, per, scope}`;
    const k = unknownKey(c, COUNT_FIELDS, `${at}.count_over`);
    if (k) return k;
    if (typeof c.max !== 'number' || !Number.isInteger(c.max)) return `${at}.count_over.max must be an integer`;
    if (!(COUNT_WINDOWS as readonly unknown[]).includes(c.per)) return `${at}.count_over.per must be one of ${COUNT_WINDOWS.join(', ')}`;
    if ('scope' in c && !(COUNT_SCOPES as readonly unknown[]).includes(c.scope)) return `${at}.count_over.scope must be one of ${COUNT_SCOPES.join(', ')}`;
  }
  return null;
}

/** A domain as recipients_outside takes it: lower-case, no leading or trailing dot, no `@`. */
const DOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * 400: the values of `when`; on success the normalised conditions (currency lower-case,
 * domains lower-case), in a fixed key order.
 */
function whenValues(when: Record<string, unknown>, at: string): { error: string } | { when: Conditions } {
  const out: { amount_over?: Money; recipients_outside?: string[]; channels_outside?: string[]; count_over?: CountOver } = {};
  if (when.amount_over !== undefined) {
    const a = when.amount_over as { currency: string; minor_units: number };
    if (!/^[A-Za-z]{3}$/.test(a.currency)) return { error: `${at}.amount_over.currency must be a three-letter ISO 4217 code (usd)` };
    if (a.minor_units < 0 || !Number.isSafeInteger(a.minor_units)) return { error: `${at}.amount_over.minor_units must be a whole number of minor units, 0 or more` };
    out.amount_over = { currency: a.currency.toLowerCase(), minor_units: a.minor_units };
  }
  if (when.recipients_outside !== undefined) {
    const list = when.recipients_outside as string[];
    if (list.length === 0 || list.length > MAX_CONDITION_LIST) return { error: `${at}.recipients_outside must list 1 to ${MAX_CONDITION_LIST} domains` };
    const domains: string[] = [];
    for (const d of list) {
      const n = d.trim().toLowerCase();
      if (!DOMAIN.test(n)) return { error: `${at}.recipients_outside: ${JSON.stringify(d)} is not a domain (acme.com; subdomains are included)` };
      domains.push(n);
    }
    out.recipients_outside = domains;
  }
  if (when.channels_outside !== undefined) {
    const list = when.channels_outside as string[];
    if (list.length === 0 || list.length > MAX_CONDITION_LIST) return { error: `${at}.channels_outside must list 1 to ${MAX_CONDITION_LIST} channels` };
    for (const c of list) {
      if (c.length === 0 || c.length > 255 || /[\s,]/.test(c)) return { error: `${at}.channels_outside: ${JSON.stringify(c)} is not a channel id (C0123ABCD)` };
    }
    out.channels_outside = [...list];
  }
  if (when.count_over !== undefined) {
    const c = when.count_over as { max: number; per: CountOver['per']; scope?: CountOver['scope'] };
    if (c.max < 0 || c.max > MAX_COUNT) return { error: `${at}.count_over.max must be 0 to ${MAX_COUNT}` };
    out.count_over = { max: c.max, per: c.per, ...(c.scope !== undefined ? { scope: c.scope } : {}) };
  }
  // An allow rule's conditions only narrow what it already allows: valueError (run first)
  // refuses an allow rule naming a high-risk category, with or without `when`.
  return { when: out };
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
  if (rule.tool !== undefined && !TOOL_NAME.test(rule.tool)) {
    return `${at}.tool must be an MCP tool name: 1 to 128 of A-Z a-z 0-9 _ - . /`;
  }
  return null;
}

/**
 * Validates a policy's `rules` array. On success returns fresh rule objects holding only
 * the fields that were sent (in the order connector, category, effect, max_scope), safe
 * to store and to echo back.
 *
 * 422: not an array; a rule that is not an object; an unknown field; a wrong type; effect,
 *      category or max_scope outside its enum; a missing effect; in `when`: an unknown
 *      condition or field, a wrong type, `per` or `scope` outside its enum.
 * 400: more than 100 rules; an empty connector or one longer than 100 characters; an allow
 *      rule naming a high-risk category; max_scope on a rule that is not `ask`; in `when`:
 *      a currency that is not three letters, a negative or unsafe amount, an empty or too
 *      long list, a domain or channel that is not one, count_over.max outside 0..1,000,000.
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
    const rule: { connector?: string; category?: Category; effect: Effect; max_scope?: Scope; when?: Conditions; tool?: string } = {
      ...(r.connector !== undefined ? { connector: r.connector as string } : {}),
      ...(r.category !== undefined ? { category: r.category as Category } : {}),
      effect: r.effect as Effect,
      ...(r.max_scope !== undefined ? { max_scope: r.max_scope as Scope } : {}),
    };
    if (r.tool !== undefined) rule.tool = r.tool as string;
    const err = valueError(rule, i);
    if (err !== null) return { ok: false, status: 400, message: err };
    if (r.when !== undefined) {
      const w = whenValues(r.when as Record<string, unknown>, `rules[${i}].when`);
      if ('error' in w) return { ok: false, status: 400, message: w.error };
      rule.when = w.when;
    }
    out.push(rule);
  }
  return { ok: true, rules: out };
}
