import { Router } from 'express';
import { notFound } from '../../lib/errors.js';
import type { WebhookEndpointsService } from '../../webhooks/endpoints.service.js';
import type { WebhookDeliveryService } from '../../webhooks/delivery.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { page, parsePage } from '../pagination.js';
import { validateBody } from '../validation.js';
import { listDeliveriesQuery, setWebhookEndpointSchema, type SetWebhookEndpointInput } from '../schemas/webhooks.js';

/**
 * Webhook endpoint settings (decisions.md): one endpoint per developer; and the log of
 * delivery attempts.
 */
export function webhooksRouter(deps: { endpoints: WebhookEndpointsService; deliveries: Pick<WebhookDeliveryService, 'list'> }): Router {
  const { endpoints, deliveries } = deps;
  const r = Router();

  r.get('/webhook-endpoint', async (req, res) => {
    const ep = await endpoints.get(developerOf(req).id);
    if (!ep) throw notFound();
    res.json(ep);
  });

  r.put('/webhook-endpoint', async (req, res) => {
    const { url } = validateBody<SetWebhookEndpointInput>(setWebhookEndpointSchema, requireJson(req));
    res.json(await endpoints.set(developerOf(req).id, url));
  });

  r.delete('/webhook-endpoint', async (req, res) => {
    await endpoints.remove(developerOf(req).id);
    res.status(204).end();
  });

  r.post('/webhook-endpoint/rotate', noBody, async (req, res) => {
    res.json(await endpoints.rotate(developerOf(req).id));
  });

  // ?event_id=&status=succeeded|failed&limit=&after= → {data: [attempt], next}, newest first.
  r.get('/webhook-deliveries', async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const filters = listDeliveriesQuery(req.query);
    const items = await deliveries.list(developerOf(req).id, { ...filters, limit, after });
    res.json(page(items, limit));
  });

  return r;
}
