import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { AccountsService } from '../../accounts/accounts.service.js';
import type { ApprovalsService } from '../../approvals/approvals.service.js';
import { bearerKey, developerOf } from '../middleware/auth.js';
import { page, parsePage } from '../pagination.js';
import { approvalStatusQuery, decisionBody, decisionSchema, environmentIdQuery } from '../schemas/approvals.js';
import { SIGNATURE_HEADER } from '../../webhooks/signing.js';
import { DECISION_BODY_BYTES, readJsonBody, refuseUnread } from '../middleware/json-body.js';
import { describeRoute } from '../openapi/route-spec.js';
import Joi from 'joi';
import { approvalIdParam, grantIdParam, pageQuery } from '../schemas/common.js';
import { approvalPage, approvalRecord, grantPage } from '../schemas/records.js';

/** Approvals and grants behind the API key (decisions.md "Approvals and grants"). */
export function approvalsRouter(deps: { approvals: ApprovalsService }): Router {
  const { approvals } = deps;
  const r = Router();

  r.get('/approvals', describeRoute({
    summary: 'List approval requests, newest first',
    query: pageQuery.keys({
      status: Joi.string().valid('pending', 'approved', 'denied', 'expired'),
      environment_id: Joi.string(),
    }),
    responses: { 200: approvalPage },
  }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const status = approvalStatusQuery(req.query);
    const environmentId = environmentIdQuery(req.query);
    const items = await approvals.list(developerOf(req).id, {
      limit, after,
      ...(status !== undefined ? { status } : {}),
      ...(environmentId !== undefined ? { environmentId } : {}),
    });
    res.json(page(items, limit));
  });

  r.get('/approvals/:id', describeRoute({ params: approvalIdParam, summary: 'Get an approval request', responses: { 200: approvalRecord } }), async (req, res) => {
    res.json(await approvals.get(developerOf(req).id, req.params.id));
  });

  r.get('/grants', describeRoute({ summary: 'List grants in effect', query: pageQuery.keys({ environment_id: Joi.string() }), responses: { 200: grantPage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const environmentId = environmentIdQuery(req.query);
    const items = await approvals.listGrants(developerOf(req).id, { limit, after, ...(environmentId !== undefined ? { environmentId } : {}) });
    res.json(page(items, limit));
  });

  r.delete('/grants/:id', describeRoute({ params: grantIdParam, summary: 'Revoke a grant', responses: { 204: null } }), async (req, res) => {
    await approvals.revokeGrant(developerOf(req).id, req.params.id);
    res.status(204).end();
  });

  return r;
}

/**
 * POST /v1/approvals/{id}/decision, mounted before the global API-key check (a public
 * router): it accepts an API key OR a signed callback, and answers in the order
 * 404 → 401 → 409 → 400 → 403 (decisions.md).
 *
 * - An `Authorization` header means the API-key path (decided_via `api_key`), even when a
 *   Service-Signature is present too; a bad key is 401 `unauthorized`.
 * - Without it, the request is a signed callback (decided_via `signature`): verified over
 *   req.rawBody, the exact bytes received; missing, stale or wrong is 401
 *   `invalid_signature`.
 * - Console decisions (decided_via `console`) call the service directly.
 */
export function decisionRouter(deps: { approvals: ApprovalsService; accounts: AccountsService }): Router {
  const { approvals, accounts } = deps;
  const r = Router();

  r.post('/approvals/:id/decision', describeRoute({ params: approvalIdParam, 
    summary: 'Decide an approval request: approve with a scope (and optional spending limits), or deny (an API key, or a signed callback); answers the decided request',
    description: 'Checks in the order 404, 401, 409, 400, 403 (decisions.md). The body is read up to 64 KiB. '
      + '`limits` (approve with a scope other than once) makes the grant cover only requests within them; limits that leave out the request being approved are 400 invalid_decision (docs/policies-approvals.md, Spending mandates).',
    auth: 'key_or_signature',
    body: decisionSchema,
    responses: { 200: approvalRecord },
    errors: ['already_decided', 'invalid_decision', 'missing_scope', 'invalid_scope', 'scope_too_wide'],
  }), async (req, res) => {
    const id = req.params.id;
    if (req.headers.authorization !== undefined) {
      const key = bearerKey(req);
      const developer = key ? await accounts.authenticate(key) : null;
      if (!developer) {
        refuseUnread(req, res);
        throw new ServiceError('unauthorized', key ? 'invalid or revoked API key' : 'malformed Authorization header: send Authorization: Bearer <key>');
      }
      await readJsonBody(req, res, DECISION_BODY_BYTES);
      res.json(await approvals.decide(id, { via: 'api_key', developerId: developer.id }, decisionBody(req)));
      return;
    }
    const header = req.headers[SIGNATURE_HEADER];
    const signature = typeof header === 'string' ? header : undefined;
    if (signature === undefined) {
      // Neither a key nor a signature: 404 or 401 without reading the body.
      refuseUnread(req, res);
      res.json(await approvals.decide(id, { via: 'signature', rawBody: Buffer.alloc(0), signature: undefined }, { ok: false, error: new ServiceError('invalid_signature', 'no signature') }));
      return;
    }
    // A signature is verified over the exact bytes, so they are read first, but only a
    // decision's worth of them.
    await readJsonBody(req, res, DECISION_BODY_BYTES);
    if (req.bodyError?.code === 'payload_too_large') throw req.bodyError;
    res.json(await approvals.decide(id, { via: 'signature', rawBody: req.rawBody ?? Buffer.alloc(0), signature }, decisionBody(req)));
  });

  return r;
}
