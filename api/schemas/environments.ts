import Joi from 'joi';
import {
  envRule, filesRule, hostPatternsRule, idleRule, secretsRule, LIMITS, RESOURCE_DEFAULTS, TEMPLATE_REF,
} from '../../environments/rules.js';

/** A joi custom check from a rule function: the rule's message becomes a 400. */
function rule<T>(fn: (v: T) => string | null) {
  return (value: T, helpers: Joi.CustomHelpers) => {
    const msg = fn(value);
    return msg ? helpers.message({ custom: msg }) : value;
  };
}

const idle = (name: string) => Joi.number().integer().custom(rule((v: number) => idleRule(name, v)));

export const resourcesSchema = Joi.object({
  cpus: Joi.number().integer().min(1).max(8),
  memory_mib: Joi.number().integer().min(512).max(16384),
  base_memory_mib: Joi.number().integer().min(256).max(16384),
  disk_gib: Joi.number().integer().min(1).max(200),
}).custom(rule((r: { memory_mib?: number; base_memory_mib?: number }) => {
  const memory = r.memory_mib ?? RESOURCE_DEFAULTS.memory_mib;
  if (r.base_memory_mib !== undefined && r.base_memory_mib > memory) return `base_memory_mib must be at most memory_mib (${memory})`;
  return null;
}));

/** PATCH /v1/environments/{id}/resources: the same ranges; base_memory_mib is checked against the environment's memory_mib by the service. */
export const resourcesUpdateSchema = Joi.object({
  cpus: Joi.number().integer().min(1).max(8),
  memory_mib: Joi.number().integer().min(512).max(16384),
  base_memory_mib: Joi.number().integer().min(256).max(16384),
  disk_gib: Joi.number().integer().min(1).max(200),
});

export const idleSchema = Joi.object({
  suspend_after_secs: idle('suspend_after_secs'),
  stop_after_secs: idle('stop_after_secs'),
});

const fileValue = Joi.alternatives().try(
  Joi.string().allow(''),
  Joi.object({ content: Joi.string().allow('').required(), encoding: Joi.string().valid('utf8', 'base64') }),
);

export const envMapSchema = Joi.object().pattern(/.*/, Joi.string().allow('')).custom(rule(envRule));
export const filesMapSchema = Joi.object().pattern(/.*/, fileValue).custom(rule(filesRule));

export const secretCreateSchema = Joi.object({
  value: Joi.string().allow('').required(),
  allowed_hosts: Joi.array().items(Joi.string()).required(),
  infrastructure: Joi.boolean(),
  inject: Joi.array().items(Joi.string()).allow(null),
  allow_minting: Joi.boolean(),
});

export const hostPatterns = (what: string) => Joi.array().items(Joi.string()).custom(rule((v: string[]) => hostPatternsRule(v, what)));

export const createEnvironmentSchema = Joi.object({
  end_user_id: Joi.string().min(1).max(LIMITS.endUserId).required(),
  agent_version: Joi.string().min(1).max(200).allow(null),
  resources: resourcesSchema,
  idle: idleSchema,
  env: envMapSchema,
  files: filesMapSchema,
  secrets: Joi.object().pattern(/.*/, secretCreateSchema).custom(rule(secretsRule)),
  egress_allow: hostPatterns('egress_allow'),
  template: Joi.string().pattern(TEMPLATE_REF).allow(null).messages({ 'string.pattern.base': 'template must be name:version' }),
}).custom(rule((b: { env?: Record<string, string>; secrets?: Record<string, unknown> }) => {
  for (const name of Object.keys(b.secrets ?? {})) {
    if (b.env && name in b.env) return `"${name}" is both an environment variable and a secret`;
  }
  return null;
}));

export const configSchema = Joi.object({
  env: envMapSchema,
  files: filesMapSchema,
});

export const keepAwakeSchema = Joi.object({
  seconds: Joi.number().integer().min(1).max(86400).required(),
});

export const wakeupSchema = Joi.object({
  at: Joi.string().required(),
  reason: Joi.string().max(500).allow('', null),
});

export const agentSettingsSchema = Joi.object({
  scheduling: Joi.boolean(),
  max_schedules: Joi.number().integer().min(0).max(1000),
  min_interval_secs: Joi.number().integer().min(60).max(86400),
  keep_awake_max_secs: Joi.number().integer().min(0).max(86400),
  keep_awake_daily_secs: Joi.number().integer().min(0).max(86400),
});

export const templateSchema = Joi.object({
  name: Joi.string().pattern(/^[a-z0-9][a-z0-9._-]{0,99}$/).required(),
  version: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/).required(),
});

export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * POST /v1/environments/batch, for the OpenAPI document: the route checks the envelope by
 * hand (422 for each shape problem) and each item with createEnvironmentSchema.
 */
export const batchCreateSchema = Joi.object({
  environments: Joi.array().items(createEnvironmentSchema).min(1).max(200).required(),
});
