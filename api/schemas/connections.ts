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
