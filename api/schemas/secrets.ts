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
