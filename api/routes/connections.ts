import { Router } from 'express';
import type { OAuthClientsService } from '../../connections/oauth-clients.service.js';
import type { Authorizer, AuthorizeInput } from '../../connections/authorize.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { authorizeSchema, putOAuthClientSchema, type PutOAuthClientInput } from '../schemas/connections.js';

/**
 * OAuth clients (service.md "OAuth client entry"; decisions.md: a list without paging is
 * `{data: [...]}`) and authorization links. The callback, connections and revoke follow
 * (issue 11).
 */
export function connectionsRouter(deps: { oauthClients: OAuthClientsService; authorizer: Authorizer }): Router {
  const { oauthClients, authorizer } = deps;
  const r = Router();

  r.get('/oauth-clients', async (req, res) => {
    res.json({ data: await oauthClients.list(developerOf(req).id) });
  });

  r.put('/oauth-clients/:provider', async (req, res) => {
    const body = validateBody<PutOAuthClientInput>(putOAuthClientSchema, requireJson(req));
    res.json(await oauthClients.put(developerOf(req).id, String(req.params.provider), body));
  });

  r.post('/connections/authorize', async (req, res) => {
    const body = validateBody<AuthorizeInput>(authorizeSchema, requireJson(req));
    res.status(201).json(await authorizer.authorize(developerOf(req).id, body));
  });

  return r;
}
