import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { AuditService } from '../../audit/audit.service.js';
import { DECISIONS, type AuditDecision } from '../../audit/entry.js';
import { developerOf } from '../middleware/auth.js';
import { optionalString, page, parsePage } from '../pagination.js';

/** An empty filter (`?connector=`) is no filter, as an empty `after` is no cursor. */
function filter(query: Record<string, unknown>, name: string): string | undefined {
  const v = optionalString(query, name);
  return v === undefined || v === '' ? undefined : v;
}

/** decisions.md, Environments table: `audit log` and `audit chain check`. */
export function auditRouter(deps: { audit: AuditService }): Router {
  const { audit } = deps;
  const r = Router();

  r.get('/audit-log', async (req, res) => {
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

  r.get('/audit-log/verify', async (req, res) => {
    res.json(await audit.verify(developerOf(req).id));
  });

  return r;
}
