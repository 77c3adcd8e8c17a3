import Joi from 'joi';
import { CATEGORIES, MAX_CONNECTOR_LENGTH, MAX_RULES, validateRules, type Rule } from '../../policy-engine/index.js';
import { policyRuleRecord } from './records.js';
import { ServiceError } from '../../lib/errors.js';
import type { PolicyCheckInput } from '../../policies/policies.service.js';

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
});

/**
 * `{rules: [...]}` for the OpenAPI document. parsePolicyBody above checks it (the policy
 * engine's validateRules, which joi may not be imported into); this says the same shape.
 */
export const policyBodySchema = Joi.object({
  rules: Joi.array().items(policyRuleRecord).max(MAX_RULES).required(),
});
