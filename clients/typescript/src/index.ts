/**
 * A typed client of the gateway's management API (issue 25, item 4). The types are
 * generated from the service's own OpenAPI document (src/schema.d.ts, `npm run generate`);
 * requests go through openapi-fetch, so every path, parameter, body and answer is checked
 * by the compiler:
 *
 *   const gw = createGatewayClient({ baseUrl: 'https://gateway.example.com', apiKey: 'sk_...' });
 *   const env = await unwrap(gw.POST('/v1/environments', { body: { end_user_id: 'user-1' } }));
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };
export type Schemas = components['schemas'];
export type Environment = Schemas['Environment'];
export type Approval = Schemas['Approval'];
export type Grant = Schemas['Grant'];
export type Secret = Schemas['Secret'];
export type Policy = Schemas['Policy'];
export type PolicyRule = Schemas['PolicyRule'];
export type ExecResult = Schemas['ExecResult'];
export type AuditEntry = Schemas['AuditEntry'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type BrowserLease = Schemas['BrowserLease'];
/** Every error: `{error, message}` with a code of docs/errors.md. */
export type ErrorBody = Schemas['Error'];

export type GatewayClient = Client<paths>;

export interface GatewayClientOptions extends Omit<ClientOptions, 'baseUrl' | 'headers'> {
  /** The service's BASE_URL (paths carry /v1 themselves). */
  baseUrl: string;
  /** An API key, `sk_<40 hex>`; sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  headers?: Record<string, string>;
}

export function createGatewayClient(opts: GatewayClientOptions): GatewayClient {
  const { baseUrl, apiKey, headers, ...rest } = opts;
  return createClient<paths>({ ...rest, baseUrl: baseUrl.replace(/\/+$/, ''), headers: { ...headers, Authorization: `Bearer ${apiKey}` } });
}

/** An error answer of the API, thrown by unwrap: `code` is the stable `error` of docs/errors.md. */
export class GatewayError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly body: unknown) {
    super(`${status} ${code}: ${message}`);
    this.name = 'GatewayError';
  }
}

/** The answer's data, or a GatewayError for an error answer. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || !response.ok) {
    const e = (error ?? {}) as Partial<ErrorBody>;
    throw new GatewayError(response.status, e.error ?? 'unknown', e.message ?? response.statusText, error);
  }
  return data as T;
}

export type ExecRequest = NonNullable<operations['postEnvironmentsByIdExec']['requestBody']>['content']['application/json'];

/**
 * POST /v1/environments/{id}/exec answered as JSON (the document also describes the
 * text/event-stream answer sent for `Accept: text/event-stream`, so the generic call's data
 * is a union of the two): runs the command and resolves with its result.
 */
export async function exec(gw: GatewayClient, environmentId: string, body: ExecRequest): Promise<ExecResult> {
  const out = await unwrap(gw.POST('/v1/environments/{id}/exec', { params: { path: { id: environmentId } }, body, headers: { Accept: 'application/json' } }));
  if (typeof out === 'string') throw new GatewayError(200, 'unexpected_stream', 'exec answered an event stream', out);
  return out;
}
