import Joi from 'joi';
import { CATEGORIES, MAX_CONNECTOR_LENGTH, MAX_RULES, validateRules, type Rule } from '../../policy-engine/index.js';
import { policyRuleRecord } from './records.js';
import { ServiceError } from '../../lib/errors.js';
import type { PolicyCheckInput, PolicySimulateInput } from '../../policies/policies.service.js';
import { SIMULATE_DEFAULT_LIMIT, SIMULATE_MAX_LIMIT } from '../../policies/simulate.js';
import { check } from '../validation.js';

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * `{rules: [...]}`: the envelope's shape is 422 `invalid_body` (not an object, an unknown
 * top-level field, rules missing); the rules themselves are policy-engine validateRules:
 * its 422 is `invalid_body`, its 400 `invalid_request` (service.md: a policy set with an
 * invalid rule returns 400; an unknown field or misspelled effect 422).
 */
export function parsePolicyBody(body: unknown): Rule[] {
  if (body === undefined) throw new ServiceError('invalid_body', 'a JSON body {rules: [...]} is required');
  if (!isPlainObject(body)) throw new ServiceError('invalid_body', 'the body must be an object {rules: [...]}');
  for (const k of Object.keys(body)) {
    if (k !== 'rules') throw new ServiceError('invalid_body', `${k} is not allowed; the body is {rules: [...]}`);
  }
  if (!('rules' in body)) throw new ServiceError('invalid_body', 'rules is required');
  const out = validateRules(body.rules);
  if (!out.ok) throw new ServiceError(out.status === 422 ? 'invalid_body' : 'invalid_request', out.message);
  return out.rules;
}

/** Task and session ids as the agent's headers carry them; empty or null means none. */
const tag = Joi.string().max(255).allow('', null);

export const policyCheckSchema = Joi.object<PolicyCheckInput>({
  connector: Joi.string().min(1).max(MAX_CONNECTOR_LENGTH).required(),
  category: Joi.string().valid(...CATEGORIES).required(),
  task_id: tag,
  session_id: tag,
  // Decoded fields to test rule conditions with (issue 26); left out: could not be read.
  amount: Joi.object({
    currency: Joi.string().pattern(/^[A-Za-z]{3}$/).required().description('ISO 4217, e.g. usd'),
    minor_units: Joi.number().integer().min(0).max(Number.MAX_SAFE_INTEGER).required().description('In the currency\'s minor units (cents), as Stripe sends amount'),
  }).allow(null).description('The request\'s amount, as the gateway decodes it from a payment'),
  recipients: Joi.array().items(Joi.string().min(1).max(320)).max(1000).allow(null).description('Mail recipients (To, Cc, Bcc) or calendar guests'),
  channel: Joi.string().min(1).max(255).allow(null).description('The Slack channel id'),
  tool: Joi.string().pattern(/^[A-Za-z0-9_./-]{1,128}$/).description('An MCP tool the request calls (issue 28): rules naming a tool match only it'),
});

/**
 * `{rules: [...]}` for the OpenAPI document. parsePolicyBody above checks it (the policy
 * engine's validateRules, which joi may not be imported into); this says the same shape.
 */
export const policyBodySchema = Joi.object({
  rules: Joi.array().items(policyRuleRecord).max(MAX_RULES).required(),
});

/**
 * POST /v1/policy/simulate (issue 26; docs/policies-approvals.md "Simulation"):
 * `{rules, environment_id?, since?, limit?}`. `since` is RFC 3339 (as every timestamp of
 * the API) or Unix seconds (a number of 10^11 or more is taken as milliseconds).
 */
export const policySimulateSchema = Joi.object({
  rules: Joi.array().items(policyRuleRecord).max(MAX_RULES).required().description('The draft, as PUT /v1/policy takes it'),
  environment_id: Joi.string().max(255).allow(null).description('Only this environment\'s requests (404 for one that is not the caller\'s); omitted: all of the caller\'s'),
  since: Joi.alternatives().try(Joi.string().isoDate(), Joi.number().integer().min(0)).allow(null)
    .description('Only requests recorded at or after this: RFC 3339, or Unix seconds'),
  limit: Joi.number().integer().min(1).max(SIMULATE_MAX_LIMIT).description(`The newest this many recorded requests that reached the policy; default ${SIMULATE_DEFAULT_LIMIT}`),
});

/** The rest of the body, checked by joi; `rules` by validateRules (below). */
const simulateRestSchema = policySimulateSchema.keys({ rules: Joi.any().required() });

/** Unix seconds below this, milliseconds from it (10^11 s is the year 5138). */
const MS_FROM = 1e11;

/**
 * The simulate body. 422 `invalid_body` for any shape error (the body, its fields, the
 * rules as validateRules says), then 400 `invalid_request` for values (the rules' 400s, a
 * limit outside 1..10,000, a `since` that is not RFC 3339): when both occur, 422 wins.
 */
export function parsePolicySimulateBody(body: unknown): PolicySimulateInput {
  if (body === undefined) throw new ServiceError('invalid_body', 'a JSON body {rules: [...]} is required');
  if (!isPlainObject(body)) throw new ServiceError('invalid_body', 'the body must be an object {rules: [...], environment_id?, since?, limit?}');
  const rest = check<{ environment_id?: string | null; since?: string | number | null; limit?: number }>(simulateRestSchema, body);
  if (rest.error?.code === 'invalid_body') throw rest.error;
  const rules = validateRules(body.rules);
  if (!rules.ok) throw new ServiceError(rules.status === 422 ? 'invalid_body' : 'invalid_request', rules.message);
  if (rest.error) throw rest.error;
  const v = rest.value!;
  let sinceMs: number | null = null;
  if (typeof v.since === 'string') sinceMs = Date.parse(v.since);
  else if (typeof v.since === 'number') sinceMs = v.since >= MS_FROM ? v.since : v.since * 1000;
  if (sinceMs !== null && !Number.isFinite(sinceMs)) throw new ServiceError('invalid_request', 'since must be an RFC 3339 timestamp or Unix seconds');
  return {
    rules: rules.rules,
    environment_id: v.environment_id ?? null,
    sinceMs,
    limit: v.limit ?? SIMULATE_DEFAULT_LIMIT,
  };
}
