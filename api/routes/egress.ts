import { Router } from 'express';
import type { EgressService } from '../../environments/egress.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { egressPutSchema } from '../schemas/secrets.js';

/**
 * The environment's egress allowlist (`{allow, source, effective}`) and the developer
 * default (`{allow}`). `allow: null` clears a list.
 */
export function egressRouter(deps: { egress: EgressService }): Router {
  const { egress } = deps;
  const r = Router();

  r.get('/environments/:id/egress', async (req, res) => {
    res.json(await egress.getEnvironment(developerOf(req).id, req.params.id));
  });
  r.put('/environments/:id/egress', async (req, res) => {
    const { allow } = validateBody<{ allow: string[] | null }>(egressPutSchema, requireJson(req));
    res.json(await egress.putEnvironment(developerOf(req).id, req.params.id, allow));
  });

  r.get('/egress', async (req, res) => {
    res.json(await egress.getDeveloper(developerOf(req).id));
  });
  r.put('/egress', async (req, res) => {
    const { allow } = validateBody<{ allow: string[] | null }>(egressPutSchema, requireJson(req));
    res.json(await egress.putDeveloper(developerOf(req).id, allow));
  });

  return r;
}
