import { Router } from 'express';
import type { ProfilesService, Profile } from '../../browser/profiles.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, optionalJsonBody, requireJson } from '../middleware/json-body.js';
import type { LeasesService, Lease, LeaseMode } from '../../browser/leases.service.js';
import { validateBody } from '../validation.js';
import { optionalString, page, parsePage } from '../pagination.js';
import { leaseCreateSchema, leaseReleaseSchema, profileCreateSchema } from '../schemas/browser.js';
import { newNonce, notFoundPage, viewerHeaders, viewerPage } from '../../browser/viewer.js';

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

  r.get('/browser/profiles', async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const endUserId = optionalString(req.query, 'end_user_id');
    res.json(page<Profile>(await profiles.list(developerOf(req).id, { endUserId, limit, after }), limit));
  });
  r.post('/browser/profiles', async (req, res) => {
    const input = validateBody<{ end_user_id: string; name: string }>(profileCreateSchema, requireJson(req));
    res.status(201).json(await profiles.create(developerOf(req).id, input));
  });
  r.get('/browser/profiles/:id', noBody, async (req, res) => {
    res.json(await profiles.get(developerOf(req).id, req.params.id!));
  });
  r.delete('/browser/profiles/:id', noBody, async (req, res) => {
    await profiles.remove(developerOf(req).id, req.params.id!);
    res.status(204).end();
  });
  r.get('/browser/leases', async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const environmentId = optionalString(req.query, 'environment_id');
    const state = optionalString(req.query, 'state');
    res.json(page<Lease>(await leases.list(developerOf(req).id, { environmentId, state, limit, after }), limit));
  });
  r.post('/browser/leases', async (req, res) => {
    const input = validateBody<{ environment_id: string; profile_id?: string | null; mode?: LeaseMode | null }>(leaseCreateSchema, requireJson(req));
    res.status(201).json(await leases.create(developerOf(req).id, input));
  });
  r.get('/browser/leases/:id', noBody, async (req, res) => {
    res.json(await leases.get(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/renew', noBody, async (req, res) => {
    res.json(await leases.renew(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/release', async (req, res) => {
    // An empty body is "no body" only without the JSON Content-Type (service.md, Endpoints).
    const body = optionalJsonBody(req);
    const { save } = body === undefined ? { save: undefined } : validateBody<{ save?: boolean | null }>(leaseReleaseSchema, body);
    res.json(await leases.release(developerOf(req).id, req.params.id!, save));
  });
  r.post('/browser/leases/:id/takeover', noBody, async (req, res) => {
    res.json(await leases.takeover(developerOf(req).id, req.params.id!));
  });
  r.post('/browser/leases/:id/handback', noBody, async (req, res) => {
    res.json(await leases.handback(developerOf(req).id, req.params.id!));
  });
  r.get('/browser/limits', noBody, (_req, res) => {
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
  r.get('/browser/view/:token', async (req, res) => {
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
