import type { NextFunction, Request, Response } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';

/**
 * A path or query that cannot be percent-decoded (`%`, `%ZZ`, `%FF`) is the client's
 * error: 400 `invalid_request` before anything else looks at the URL (the router would
 * throw a URIError on the first route whose parameters it decodes, which answered 500).
 * Mounted first, before the public routers and the API-key check.
 */
export function decodableUrl(req: Request, _res: Response, next: NextFunction): void {
  const url = req.url ?? '/';
  if (url.includes('%')) {
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    try {
      decodeURIComponent(path);
    } catch {
      return next(new ServiceError('invalid_request', 'the path is not valid percent-encoding (a % must be followed by two hex digits of UTF-8)'));
    }
    if (q >= 0) {
      for (const part of url.slice(q + 1).split('&')) {
        try {
          decodeURIComponent(part.replace(/\+/g, ' '));
        } catch {
          return next(new ServiceError('invalid_request', 'the query string is not valid percent-encoding (a % must be followed by two hex digits of UTF-8)'));
        }
      }
    }
  }
  next();
}

export function noSuchRoute(_req: Request, _res: Response, next: NextFunction): void {
  next(new ServiceError('not_found', 'no such route'));
}

/**
 * Known errors answer with their code; anything else is a bare 500 whose cause goes to
 * the log only (the message could carry internals).
 */
export function errorHandler(log: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    if (res.headersSent) {
      res.end();
      return;
    }
    if (err instanceof ServiceError) {
      res.status(err.status).json(err.toBody());
      return;
    }
    // Errors Express's own layers raise for the request itself (status 4xx: a parameter
    // that does not decode, ...) are the client's: 400, never 500.
    const status = (err as { status?: unknown })?.status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      res.status(400).json({ error: 'invalid_request', message: 'the request could not be read' });
      return;
    }
    // The route's pattern when one matched (`/console/sign-in/:token`), never the concrete
    // path: one-time tokens (sign-in links, viewer URLs) travel in paths.
    const path = req.route ? `${req.baseUrl}${String(req.route.path)}` : req.path;
    log.error({ err, method: req.method, path }, 'unhandled error in request');
    res.status(500).json({ error: 'internal_error', message: 'internal error' });
  };
}
