import express, { type NextFunction, type Request, type Response } from 'express';
import { ServiceError } from '../../lib/errors.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** The exact bytes received; signed callbacks are verified over these. */
    rawBody?: Buffer;
    /**
     * Why the body could not be read (413, 400 unparsable, 415), recorded instead of
     * answered so a public route (the decision endpoint) can answer it after its own
     * earlier checks; rejectBadBody answers it for every other route.
     */
    bodyError?: ServiceError;
  }
}

const JSON_TYPE = /^application\/json\s*(;.*)?$/i;

/** Bodies up to this size are read; the largest valid one is a 200-item batch of configs. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

const readRaw = express.raw({ type: () => true, limit: MAX_BODY_BYTES });

/**
 * Reads the raw body and parses it as JSON ourselves, so that:
 * - a body without `Content-Type: application/json` is 415 `unsupported_media_type`;
 * - JSON that does not parse is 400 `invalid_request`;
 * - an empty body with no Content-Type leaves req.body undefined (release-lease and the
 *   state moves accept that), while an empty body *with* the JSON header is 400;
 * - req.rawBody keeps the exact bytes for signature checks.
 *
 * A body error is recorded on req.bodyError, not passed to next(err): the public routers
 * run next and may answer other errors first (the decision endpoint: 404, 401, 409 before
 * any body check); rejectBadBody, mounted right after them, answers it for everything else
 * exactly where this middleware used to.
 */
export function jsonBody(req: Request, res: Response, next: NextFunction): void {
  const fail = (e: ServiceError): void => {
    req.bodyError = e;
    req.body = undefined;
    next();
  };
  readRaw(req, res, (err?: unknown) => {
    if (err) {
      const e = err as { type?: string; status?: number };
      if (e.type === 'entity.too.large') return fail(new ServiceError('payload_too_large', `the body is larger than ${MAX_BODY_BYTES} bytes`));
      return fail(new ServiceError('invalid_request', 'the body could not be read'));
    }
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    req.rawBody = raw;
    req.body = undefined;
    const type = req.headers['content-type'];
    if (raw.length === 0) {
      if (type && JSON_TYPE.test(type)) return fail(new ServiceError('invalid_request', 'the body is empty but Content-Type says JSON'));
      return next();
    }
    if (!type || !JSON_TYPE.test(type)) {
      return fail(new ServiceError('unsupported_media_type', 'a request body must be sent with Content-Type: application/json'));
    }
    try {
      req.body = JSON.parse(raw.toString('utf8'));
    } catch {
      return fail(new ServiceError('invalid_request', 'the body is not valid JSON'));
    }
    next();
  });
}

/** Answers a body error jsonBody recorded (mounted after the public routers). */
export function rejectBadBody(req: Request, _res: Response, next: NextFunction): void {
  if (req.bodyError) return next(req.bodyError);
  next();
}

/** For endpoints that need a body: none at all is 415 (no JSON was sent). */
export function requireJson(req: Request): unknown {
  if (req.bodyError) throw req.bodyError;
  if (req.body === undefined) {
    throw new ServiceError('unsupported_media_type', 'this endpoint needs a JSON body with Content-Type: application/json');
  }
  return req.body;
}
