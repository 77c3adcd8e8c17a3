import type { Request } from 'express';
import Joi from 'joi';
import { ServiceError } from '../../lib/errors.js';
import type { ApprovalStatus } from '../../approvals/approvals.store.js';
import type { DecisionBody } from '../../approvals/approvals.service.js';
import { optionalString } from '../pagination.js';

const STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'denied', 'expired'];

/** `status` of GET /v1/approvals: one of the four (else 400 invalid_request), or absent. */
export function approvalStatusQuery(query: Record<string, unknown>): ApprovalStatus | undefined {
  const v = optionalString(query, 'status');
  if (v === undefined || v === '') return undefined;
  if (!STATUSES.includes(v as ApprovalStatus)) throw new ServiceError('invalid_request', `status must be one of ${STATUSES.join(', ')}`);
  return v as ApprovalStatus;
}

export function environmentIdQuery(query: Record<string, unknown>): string | undefined {
  const v = optionalString(query, 'environment_id');
  return v === undefined || v === '' ? undefined : v;
}

/**
 * The decision body as read by json-body, without throwing: the service checks it only
 * after 404, 401 and 409 (decisions.md order of checks). JSON that does not parse, or an
 * empty body sent as JSON, is `invalid_decision` (every malformed decision body is, never
 * 422). No body at all, or a body without the JSON content type, stays 415 like every
 * other endpoint; an oversized body stays 413.
 */
export function decisionBody(req: Request): DecisionBody {
  const err = req.bodyError;
  if (err) {
    if (err.code === 'invalid_request') return { ok: false, error: new ServiceError('invalid_decision', err.message) };
    return { ok: false, error: err };
  }
  if (req.emptyJsonBody) return { ok: false, error: new ServiceError('invalid_decision', 'the body is empty but Content-Type says JSON') };
  if (req.body === undefined) {
    return { ok: false, error: new ServiceError('unsupported_media_type', 'a decision needs a JSON body with Content-Type: application/json') };
  }
  return { ok: true, value: req.body };
}

/**
 * The decision body for the OpenAPI document: approvals/decision.ts parses it by hand
 * (every malformed decision is 400 `invalid_decision`, never 422); this says the same shape.
 */
export const decisionSchema = Joi.object({
  decision: Joi.string().valid('approve', 'deny').required(),
  scope: Joi.object({
    kind: Joi.string().valid('once', 'task', 'session', 'until', 'permanent').required(),
    task_id: Joi.string().description('kind task: the request\'s own task id'),
    session_id: Joi.string().description('kind session: the request\'s own session id'),
    until: Joi.number().integer().description('kind until: Unix seconds, in the future'),
  }).allow(null).description('Required to approve; none on deny'),
  limits: Joi.object({
    per_request_minor_units: Joi.number().integer().min(1).description('No single request above this amount (minor units of currency)'),
    total_minor_units: Joi.number().integer().min(1).description('All requests under the grant together, the approved one first, at most this'),
    currency: Joi.string().pattern(/^[A-Za-z]{3}$/).description('ISO 4217; required with an amount limit, only with one'),
    max_uses: Joi.number().integer().min(1).description('At most this many requests, the approved one first'),
    recipients_within: Joi.array().items(Joi.string()).min(1).max(50).description('Every recipient\'s domain is one of these or a subdomain'),
  }).allow(null).description('Spending mandate (approve with a scope other than once): the grant covers only requests within these; the approved request must be within them and is the first use'),
});
