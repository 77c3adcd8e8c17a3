import type { ServerResponse } from 'node:http';
import { startFakeUpstream, type FakeUpstream, type Seen } from './upstream.js';

/** The real credentials the fake APIs accept; the agent only ever holds placeholders. */
export interface FakeApiTokens {
  google: string;
  slack: string;
  stripe: string;
}

export interface FakeApis {
  up: FakeUpstream;
  port: number;
  /** Requests one host received (Host header, port dropped). */
  seenBy(host: string): Seen[];
  close(): Promise<void>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function bearer(req: Seen): string | null {
  const a = req.headers.authorization;
  return typeof a === 'string' && /^Bearer /i.test(a) ? a.slice(7) : null;
}

function hostOf(req: Seen): string {
  return String(req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
}

/** Gmail v1 (gmail.googleapis.com, www.googleapis.com): enough for googleapis' gmail client. */
function google(req: Seen, res: ServerResponse, token: string): void {
  if (bearer(req) !== token) {
    return json(res, 401, { error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' } });
  }
  const path = req.url.split('?')[0]!;
  let m: RegExpExecArray | null;
  if (req.method === 'GET' && (m = /^\/gmail\/v1\/users\/([^/]+)\/messages$/.exec(path))) {
    return json(res, 200, { messages: [{ id: '18c1f0a2b3c4d5e6', threadId: '18c1f0a2b3c4d5e6' }], resultSizeEstimate: 1, user: decodeURIComponent(m[1]!) });
  }
  if (req.method === 'POST' && /^\/(upload\/)?gmail\/v1\/users\/[^/]+\/messages\/send$/.test(path)) {
    return json(res, 200, { id: '18c1f0a2b3c4d5ff', threadId: '18c1f0a2b3c4d5ff', labelIds: ['SENT'] });
  }
  json(res, 404, { error: { code: 404, message: 'Requested entity was not found.', status: 'NOT_FOUND' } });
}

/** Slack Web API (slack.com/api/<method>): the token comes as a Bearer header or a form field. */
function slack(req: Seen, res: ServerResponse, token: string): void {
  const form = new URLSearchParams(String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded') ? req.body.toString('utf8') : '');
  const given = bearer(req) ?? form.get('token');
  if (given !== token) return json(res, 200, { ok: false, error: 'invalid_auth' });
  const method = req.url.split('?')[0]!.replace(/^\/api\//, '');
  if (method === 'conversations.history') {
    return json(res, 200, {
      ok: true,
      messages: [{ type: 'message', user: 'U012AB3CDE', text: 'hello from the fake', ts: '1700000000.000100' }],
      has_more: false,
      pin_count: 0,
      response_metadata: { next_cursor: '' },
    });
  }
  if (method === 'chat.postMessage') {
    const channel = form.get('channel') ?? 'C0123456789';
    return json(res, 200, { ok: true, channel, ts: '1700000001.000200', message: { type: 'message', text: form.get('text') ?? '', ts: '1700000001.000200' } });
  }
  json(res, 200, { ok: false, error: 'unknown_method' });
}

/** Stripe (api.stripe.com): the key as a Bearer header or Basic user (curl -u key:). */
function stripe(req: Seen, res: ServerResponse, token: string): void {
  const a = String(req.headers.authorization ?? '');
  const basic = /^Basic\s+(.+)$/i.exec(a);
  const given = basic ? Buffer.from(basic[1]!, 'base64').toString('utf8').replace(/:.*$/, '') : bearer(req);
  if (given !== token) return json(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
  const path = req.url.split('?')[0]!;
  if (req.method === 'GET' && path === '/v1/balance') return json(res, 200, { object: 'balance', available: [{ amount: 0, currency: 'usd' }], livemode: false, pending: [] });
  if (req.method === 'GET' && path === '/v1/customers') return json(res, 200, { object: 'list', data: [], has_more: false, url: '/v1/customers' });
  if (req.method === 'POST' && path === '/v1/payment_intents') {
    const form = new URLSearchParams(req.body.toString('utf8'));
    return json(res, 200, { id: 'pi_3Nfake', object: 'payment_intent', amount: Number(form.get('amount')), currency: form.get('currency'), status: 'requires_payment_method' });
  }
  json(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${path})` } });
}

/**
 * One local HTTPS server standing in for Gmail, Slack and Stripe (routed by Host, as the
 * gateway's GATEWAY_UPSTREAM_OVERRIDES keeps Host and SNI). It answers only to the real
 * tokens, the way the real APIs do, so a client that got a placeholder through would see
 * an authentication error, and it answers in the JSON shapes the official clients parse.
 */
export async function startFakeApis(tokens: FakeApiTokens): Promise<FakeApis> {
  const up = await startFakeUpstream();
  up.respond = (req, res) => {
    const host = hostOf(req);
    if (host === 'googleapis.com' || host.endsWith('.googleapis.com')) return google(req, res, tokens.google);
    if (host === 'slack.com') return slack(req, res, tokens.slack);
    if (host === 'api.stripe.com') return stripe(req, res, tokens.stripe);
    json(res, 404, { error: 'unknown host', host });
  };
  return {
    up,
    port: up.port,
    seenBy: (host) => up.seen.filter((s) => hostOf(s) === host),
    close: () => up.close(),
  };
}
