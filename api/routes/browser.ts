import { Router } from 'express';
import type { ProfilesService, Profile } from '../../browser/profiles.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { optionalString, page, parsePage } from '../pagination.js';
import { profileCreateSchema } from '../schemas/browser.js';

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

export function browserRouter(deps: { profiles: ProfilesService; limits: BrowserLimits }): Router {
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
  r.get('/browser/limits', noBody, (_req, res) => {
    res.json(deps.limits);
  });
  return r;
}
