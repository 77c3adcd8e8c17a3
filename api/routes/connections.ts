import { Router } from 'express';
import type { OAuthClientsService } from '../../connections/oauth-clients.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { putOAuthClientSchema, type PutOAuthClientInput } from '../schemas/connections.js';

/**
 * OAuth clients (service.md "OAuth client entry"; decisions.md: a list without paging is
 * `{data: [...]}`). Connections, authorize and the callback follow (issue 11).
 */
export function connectionsRouter(deps: { oauthClients: OAuthClientsService }): Router {
  const { oauthClients } = deps;
  const r = Router();

  r.get('/oauth-clients', async (req, res) => {
    res.json({ data: await oauthClients.list(developerOf(req).id) });
  });

  r.put('/oauth-clients/:provider', async (req, res) => {
    const body = validateBody<PutOAuthClientInput>(putOAuthClientSchema, requireJson(req));
    res.json(await oauthClients.put(developerOf(req).id, String(req.params.provider), body));
  });

  return r;
}
