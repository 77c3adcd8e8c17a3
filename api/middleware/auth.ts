import type { NextFunction, Request, Response } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { AccountsService, Developer } from '../../accounts/accounts.service.js';

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

export function apiKeyAuth(accounts: AccountsService) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const key = bearerKey(req);
    if (!key) return next(new ServiceError('unauthorized', 'missing API key: send Authorization: Bearer <key>'));
    const developer = await accounts.authenticate(key);
    if (!developer) return next(new ServiceError('unauthorized', 'invalid or revoked API key'));
    req.developer = developer;
    next();
  };
}

/** The authenticated developer (routes behind apiKeyAuth). */
export function developerOf(req: Request): Developer {
  if (!req.developer) throw new ServiceError('unauthorized', 'missing API key');
  return req.developer;
}
