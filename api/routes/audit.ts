import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { AuditService } from '../../audit/audit.service.js';
import { DECISIONS, type AuditDecision } from '../../audit/entry.js';
import { developerOf } from '../middleware/auth.js';
import { optionalString, page, parsePage } from '../pagination.js';
import { describeRoute } from '../openapi/route-spec.js';
import Joi from 'joi';
import { pageQuery } from '../schemas/common.js';
import { auditPage, auditVerifyRecord } from '../schemas/records.js';

/** An empty filter (`?connector=`) is no filter, as an empty `after` is no cursor. */
function filter(query: Record<string, unknown>, name: string): string | undefined {
  const v = optionalString(query, name);
  return v === undefined || v === '' ? undefined : v;
}

/** decisions.md, Environments table: `audit log` and `audit chain check`. */
export function auditRouter(deps: { audit: AuditService }): Router {
  const { audit } = deps;
  const r = Router();

  r.get('/audit-log', describeRoute({
    summary: 'Audit entries, one per proxied request',
    query: pageQuery.keys({
      environment_id: Joi.string(),
      decision: Joi.string().valid('allow', 'deny', 'ask'),
      connector: Joi.string(),
    }),
    responses: { 200: auditPage },
  }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const decision = filter(req.query, 'decision');
    if (decision !== undefined && !(DECISIONS as readonly string[]).includes(decision)) {
      throw new ServiceError('invalid_request', 'decision must be one of allow, deny, ask');
    }
    const items = await audit.list(developerOf(req).id, {
      environment_id: filter(req.query, 'environment_id'),
      decision: decision as AuditDecision | undefined,
      connector: filter(req.query, 'connector'),
      after,
      limit,
    });
    res.json(page(items, limit));
  });

  r.get('/audit-log/verify', describeRoute({ summary: 'Check the audit log\'s hash chain', responses: { 200: auditVerifyRecord } }), async (req, res) => {
    res.json(await audit.verify(developerOf(req).id));
  });

  return r;
}
