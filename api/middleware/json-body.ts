import type { NextFunction, Request, Response } from 'express';
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
    /** The body was empty but came with the JSON Content-Type (400 only where a body is needed). */
    emptyJsonBody?: boolean;
  }
}

const JSON_TYPE = /^application\/json\s*(;.*)?$/i;

/** Bodies up to this size are read; the largest valid one is a 200-item batch of configs. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** A decision body is two small fields; a signed callback is read before it is verified, so keep it small. */
export const DECISION_BODY_BYTES = 64 * 1024;

/**
 * Reads the raw body and parses it as JSON ourselves, so that:
 * - a body without `Content-Type: application/json` is 415 `unsupported_media_type`;
 * - JSON that does not parse is 400 `invalid_request`;
 * - an empty body leaves req.body undefined whatever its Content-Type: an operation that
 *   takes no body ignores it (SDKs send the JSON header on every request); one that needs
 *   a body (requireJson) or tells "no body" from "empty JSON" (optionalJsonBody, the
 *   spec's release-lease rule) answers 400 when the JSON header came with nothing;
 * - req.rawBody keeps the exact bytes for signature checks.
 *
 * A body error is recorded on req.bodyError, not passed to next(err): the public routers
 * run next and may answer other errors first (the decision endpoint: 404, 401, 409 before
 * any body check); rejectBadBody, mounted right after them, answers it for everything else
 * exactly where this middleware used to.
 */
export function jsonBodyUpTo(limit: number) {
  return (req: Request, res: Response, next: NextFunction): void => {
    readJsonWith(limit, req, res, next).catch(next);
  };
}

type RawRead = { ok: true; body: Buffer } | { ok: false; error: ServiceError };

/**
 * The body's bytes, at most `limit` of them. A declared Content-Length over the limit is
 * refused before a byte is read, a chunked body the moment it passes the limit; either
 * way the connection is then closed, not drained (body-parser read a refused body to its
 * end before answering, so a stranger could make the service read without bound).
 * Compressed request bodies are not accepted (415).
 */
function readRaw(req: Request, res: Response, limit: number): Promise<RawRead> {
  const tooLarge = (): RawRead => {
    refuseUnread(req, res);
    return { ok: false, error: new ServiceError('payload_too_large', `the body is larger than ${limit} bytes`) };
  };
  const encoding = String(req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== '') {
    refuseUnread(req, res);
    return Promise.resolve({ ok: false, error: new ServiceError('unsupported_media_type', 'request bodies must not be compressed (Content-Encoding)') });
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.resolve(tooLarge());
  if (req.complete && req.readableEnded) return Promise.resolve({ ok: true, body: Buffer.alloc(0) });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (r: RawRead) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      resolve(r);
    };
    function onData(chunk: Buffer): void {
      size += chunk.length;
      if (size > limit) {
        req.pause();
        return done(tooLarge());
      }
      chunks.push(chunk);
    }
    function onEnd(): void {
      done({ ok: true, body: Buffer.concat(chunks, size) });
    }
    function onError(): void {
      done({ ok: false, error: new ServiceError('invalid_request', 'the body could not be read') });
    }
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('aborted', onError);
  });
}

export const jsonBody = jsonBodyUpTo(MAX_BODY_BYTES);

/** Reads and parses the body as jsonBody does (errors recorded on req.bodyError), for a route that reads late. */
export function readJsonBody(req: Request, res: Response, limit: number): Promise<void> {
  return new Promise((resolve) => jsonBodyUpTo(limit)(req, res, () => resolve()));
}

/**
 * For an answer given before the body was read (an unauthenticated request, issue 9 hole
 * 8): the connection is closed after the answer instead of being drained for keep-alive,
 * so a stranger cannot make the service read (and discard) up to 64 MiB. Node would
 * otherwise resume the request after the response to reuse the connection.
 */
export function refuseUnread(req: Request, res: Response): void {
  const hasBody = (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') || req.headers['transfer-encoding'] !== undefined;
  if (!hasBody || req.complete || res.hasHeader('connection')) return;
  res.setHeader('Connection', 'close');
  res.once('finish', () => {
    const socket = req.socket;
    // Stop reading; the answer is already handed to the socket, which Node ends after it
    // (Connection: close). A client that keeps sending is cut off shortly after.
    socket.pause();
    setTimeout(() => socket.destroy(), 1000).unref();
  });
}

async function readJsonWith(limit: number, req: Request, res: Response, next: NextFunction): Promise<void> {
  const fail = (e: ServiceError): void => {
    req.bodyError = e;
    req.body = undefined;
    next();
  };
  const read = await readRaw(req, res, limit);
  if (!read.ok) return fail(read.error);
  const raw = read.body;
  req.rawBody = raw;
  req.body = undefined;
  const type = req.headers['content-type'];
  if (raw.length === 0) {
    if (type && JSON_TYPE.test(type)) req.emptyJsonBody = true;
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
}

const BODILESS_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

const sentABody = (req: Request): boolean => (req.rawBody?.length ?? 0) > 0;

function takesNoBody(req: Request): ServiceError {
  return new ServiceError('invalid_request', `${req.method} ${req.path} takes no body: send the request without one`);
}

/**
 * Answers what must be answered before any route runs (mounted after the public routers):
 * a body that was not read (413, compressed 415), and a body sent with GET, HEAD, DELETE
 * or OPTIONS, none of which takes one. Other body errors (415 for a non-JSON body, 400 for
 * JSON that does not parse) are answered by the route: requireJson throws them, and a
 * route that takes no body (noBody) answers 400 "takes no body" instead.
 */
export function rejectBadBody(req: Request, _res: Response, next: NextFunction): void {
  if (req.bodyError && req.rawBody === undefined) return next(req.bodyError);
  if (BODILESS_METHODS.has(req.method) && sentABody(req)) return next(takesNoBody(req));
  next();
}

/**
 * Route middleware for an operation that takes no body (suspend, resume, wake, rotate, ...):
 * an empty body is no body whatever its Content-Type; anything else is 400, before the
 * operation runs. test/integration/api-fuzz.test.ts checks every route of the router is
 * either this, a bodiless method, or reads its body with requireJson.
 */
export const noBody = Object.assign(
  // Request<any>: typed as a plain Request, Express would infer the route's params from it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  (req: Request<any>, _res: Response, next: NextFunction): void => {
    if (sentABody(req)) return next(takesNoBody(req));
    next();
  },
  { takesNoBody: true as const },
);

const emptyJson = (): ServiceError => new ServiceError('invalid_request', 'the body is empty but Content-Type says JSON');

/** For endpoints that need a body: none at all is 415 (no JSON was sent). */
export function requireJson(req: Request): unknown {
  if (req.bodyError) throw req.bodyError;
  if (req.emptyJsonBody) throw emptyJson();
  if (req.body === undefined) {
    throw new ServiceError('unsupported_media_type', 'this endpoint needs a JSON body with Content-Type: application/json');
  }
  return req.body;
}

/**
 * For an endpoint whose body is optional (release-lease): no body at all is undefined; an
 * empty body sent with the JSON Content-Type is 400 (service.md, Conventions).
 */
export function optionalJsonBody(req: Request): unknown {
  if (req.bodyError) throw req.bodyError;
  if (req.emptyJsonBody) throw emptyJson();
  return req.body;
}
