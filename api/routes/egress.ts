import { Router } from 'express';
import type { EgressService, UnknownHosts } from '../../environments/egress.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { egressPutSchema, environmentEgressPutSchema } from '../schemas/secrets.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam } from '../schemas/common.js';
import { developerEgressRecord, environmentEgressRecord } from '../schemas/records.js';

/**
 * The environment's egress allowlist (`{allow, source, effective, unknown_hosts}`) and the
 * developer default (`{allow}`). `allow: null` clears a list; `unknown_hosts` (issue 26,
 * item 3) is the environment's own, with no developer default.
 */
export function egressRouter(deps: { egress: EgressService }): Router {
  const { egress } = deps;
  const r = Router();

  r.get('/environments/:id/egress', describeRoute({ params: environmentIdParam, summary: 'The environment\'s egress allowlist and the effective one', responses: { 200: environmentEgressRecord } }), async (req, res) => {
    res.json(await egress.getEnvironment(developerOf(req).id, req.params.id));
  });
  r.put('/environments/:id/egress', describeRoute({ params: environmentIdParam, summary: 'Set (or clear with null) the environment\'s egress allowlist, and what happens to other hosts', body: environmentEgressPutSchema, responses: { 200: environmentEgressRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const { allow, unknown_hosts } = validateBody<{ allow?: string[] | null; unknown_hosts?: UnknownHosts }>(environmentEgressPutSchema, requireJson(req));
    res.json(await egress.putEnvironment(developerOf(req).id, req.params.id, allow, unknown_hosts));
  });

  r.get('/egress', describeRoute({ summary: 'The developer\'s default egress allowlist', responses: { 200: developerEgressRecord } }), async (req, res) => {
    res.json(await egress.getDeveloper(developerOf(req).id));
  });
  r.put('/egress', describeRoute({ summary: 'Set (or clear with null) the developer\'s default egress allowlist', body: egressPutSchema, responses: { 200: developerEgressRecord } }), async (req, res) => {
    const { allow } = validateBody<{ allow: string[] | null }>(egressPutSchema, requireJson(req));
    res.json(await egress.putDeveloper(developerOf(req).id, allow));
  });

  return r;
}
