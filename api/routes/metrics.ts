import { Router } from 'express';
import type { AccountsService } from '../../accounts/accounts.service.js';
import { apiKeyAuth } from '../middleware/auth.js';
import { describeRoute } from '../openapi/route-spec.js';

/**
 * GET /metrics (issue 25, item 2): Prometheus text format, for a scraper holding an API key
 * (`Authorization: Bearer sk_...`; 401 `unauthorized` JSON without one, like every route of
 * the API). Mounted at the root (createApp's rootRouters, before the /v1 key check), so it
 * checks the key itself. The exposition comes from the metrics adapter bin/ wires in
 * (metrics/prometheus.ts); this route knows nothing of how it is made. Every developer's key
 * sees the same numbers: the metrics are the service's, and carry no ids of anyone's.
 */
export function metricsRouter(deps: { accounts: AccountsService; scrape: () => Promise<{ contentType: string; body: string }> }): Router {
  const r = Router();
  r.get('/metrics', describeRoute({
    summary: 'Prometheus metrics (text exposition format), for a scraper with an API key',
    auth: 'key',
    responses: { 200: { description: 'The Prometheus text exposition', content: { 'text/plain': { type: 'string' } } } },
  }), apiKeyAuth(deps.accounts), async (_req, res) => {
    const { contentType, body } = await deps.scrape();
    res.setHeader('Content-Type', contentType);
    res.send(body);
  });
  return r;
}
