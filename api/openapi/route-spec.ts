import type { NextFunction, Request, Response } from 'express';
import type Joi from 'joi';
import type { ErrorCode } from '../../lib/errors.js';

/**
 * What a route says about itself for the OpenAPI document (issue 25, item 3). A route
 * carries it as a pass-through middleware, `describeRoute({...})`, next to its handler,
 * and listRoutes (api/app.ts) reads it from the router the way it reads `noBody`: the
 * document is generated from the routes the router serves, with the joi schemas the
 * routes validate with, so neither can drift from the other. A route without one is still
 * listed in the document (marked `x-undocumented`), and test/integration/openapi.test.ts
 * fails.
 */

/** A success answer: JSON of this schema; `null` for no content (204); or spelled out. */
export type ResponseSpec =
  | Joi.Schema
  | null
  | {
    description: string;
    /** Content type → schema (a joi schema, or a JSON Schema object for text bodies). */
    content?: Record<string, Joi.Schema | Record<string, unknown>>;
    headers?: Record<string, { description: string; schema?: Record<string, unknown> }>;
  };

export interface RouteSpec {
  summary: string;
  description?: string;
  /** Default: the path's first segment after /v1 (`environments`), `operations` at the root. */
  tag?: string;
  /** Default: derived from the method and path (`getEnvironmentsById`). */
  operationId?: string;
  /** Path parameters by name; a parameter not named here is a plain string. */
  params?: Record<string, Joi.Schema>;
  /** Query parameters, each a joi schema with its description. */
  query?: Joi.ObjectSchema;
  /** Request headers the route reads (Idempotency-Key, Accept). */
  headers?: Record<string, Joi.Schema>;
  /** The JSON body, the very schema the route validates with. */
  body?: Joi.Schema;
  /** The body may be left out (release-lease). Default: required when `body` is set. */
  bodyOptional?: boolean;
  /** Success answers by status. */
  responses: Record<number, ResponseSpec>;
  /**
   * Error codes of lib/errors.ts the route itself answers (statuses from the registry).
   * The document adds those every route of its kind can answer: 400 invalid_request
   * (undecodable path or query), 401 unauthorized (behind the key), 404 not_found (a path
   * parameter), 413/415/400 for a body, 422 invalid_body for a joi body.
   */
  errors?: readonly ErrorCode[];
  /**
   * Who may call: `key` (Authorization: Bearer sk_...), `none` (public), or
   * `key_or_signature` (the decision endpoint: a key or a signed callback). Default: `none`
   * on a public or root router, `key` on the others.
   */
  auth?: 'key' | 'none' | 'key_or_signature';
}

// Request<any>, as noBody's: typed as a plain Request, Express would infer the route's params from it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type DescribedHandler = ((req: Request<any>, res: Response, next: NextFunction) => void) & { openapi: RouteSpec };

/** The annotation: a middleware that only passes on, carrying the route's spec for listRoutes. */
export function describeRoute(spec: RouteSpec): DescribedHandler {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const pass = (_req: Request<any>, _res: Response, next: NextFunction): void => next();
  return Object.assign(pass, { openapi: Object.freeze(spec) });
}

/** The spec a route's stack carries, if any. */
export function specOf(handle: unknown): RouteSpec | undefined {
  return (handle as { openapi?: RouteSpec } | null)?.openapi;
}
