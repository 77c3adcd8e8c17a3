import Joi from 'joi';
import { MAX_WEBHOOK_URL_LENGTH } from '../../webhooks/endpoints.service.js';

/**
 * PUT /v1/webhook-endpoint. Shape only (422: missing url, not a string, unknown field);
 * the URL rules (absolute http(s), length, private hosts) are values, 400, checked by
 * the service because one of them depends on GATEWAY_ALLOW_PRIVATE_UPSTREAMS.
 */
export const setWebhookEndpointSchema = Joi.object({
  url: Joi.string().max(MAX_WEBHOOK_URL_LENGTH).required(),
});

export interface SetWebhookEndpointInput {
  url: string;
}
