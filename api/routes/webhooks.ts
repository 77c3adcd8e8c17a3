import { Router } from 'express';
import { notFound } from '../../lib/errors.js';
import type { WebhookEndpointsService } from '../../webhooks/endpoints.service.js';
import type { WebhookDeliveryService } from '../../webhooks/delivery.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { page, parsePage } from '../pagination.js';
import { validateBody } from '../validation.js';
import { listDeliveriesQuery, setWebhookEndpointSchema, type SetWebhookEndpointInput } from '../schemas/webhooks.js';
import { describeRoute } from '../openapi/route-spec.js';
import Joi from 'joi';
import { pageQuery } from '../schemas/common.js';
import { deliveryPage, webhookEndpointRecord, webhookRotationRecord } from '../schemas/records.js';

/**
 * Webhook endpoint settings (decisions.md): one endpoint per developer; and the log of
 * delivery attempts.
 */
export function webhooksRouter(deps: { endpoints: WebhookEndpointsService; deliveries: Pick<WebhookDeliveryService, 'list'> }): Router {
  const { endpoints, deliveries } = deps;
  const r = Router();

  r.get('/webhook-endpoint', describeRoute({ summary: 'The webhook endpoint (404 when none is set)', responses: { 200: webhookEndpointRecord }, errors: ['not_found'] }), async (req, res) => {
    const ep = await endpoints.get(developerOf(req).id);
    if (!ep) throw notFound();
    res.json(ep);
  });

  r.put('/webhook-endpoint', describeRoute({ summary: 'Set the webhook URL (the first set answers the signing secret, once)', body: setWebhookEndpointSchema, responses: { 200: webhookEndpointRecord } }), async (req, res) => {
    const { url } = validateBody<SetWebhookEndpointInput>(setWebhookEndpointSchema, requireJson(req));
    res.json(await endpoints.set(developerOf(req).id, url));
  });

  r.delete('/webhook-endpoint', describeRoute({ summary: 'Remove the webhook endpoint', responses: { 204: null } }), async (req, res) => {
    await endpoints.remove(developerOf(req).id);
    res.status(204).end();
  });

  r.post('/webhook-endpoint/rotate', noBody, describeRoute({ summary: 'Rotate the signing secret (the old one signs for 24 more hours)', responses: { 200: webhookRotationRecord }, errors: ['not_found'] }), async (req, res) => {
    res.json(await endpoints.rotate(developerOf(req).id));
  });

  // ?event_id=&status=succeeded|failed&limit=&after= → {data: [attempt], next}, newest first.
  r.get('/webhook-deliveries', describeRoute({
    summary: 'Delivery attempts, newest first',
    query: pageQuery.keys({
      event_id: Joi.string().description('Only this event\'s (evt_<24 hex>)'),
      status: Joi.string().valid('succeeded', 'failed'),
    }),
    responses: { 200: deliveryPage },
  }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const filters = listDeliveriesQuery(req.query);
    const items = await deliveries.list(developerOf(req).id, { ...filters, limit, after });
    res.json(page(items, limit));
  });

  return r;
}
