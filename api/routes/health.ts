import { Router } from 'express';
import type { Readiness } from '../../lib/readiness.js';
import { describeRoute } from '../openapi/route-spec.js';
import { healthRecord, readinessRecord } from '../schemas/records.js';

/**
 * `GET /healthz` and `GET /readyz` (issue 25, item 1; docs/operations.md, Health): no API
 * key, at the root (where load balancers and orchestrators look), before the key check.
 *
 * - /healthz: 200 `{"status":"ok"}` while the process serves. Nothing is checked: an
 *   orchestrator restarts a node whose liveness fails, and a store outage is no reason to.
 * - /readyz: 200 `{"status":"ready","checks":{...}}` when every check is `ok`, else 503
 *   `{"status":"not_ready","checks":{...}}`: names and `ok`/`failing` only.
 */
export function healthRouter(deps: { readiness: Readiness }): Router {
  const r = Router();
  r.get('/healthz', describeRoute({ summary: 'Liveness: 200 while the process serves (nothing is checked)', responses: { 200: healthRecord } }), (_req, res) => {
    res.json({ status: 'ok' });
  });
  r.get('/readyz', describeRoute({
    summary: 'Readiness: 200 when every check is ok, else 503; check names and states only',
    responses: { 200: readinessRecord, 503: { description: 'Not ready', content: { 'application/json': readinessRecord } } },
  }), async (_req, res) => {
    const report = await deps.readiness.check();
    res.status(report.ready ? 200 : 503).json({ status: report.ready ? 'ready' : 'not_ready', checks: report.checks });
  });
  return r;
}
