import express, { type Express, type Router } from 'express';
import type { Logger } from '../lib/log.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import { apiKeyAuth } from './middleware/auth.js';
import { jsonBody, rejectBadBody } from './middleware/json-body.js';
import { decodableUrl, errorHandler, noSuchRoute } from './middleware/errors.js';
import { specOf, type RouteSpec } from './openapi/route-spec.js';
import { buildOpenApiDocument, type DocumentedRoute } from './openapi/document.js';

export interface AppParts {
  log: Logger;
  accounts: AccountsService;
  /**
   * Routers that need no API key (OAuth callback, browser viewer, the decision endpoint),
   * mounted under /v1 before the key check and before any body is read: a public route
   * that takes a body reads it itself once it knows who is asking (readJsonBody, with its
   * own small limit), and refuses strangers with refuseUnread.
   */
  publicRouters?: Router[];
  /** The console (HTML, its own session cookies and form bodies), mounted at /console before the JSON body parser. */
  consoleRouter?: Router;
  /** Routers behind the API key, mounted under /v1. */
  routers: Router[];
  /**
   * Operations routes at the root, before everything else (issue 25): /healthz and /readyz
   * (no key), /metrics (checks the API key itself). Not under /v1: load balancers and
   * Prometheus expect them there.
   */
  rootRouters?: Router[];
  /**
   * WebSocket endpoints the HTTP server's `upgrade` handler serves, not Express: listed in
   * the OpenAPI document only (api/routes/browser.ts BROWSER_WEBSOCKETS).
   */
  websockets?: readonly DocumentedRoute[];
}

/** One route of the API as the router holds it (for the route-enumerating fuzz test and the OpenAPI document). */
export interface RouteInfo {
  method: string;
  /** The Express path: under /v1 (`/v1/environments/:id/suspend`), or at the root for rootRouters (`/healthz`). */
  path: string;
  /** Mounted before the API-key check: a public router's, or a root router's (which checks a key itself if it needs one). */
  public: boolean;
  /** Takes no body: a bodiless method, or marked with noBody. */
  bodiless: boolean;
  /** The route's describeRoute annotation (api/openapi/route-spec.ts), if it has one. */
  spec?: RouteSpec;
}

interface RouterLayer {
  route?: { path: string; methods: Record<string, boolean>; stack: Array<{ handle: unknown; method?: string }> };
}

/** Every route of these routers, read from the routers themselves (a route added later is listed too). */
export function listRoutes(parts: Pick<AppParts, 'routers' | 'publicRouters' | 'rootRouters'>): RouteInfo[] {
  const out: RouteInfo[] = [];
  const walk = (r: Router, isPublic: boolean, prefix: string) => {
    for (const layer of (r as unknown as { stack: RouterLayer[] }).stack) {
      const route = layer.route;
      if (!route) continue;
      for (const m of Object.keys(route.methods)) {
        const method = m.toUpperCase();
        const mine = route.stack.filter((l) => l.method === undefined || l.method === m);
        const marked = mine.some((l) => (l.handle as { takesNoBody?: boolean }).takesNoBody === true);
        const spec = mine.map((l) => specOf(l.handle)).find((s) => s !== undefined);
        out.push({ method, path: `${prefix}${route.path}`, public: isPublic, bodiless: BODILESS.has(method) || marked, ...(spec ? { spec } : {}) });
      }
    }
  };
  for (const r of parts.rootRouters ?? []) walk(r, true, '');
  for (const r of parts.publicRouters ?? []) walk(r, true, '/v1');
  for (const r of parts.routers) walk(r, false, '/v1');
  return out;
}

const BODILESS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

/** The management API: JSON in and out, errors from the registry, 404 `no such route` last. */
export function createApp(parts: AppParts): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  app.use(decodableUrl);
  for (const r of parts.rootRouters ?? []) app.use(r);
  if (parts.consoleRouter) app.use('/console', parts.consoleRouter);
  for (const r of parts.publicRouters ?? []) app.use('/v1', r);
  // Who is asking, from the headers alone; then the body (issue 9, hole 8).
  app.use('/v1', apiKeyAuth(parts.accounts));
  app.use(jsonBody);
  app.use(rejectBadBody);
  for (const r of parts.routers) app.use('/v1', r);
  app.use(noSuchRoute);
  app.use(errorHandler(parts.log));
  const routes = listRoutes(parts);
  app.locals.routes = routes;
  // Generated once, at start, from the routes just mounted (issue 25, item 3); GET
  // /v1/openapi.json (api/routes/openapi.ts) serves it with `servers` from BASE_URL.
  app.locals.openapi = buildOpenApiDocument([...routes, ...(parts.websockets ?? []).map((w) => ({ ...w, websocket: true }))]);
  return app;
}
