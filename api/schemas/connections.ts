import Joi from 'joi';

/**
 * PUT /v1/oauth-clients/{provider}: shape only (422: a missing field, not a string, an
 * unknown field); empty or oversized values are 400, checked by the service.
 */
export const putOAuthClientSchema = Joi.object({
  client_id: Joi.string().allow('').required(),
  client_secret: Joi.string().allow('').required(),
});

export interface PutOAuthClientInput {
  client_id: string;
  client_secret: string;
}

/**
 * POST /v1/connections/authorize: shape only (422). Unknown connectors, a mix of
 * providers and a bad return_url are 400 (service.md), checked by the service.
 */
export const authorizeSchema = Joi.object({
  end_user_id: Joi.string().required(),
  connectors: Joi.array().items(Joi.string()).max(20).required(),
  return_url: Joi.string().required(),
});
