import { Router } from 'express';
import type { ProfilesService, Profile } from '../../browser/profiles.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, optionalJsonBody, requireJson } from '../middleware/json-body.js';
import type { LeasesService, Lease, LeaseMode } from '../../browser/leases.service.js';
import { validateBody } from '../validation.js';
import { optionalString, page, parsePage } from '../pagination.js';
import { leaseCreateSchema, leaseReleaseSchema, profileCreateSchema } from '../schemas/browser.js';
import { newNonce, notFoundPage, viewerHeaders, viewerPage } from '../../browser/viewer.js';
import { describeRoute } from '../openapi/route-spec.js';
import type { DocumentedRoute } from '../openapi/document.js';
import Joi from 'joi';
import { leaseIdParam, pageQuery, profileIdParam } from '../schemas/common.js';
import { browserLimitsRecord, leasePage, leaseRecord, profilePage, profileRecord, takeoverRecord } from '../schemas/records.js';

/**
 * The browser pool's management API (service.md, Browser endpoints; issue 14): profiles
 * and the operator's limits today; leases, takeover and the viewer arrive with the broker.
 */
export interface BrowserLimits {
  per_developer: number;
  per_end_user: number;
  lease_secs: number;
  save_deadline_secs: number;
}

export function browserRouter(deps: { profiles: ProfilesService; leases: LeasesService; limits: BrowserLimits }): Router {
  const { leases } = deps;
  const { profiles } = deps;
  const r = Router();

  r.get('/browser/profiles', describeRoute({ summary: 'List browser profiles, ascending by created_at', query: pageQuery.keys({ end_user_id: Joi.string().description('Only this end user\'s') }), responses: { 200: profilePage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const endUserId = optionalString(req.query, 'end_user_id');
    res.json(page<Profile>(await profiles.list(developerOf(req).id, { endUserId, limit, after }), limit));
  });
  r.post('/browser/profiles', describeRoute({ summary: 'Create a browser profile', body: profileCreateSchema, responses: { 201: profileRecord }, errors: ['profile_exists'] }), async (req, res) => {
    const input = validateBody<{ end_user_id: string; name: string }>(profileCreateSchema, requireJson(req));
    res.status(201).json(await profiles.create(developerOf(req).id, input));
  });
  r.get('/browser/profiles/:id', noBody, describeRoute({ params: profileIdParam, summary: 'Get a browser profile', responses: { 200: profileRecord } }), async (req, res) => {
    res.json(await profiles.get(developerOf(req).id, req.params.id!));
  });
  r.delete('/browser/profiles/:id', noBody, describeRoute({ params: profileIdParam, summary: 'Delete a browser profile and its signed-in state', responses: { 204: null }, errors: ['profile_in_use'] }), async (req, res) => {
    await profiles.remove(developerOf(req).id, req.params.id!);
    res.status(204).end();
  });
  r.get('/browser/leases', describeRoute({ summary: 'List browser leases', query: pageQuery.keys({ environment_id: Joi.string(), state: Joi.string() }), responses: { 200: leasePage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const environmentId = optionalString(req.query, 'environment_id');
    const state = optionalString(req.query, 'state');
    res.json(page<Lease>(await leases.list(developerOf(req).id, { environmentId, state, limit, after }), limit));
  });
  r.post('/browser/leases', describeRoute({ summary: 'Open a browser lease (answers once active)', body: leaseCreateSchema, responses: { 201: leaseRecord }, errors: ['environment_destroyed', 'profile_locked', 'lease_limit_reached', 'host_unavailable'] }), async (req, res) => {
    const input = validateBody<{ environment_id: string; profile_id?: string | null; mode?: LeaseMode | null }>(leaseCreateSchema, requireJson(req));
    res.status(201).json(await leases.create(developerOf(req).id, input));
  });
  r.get('/browser/leases/:id', noBody, describeRoute({ params: leaseIdParam, summary: 'Get a browser lease', responses: { 200: leaseRecord } }), async (req, res) => {
    res.json(await leases.get(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/renew', noBody, describeRoute({ params: leaseIdParam, summary: 'Renew a lease for 15 more minutes', responses: { 200: leaseRecord }, errors: ['lease_not_active'] }), async (req, res) => {
    res.json(await leases.renew(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/release', describeRoute({ params: leaseIdParam, summary: 'Release a lease (a write lease saves its state unless save is false)', body: leaseReleaseSchema, bodyOptional: true, responses: { 200: leaseRecord }, errors: ['lease_not_active'] }), async (req, res) => {
    // An empty body is "no body" only without the JSON Content-Type (service.md, Endpoints).
    const body = optionalJsonBody(req);
    const { save } = body === undefined ? { save: undefined } : validateBody<{ save?: boolean | null }>(leaseReleaseSchema, body);
    res.json(await leases.release(developerOf(req).id, req.params.id!, save));
  });
  r.post('/browser/leases/:id/takeover', noBody, describeRoute({ params: leaseIdParam, summary: 'Take the browser over: a one-time viewer URL for a person', responses: { 200: takeoverRecord }, errors: ['lease_not_active', 'host_unavailable'] }), async (req, res) => {
    res.json(await leases.takeover(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/handback', noBody, describeRoute({ params: leaseIdParam, summary: 'Hand the browser back to the agent', responses: { 200: leaseRecord }, errors: ['lease_not_active', 'not_taken_over', 'host_unavailable'] }), async (req, res) => {
    res.json(await leases.handback(developerOf(req).id, req.params.id!));
  });
  r.get('/browser/limits', noBody, describeRoute({ summary: 'Lease limits and durations', responses: { 200: browserLimitsRecord } }), (_req, res) => {
    res.json(deps.limits);
  });
  return r;
}

/**
 * GET /v1/browser/view/{token}: the takeover viewer page, public (the token is the
 * credential). Opening it does not consume the token; its WebSocket (`/ws`) does. An
 * invalid, expired, used or handed-back token gets a 404 HTML page.
 */
export function browserViewRouter(deps: { leases: LeasesService }): Router {
  const r = Router();
  r.get('/browser/view/:token', describeRoute({
    summary: 'The takeover viewer page (public; the token is the credential); its WebSocket is /v1/browser/view/{token}/ws',
    params: { token: Joi.string().description('The viewer token of the takeover\'s view_url') },
    responses: { 200: { description: 'The viewer (HTML)', content: { 'text/html': { type: 'string' } } } },
  }), async (req, res) => {
    const ok = /^[A-Za-z0-9_-]{20,100}$/.test(req.params.token!) ? await deps.leases.viewable(req.params.token!) : null;
    if (!ok) {
      res.status(404).set(viewerHeaders(null)).send(notFoundPage());
      return;
    }
    const nonce = newNonce();
    res.status(200).set(viewerHeaders(nonce)).send(viewerPage(nonce));
  });
  return r;
}

const refusals = (what: Record<number, string>) => Object.fromEntries(Object.entries(what).map(([status, description]) => [status, { description }]));

/**
 * The browser's WebSocket endpoints (bin/service.ts answers their upgrades; a refusal is a
 * bare HTTP status, no JSON), for the OpenAPI document only: they are not Express routes.
 */
export const BROWSER_WEBSOCKETS: readonly DocumentedRoute[] = [
  {
    method: 'GET', path: '/v1/browser/leases/:id/cdp', public: true, bodiless: true,
    spec: {
      summary: 'The lease\'s Chrome DevTools Protocol endpoint (WebSocket; the lease\'s cdp_url, for chromium.connectOverCDP)',
      tag: 'browser',
      auth: 'none',
      params: { id: Joi.string().pattern(/^bls_[0-9a-f]{24}$/).description('The lease id') },
      query: Joi.object({ token: Joi.string().required().description('From cdp_url: the credential') }),
      responses: {
        101: { description: 'Switching Protocols: the CDP relay, showing only this lease\'s context' },
        ...refusals({ 401: 'Wrong token', 404: 'Not a lease\'s endpoint', 409: 'The lease is not active' }),
      },
    },
  },
  {
    method: 'GET', path: '/v1/browser/view/:token/ws', public: true, bodiless: true,
    spec: {
      summary: 'The takeover viewer\'s WebSocket (opening it consumes the token)',
      tag: 'browser',
      auth: 'none',
      params: { token: Joi.string().pattern(/^[A-Za-z0-9_-]{20,100}$/).description('The viewer token') },
      responses: {
        101: { description: 'Switching Protocols: the viewer\'s screen and input' },
        ...refusals({ 404: 'Invalid, expired, used or handed-back token', 503: 'The browser is down' }),
      },
    },
  },
];
