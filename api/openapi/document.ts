import Joi from 'joi';
import { ERROR_CODES, type ErrorCode } from '../../lib/errors.js';
import { errorRecord } from '../schemas/records.js';
import { SchemaComponents, type JsonSchema } from './joi-to-json-schema.js';
import type { ResponseSpec, RouteSpec } from './route-spec.js';

/**
 * The OpenAPI 3.1 document of the management API, generated at start from the routes the
 * router serves (api/app.ts listRoutes) and their `describeRoute` annotations (issue 25,
 * item 3). docs/api.md, "OpenAPI document", says what it holds and what it leaves out.
 */

/** What the generator needs of a route (api/app.ts RouteInfo). */
export interface DocumentedRoute {
  method: string;
  /** The Express path: `/v1/environments/:id`, or `/healthz` for a root route. */
  path: string;
  public: boolean;
  bodiless: boolean;
  spec?: RouteSpec;
  /** A WebSocket endpoint the server's `upgrade` handler serves (not an Express route): refusals are bare statuses. */
  websocket?: boolean;
}

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, Record<string, unknown>>> };

export const API_TITLE = 'Agent gateway management API';
export const API_VERSION = '1';

const REASONS: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 302: 'Found', 400: 'Bad Request', 401: 'Unauthorized',
  403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  422: 'Unprocessable Content', 429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable',
};

/** `/v1/environments/:id` → `/v1/environments/{id}`. */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

function paramNames(expressPath: string): string[] {
  return [...expressPath.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
}

/** `GET /v1/environments/:id/secrets/:name` → `getEnvironmentsByIdSecretsByName`. */
export function operationIdOf(method: string, expressPath: string): string {
  const words = expressPath.replace(/^\/v1\//, '/').split('/').filter(Boolean).map((seg) => {
    const param = /^:(.+)$/.exec(seg);
    const word = (param ? `by_${param[1]}` : seg).split(/[^A-Za-z0-9]+/).filter(Boolean);
    return word.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
  });
  return method.toLowerCase() + words.join('');
}

const isJoi = (v: unknown): v is Joi.Schema => Joi.isSchema(v);

/** The error codes a route can answer beyond the ones it names, by what kind of route it is. */
function impliedErrors(route: DocumentedRoute, spec: RouteSpec | undefined, auth: string): ErrorCode[] {
  const out: ErrorCode[] = ['invalid_request'];
  if (auth === 'key') out.push('unauthorized');
  if (auth === 'key_or_signature') out.push('unauthorized', 'invalid_signature');
  if (paramNames(route.path).length > 0) out.push('not_found');
  if (!route.bodiless) {
    out.push('unsupported_media_type', 'payload_too_large');
    if (spec?.body) out.push('invalid_body');
  }
  return out;
}

function defaultAuth(route: DocumentedRoute): 'key' | 'none' {
  return route.public ? 'none' : 'key';
}

export interface BuildOptions {
  /** `servers[0].url`; set per answer (BASE_URL is known once the API listens). */
  serverUrl?: string;
}

/** Builds the document. Throws on a schema the converter cannot express (the start fails, and the tests). */
export function buildOpenApiDocument(routes: readonly DocumentedRoute[], opts: BuildOptions = {}): OpenApiDocument {
  const components = new SchemaComponents();
  const errorRef = components.convert(errorRecord);
  const toSchema = (s: Joi.Schema | Record<string, unknown>): JsonSchema => (isJoi(s) ? components.convert(s) : s);

  const errorResponse = (codes: ErrorCode[]): Record<string, unknown> => ({
    description: codes.map((c) => `\`${c}\`: ${ERROR_CODES[c].meaning}`).join('\n\n'),
    content: {
      'application/json': {
        schema: { allOf: [errorRef, { type: 'object', properties: { error: { enum: codes } } }] },
      },
    },
  });

  const successResponse = (status: number, r: ResponseSpec): Record<string, unknown> => {
    if (r === null) return { description: REASONS[status] ?? 'No content' };
    if (isJoi(r)) return { description: REASONS[status] ?? 'OK', content: { 'application/json': { schema: components.convert(r) } } };
    const out: Record<string, unknown> = { description: r.description };
    if (r.content) out.content = Object.fromEntries(Object.entries(r.content).map(([type, s]) => [type, { schema: toSchema(s) }]));
    if (r.headers) out.headers = r.headers;
    return out;
  };

  const paths: OpenApiDocument['paths'] = {};
  const errorResponses: Record<string, Record<string, unknown>> = {};
  const operationIds = new Set<string>();
  for (const route of routes) {
    const spec = route.spec;
    const method = route.method.toLowerCase();
    const path = openApiPath(route.path);
    const auth = spec?.auth ?? defaultAuth(route);
    const op: Record<string, unknown> = {};
    const root = !route.path.startsWith('/v1/');
    op.tags = [spec?.tag ?? (root ? 'operations' : route.path.split('/')[2]!)];
    op.summary = spec?.summary ?? `${route.method} ${route.path}`;
    if (spec?.description) op.description = spec.description;
    let id = spec?.operationId ?? operationIdOf(route.method, route.path);
    if (operationIds.has(id)) id = `${id}_${operationIds.size}`;
    operationIds.add(id);
    op.operationId = id;
    if (!spec) op['x-undocumented'] = true;
    if (route.websocket) op['x-websocket'] = true;

    const parameters: Array<Record<string, unknown>> = [];
    for (const name of paramNames(route.path)) {
      const s = spec?.params?.[name];
      const schema: JsonSchema = s ? components.convert(s) : { type: 'string' };
      const description = schema.description;
      delete schema.description;
      parameters.push({ name, in: 'path', required: true, schema, ...(description ? { description } : {}) });
    }
    const queryKeys = (spec?.query?.describe() as { keys?: Record<string, { flags?: { presence?: string; description?: string } }> } | undefined)?.keys ?? {};
    for (const name of Object.keys(queryKeys)) {
      const child = spec!.query!.extract(name) as Joi.Schema;
      const schema = components.convert(child);
      const description = queryKeys[name]!.flags?.description;
      delete schema.description;
      parameters.push({ name, in: 'query', required: queryKeys[name]!.flags?.presence === 'required', schema, ...(description ? { description } : {}) });
    }
    for (const [name, s] of Object.entries(spec?.headers ?? {})) {
      const schema = components.convert(s);
      const description = schema.description;
      delete schema.description;
      parameters.push({ name, in: 'header', required: (s.describe() as { flags?: { presence?: string } }).flags?.presence === 'required', schema, ...(description ? { description } : {}) });
    }
    if (parameters.length > 0) op.parameters = parameters;

    if (spec?.body) {
      op.requestBody = { required: !spec.bodyOptional, content: { 'application/json': { schema: components.convert(spec.body) } } };
    } else if (!route.bodiless) {
      op.requestBody = { required: true, content: { 'application/json': { schema: {} } } };
    }

    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(spec?.responses ?? { 200: { description: 'OK' } })) responses[status] = successResponse(Number(status), r);
    const codes = route.websocket ? [] : [...new Set([...impliedErrors(route, spec, auth), ...(spec?.errors ?? [])])];
    const byStatus = new Map<number, ErrorCode[]>();
    for (const c of codes) byStatus.set(ERROR_CODES[c].status, [...(byStatus.get(ERROR_CODES[c].status) ?? []), c]);
    for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
      const group = byStatus.get(status)!;
      const err = errorResponse(group);
      const mine = responses[String(status)] as { description: string; content?: Record<string, unknown> } | undefined;
      if (mine) {
        // A status the route answers itself (the OAuth callback's 400 page) keeps its content
        // and gains the JSON error the middleware in front of it can answer with.
        responses[String(status)] = { ...mine, description: `${mine.description}\n\n${err.description as string}`, content: { ...(err.content as object), ...mine.content } };
      } else {
        // One shared response per set of codes (components.responses), not a copy per route.
        const name = group.join('-');
        errorResponses[name] ??= err;
        responses[String(status)] = { $ref: `#/components/responses/${name}` };
      }
    }
    op.responses = responses;

    if (auth === 'none') op.security = [];
    else if (auth === 'key_or_signature') op.security = [{ apiKey: [] }, { signature: [] }];
    // `key`: the document's default security.

    (paths[path] ??= {})[method] = op;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: API_TITLE,
      version: API_VERSION,
      description: 'The management API of the credential gateway, generated from its routes and joi schemas at start. '
        + 'Conventions, decisions and error codes: docs/api.md and docs/errors.md.',
    },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    security: [{ apiKey: [] }],
    paths,
    components: {
      schemas: components.schemas,
      responses: Object.fromEntries(Object.entries(errorResponses).sort(([a], [b]) => a.localeCompare(b))),
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer sk_<40 lowercase hex>' },
        signature: { type: 'apiKey', in: 'header', name: 'Service-Signature', description: 'A signed approval callback (docs/webhooks.md): t=<unix seconds>,v1=<HMAC-SHA256 of t.body>' },
      },
    },
  };
}
