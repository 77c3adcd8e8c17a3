import { Router } from 'express';
import type { OAuthClientsService } from '../../connections/oauth-clients.service.js';
import type { Authorizer, AuthorizeInput } from '../../connections/authorize.js';
import type { CallbackHandler } from '../../connections/callback.js';
import type { ConnectionsService } from '../../connections/connections.service.js';
import { ServiceError } from '../../lib/errors.js';
import { optionalString } from '../pagination.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { authorizeSchema, putOAuthClientSchema, type PutOAuthClientInput } from '../schemas/connections.js';
import { describeRoute } from '../openapi/route-spec.js';
import Joi from 'joi';
import { connectionIdParam, environmentIdParam, providerParam } from '../schemas/common.js';
import { authorizationLinkRecord, connectionList, connectionRecord, oauthClientList, oauthClientRecord, standInTokenList } from '../schemas/records.js';

/**
 * Connections (service.md, docs/connections.md): OAuth clients (a list without paging is
 * `{data: [...]}`), authorization links, the connections themselves (list, get, revoke) and an
 * environment's stand-in tokens. The public callback is oauthCallbackRouter below.
 */
export function connectionsRouter(deps: {
  oauthClients: OAuthClientsService;
  authorizer: Authorizer;
  connections: ConnectionsService;
  /** The usable stand-ins of an environment (404 for a missing or foreign one). */
  standInTokens(developerId: string, environmentId: string): Promise<Array<{ connector: string; connection_id: string; token: string }>>;
}): Router {
  const { oauthClients, authorizer, connections } = deps;
  const r = Router();

  r.get('/oauth-clients', describeRoute({ summary: 'The OAuth apps, one entry per provider (google, slack)', responses: { 200: oauthClientList } }), async (req, res) => {
    res.json({ data: await oauthClients.list(developerOf(req).id) });
  });

  r.put('/oauth-clients/:provider', describeRoute({ params: providerParam, summary: 'Register the developer\'s own OAuth app for a provider', body: putOAuthClientSchema, responses: { 200: oauthClientRecord } }), async (req, res) => {
    const body = validateBody<PutOAuthClientInput>(putOAuthClientSchema, requireJson(req));
    res.json(await oauthClients.put(developerOf(req).id, String(req.params.provider), body));
  });

  r.post('/connections/authorize', describeRoute({ summary: 'An authorization link for an end user to connect an account', body: authorizeSchema, responses: { 201: authorizationLinkRecord }, errors: ['no_oauth_client'] }), async (req, res) => {
    const body = validateBody<AuthorizeInput>(authorizeSchema, requireJson(req));
    res.status(201).json(await authorizer.authorize(developerOf(req).id, body));
  });

  // ?end_user_id=&include_revoked=true|false → {data, has_more}: newest first, at most 500.
  r.get('/connections', describeRoute({
    summary: 'Connections, newest first, at most 500',
    query: Joi.object({ end_user_id: Joi.string(), include_revoked: Joi.string().valid('true', 'false') }),
    responses: { 200: connectionList },
  }), async (req, res) => {
    const endUserId = optionalString(req.query, 'end_user_id');
    const raw = optionalString(req.query, 'include_revoked');
    if (raw !== undefined && raw !== 'true' && raw !== 'false') throw new ServiceError('invalid_request', 'include_revoked must be true or false');
    res.json(await connections.list(developerOf(req).id, { ...(endUserId ? { endUserId } : {}), includeRevoked: raw === 'true' }));
  });

  r.get('/connections/:id', describeRoute({ params: connectionIdParam, summary: 'Get a connection', responses: { 200: connectionRecord } }), async (req, res) => {
    res.json(await connections.get(developerOf(req).id, String(req.params.id)));
  });

  // decisions.md: the stand-ins this environment's VM receives.
  r.get('/environments/:id/stand-in-tokens', describeRoute({ params: environmentIdParam, summary: 'The stand-in tokens this environment\'s VM receives', responses: { 200: standInTokenList } }), async (req, res) => {
    res.json({ data: await deps.standInTokens(developerOf(req).id, String(req.params.id)) });
  });

  // 200 with the revoked connection (not 204), idempotent.
  r.delete('/connections/:id', describeRoute({ params: connectionIdParam, summary: 'Revoke a connection (idempotent)', responses: { 200: connectionRecord } }), async (req, res) => {
    res.json(await connections.revoke(developerOf(req).id, String(req.params.id)));
  });

  return r;
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * GET /v1/oauth/{provider}/callback: public (the provider sends the end user's browser here;
 * the one-time state is the credential). A redirect to the developer's return_url, or a
 * small page of its own for a missing, unknown, expired or used state (400). No caching,
 * no referrer (the URL carries the code), nothing loaded from anywhere.
 */
export function oauthCallbackRouter(deps: { callback: CallbackHandler }): Router {
  const r = Router();
  r.get('/oauth/:provider/callback', describeRoute({
    summary: 'OAuth callback (public; the provider sends the end user\'s browser here)',
    params: { provider: Joi.string().description('google or slack') },
    query: Joi.object({ state: Joi.string(), code: Joi.string(), error: Joi.string() }),
    responses: {
      302: { description: 'To the return_url with status=ok&connection_id=... or status=error&error=...', headers: { Location: { description: 'The developer\'s return_url', schema: { type: 'string' } } } },
      400: { description: 'A page saying the link is missing, unknown, expired or used', content: { 'text/html': { type: 'string' } } },
      404: { description: 'Unknown provider (a page)', content: { 'text/html': { type: 'string' } } },
    },
  }), async (req, res) => {
    const out = await deps.callback.handle(String(req.params.provider), req.query as Record<string, unknown>);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    if (out.kind === 'redirect') {
      res.redirect(302, out.location);
      return;
    }
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.status(out.status).type('html').send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(out.title)}</title>` +
        '<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}</style></head>' +
        `<body><h1>${escapeHtml(out.title)}</h1><p>${escapeHtml(out.text)}</p></body></html>`,
    );
  });
  return r;
}
