import Joi from 'joi';
import { ServiceError } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../../webhooks/endpoints.service.js';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../../webhooks/deliveries.store.js';
import { optionalString } from '../pagination.js';

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

/** Query of GET /v1/webhook-deliveries; every problem is 400 invalid_request. */
export interface ListDeliveriesQuery {
  eventId?: string;
  status?: DeliveryStatus;
}

export function listDeliveriesQuery(query: Record<string, unknown>): ListDeliveriesQuery {
  const out: ListDeliveriesQuery = {};
  const eventId = optionalString(query, 'event_id');
  if (eventId !== undefined && eventId !== '') {
    if (!isId('evt', eventId)) throw new ServiceError('invalid_request', 'event_id must be an event id (evt_<24 hex>)');
    out.eventId = eventId;
  }
  const status = optionalString(query, 'status');
  if (status !== undefined && status !== '') {
    if (!DELIVERY_STATUSES.includes(status as DeliveryStatus)) {
      throw new ServiceError('invalid_request', `status must be one of ${DELIVERY_STATUSES.join(', ')}`);
    }
    out.status = status as DeliveryStatus;
  }
  return out;
}
