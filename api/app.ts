import express, { type Express, type Router } from 'express';
import type { Logger } from '../lib/log.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import { apiKeyAuth } from './middleware/auth.js';
import { jsonBody, rejectBadBody } from './middleware/json-body.js';
import { errorHandler, noSuchRoute } from './middleware/errors.js';

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
  /** Routers behind the API key, mounted under /v1. */
  routers: Router[];
}

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
  for (const r of parts.publicRouters ?? []) app.use('/v1', r);
  // Who is asking, from the headers alone; then the body (issue 9, hole 8).
  app.use('/v1', apiKeyAuth(parts.accounts));
  app.use(jsonBody);
  app.use(rejectBadBody);
  for (const r of parts.routers) app.use('/v1', r);
  app.use(noSuchRoute);
  app.use(errorHandler(parts.log));
  return app;
}
