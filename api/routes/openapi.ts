import { Router } from 'express';
import Joi from 'joi';
import { noBody } from '../middleware/json-body.js';
import { describeRoute } from '../openapi/route-spec.js';
import type { OpenApiDocument } from '../openapi/document.js';

/**
 * GET /v1/openapi.json, public (issue 25, item 3): the OpenAPI 3.1 document createApp
 * generated at start from the routes it mounted (app.locals.openapi), with `servers` set to
 * the service's BASE_URL (known once the API listens, hence a function).
 */
export function openapiRouter(deps: { baseUrl: () => string }): Router {
  const r = Router();
  r.get('/openapi.json', noBody, describeRoute({
    summary: 'This document: the OpenAPI 3.1 description of every route, generated from the routes and their joi schemas at start',
    tag: 'meta',
    auth: 'none',
    responses: { 200: { description: 'The OpenAPI 3.1 document', content: { 'application/json': Joi.object().unknown(true).description('An OpenAPI 3.1 document') } } },
  }), (req, res) => {
    const { openapi, info, ...rest } = req.app.locals.openapi as OpenApiDocument;
    const url = deps.baseUrl();
    res.json({ openapi, info, ...(url ? { servers: [{ url }] } : {}), ...rest });
  });
  return r;
}
