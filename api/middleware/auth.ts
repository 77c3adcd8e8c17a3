import type { NextFunction, Request, Response } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { AccountsService, Developer } from '../../accounts/accounts.service.js';
import { refuseUnread } from './json-body.js';

declare module 'express-serve-static-core' {
  interface Request {
    developer?: Developer;
  }
}

/** `Authorization: Bearer sk_...`; anything else is 401 `unauthorized`. */
export function bearerKey(req: Request): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1]! : null;
}

/**
 * The API key, checked from the headers before any of the body is read (issue 9, hole 8):
 * a request without a valid key is answered 401 at once and its connection closed, not
 * drained (refuseUnread), so strangers cannot make the service read 64 MiB bodies.
 */
export function apiKeyAuth(accounts: AccountsService) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const key = bearerKey(req);
    if (!key) {
      refuseUnread(req, res);
      return next(new ServiceError('unauthorized', 'missing API key: send Authorization: Bearer <key>'));
    }
    const developer = await accounts.authenticate(key);
    if (!developer) {
      refuseUnread(req, res);
      return next(new ServiceError('unauthorized', 'invalid or revoked API key'));
    }
    req.developer = developer;
    next();
  };
}

/** The authenticated developer (routes behind apiKeyAuth). */
export function developerOf(req: Request): Developer {
  if (!req.developer) throw new ServiceError('unauthorized', 'missing API key');
  return req.developer;
}
