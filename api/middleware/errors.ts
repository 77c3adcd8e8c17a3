import type { NextFunction, Request, Response } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';

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
    log.error({ err, method: req.method, path: req.path }, 'unhandled error in request');
    res.status(500).json({ error: 'internal_error', message: 'internal error' });
  };
}
