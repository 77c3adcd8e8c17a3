import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { EnvironmentsService } from '../../environments/environments.service.js';
import { developerOf } from '../middleware/auth.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam } from '../schemas/common.js';
import { gatewayAccessRecord } from '../schemas/records.js';

/**
 * GET /v1/environments/{id}/gateway → {proxy_url, ca_cert_pem}: everything an agent
 * running anywhere needs to use the gateway as one inside our VMs does (decisions.md,
 * Standalone gateway access). The proxy password is this environment's own.
 */
export function gatewayRouter(deps: { environments: EnvironmentsService; passwordFor(environmentId: string): string; proxyUrl: string; caCertPem: string }): Router {
  const r = Router();
  r.get('/environments/:id/gateway', describeRoute({ params: environmentIdParam, summary: 'Proxy URL (with this environment\'s credentials) and CA certificate, to use the gateway from anywhere', responses: { 200: gatewayAccessRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const env = await deps.environments.get(developerOf(req).id, req.params.id);
    if (env.desired_state === 'destroyed') {
      throw new ServiceError('environment_destroyed', 'the environment is destroyed; its gateway credentials no longer work');
    }
    const u = new URL(deps.proxyUrl);
    u.username = env.id;
    u.password = deps.passwordFor(env.id);
    res.json({ proxy_url: u.toString().replace(/\/$/, ''), ca_cert_pem: deps.caCertPem });
  });
  return r;
}
