import Joi from 'joi';
import { hostPatterns } from './environments.js';

/**
 * PUT `/v1/environments/{id}/secrets/{name}` and `/v1/secrets/{name}`: the shape only
 * (422). The value rules of `secretRule` (non-empty value, at most 64 KiB, at least one
 * host, valid host patterns, reserved names) are checked by the service (400), which
 * needs the name from the path.
 */
export const secretPutSchema = Joi.object({
  value: Joi.string().allow('').required(),
  allowed_hosts: Joi.array().items(Joi.string()).required(),
  infrastructure: Joi.boolean(),
  inject: Joi.array().items(Joi.string()).allow(null),
  allow_minting: Joi.boolean(),
});

/** PUT `/v1/environments/{id}/egress` and `/v1/egress`: `allow: null` clears the list. */
export const egressPutSchema = Joi.object({
  allow: hostPatterns('allow').allow(null).required(),
});

/** What the gateway does with a host off an environment's allowlist (issue 26, item 3). */
export const UNKNOWN_HOSTS = ['deny', 'ask'] as const;

/**
 * PUT `/v1/environments/{id}/egress`: `allow` as for the developer default, plus
 * `unknown_hosts`. A field left out is left as it is; `allow` may be left out only when
 * `unknown_hosts` is given (`{}` is 422, as before). Another value of `unknown_hosts` is 422.
 */
export const environmentEgressPutSchema = Joi.object({
  allow: hostPatterns('allow').allow(null).when('unknown_hosts', { is: Joi.exist(), then: Joi.optional(), otherwise: Joi.required() }),
  unknown_hosts: Joi.string().valid(...UNKNOWN_HOSTS)
    .description('A host off the effective allowlist: deny (403 egress_denied, the default) or ask (held as an approval, connector egress:<host>, category connect). Left out: unchanged'),
});
