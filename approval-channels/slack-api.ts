import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { createEgressGuard } from '../lib/egress-guard.js';
import { upstreamSecureContext } from '../lib/upstream-trust.js';

/**
 * The calls the gateway makes to Slack: chat.postMessage and chat.update with the bot token
 * to the channel's api_base_url, and ephemeral replies to an interaction's response_url.
 *
 * - Requests are encoded as the official client (@slack/web-api) encodes them:
 *   `application/x-www-form-urlencoded`, objects (blocks) as JSON text, the token only in
 *   `Authorization: Bearer xoxb-...`, never in the body or the URL, and only to
 *   api_base_url's host. A response_url gets JSON and no token at all.
 * - Every connection goes through lib/egress-guard.ts, as webhook delivery does: loopback,
 *   private and link-local destinations are refused unless GATEWAY_ALLOW_PRIVATE_UPSTREAMS,
 *   names resolved once and connected to by the checked address. Redirects are not followed.
 * - One deadline per call; answers are read up to 256 KiB.
 * - Outcomes are values with a fixed `error` word: Slack's own (`channel_not_found`,
 *   `invalid_auth`, `ratelimited`, ...) or a transport word (`timeout`, `private_destination`).
 *   Never a token in them.
 */
export interface SlackCallResult {
  ok: boolean;
  statusCode: number | null;
  /** Slack's `error`, or a transport word; null on success. */
  error: string | null;
  /** chat.postMessage / chat.update: the message's ts. */
  ts: string | null;
  /** Seconds Slack asked to wait (429 Retry-After), if it did. */
  retryAfterSecs: number | null;
  durationMs: number;
}

export interface SlackApiOptions {
  allowPrivateDestinations: boolean;
  timeoutMs?: number;
  extraCa?: string | null;
  overrides?: Readonly<Record<string, { host: string; port: number }>>;
  /** The service's own ports, shared with its other guards (lib/egress-guard.ts). */
  forbiddenPorts?: Set<number>;
}

const MAX_ANSWER = 256 * 1024;
export const DEFAULT_SLACK_TIMEOUT_MS = 10_000;

function transportWord(err: unknown): string {
  const e = err as { code?: string; cause?: { code?: string }; name?: string } | null;
  const code = String(e?.code ?? e?.cause?.code ?? '');
  if (code === 'EGRESS_PRIVATE_ADDRESS') return 'private_destination';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_error';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'connection_reset';
  if (code.includes('TIMEOUT') || e?.name === 'AbortError' || e?.name === 'TimeoutError') return 'timeout';
  if (/CERT|TLS|SSL/i.test(code)) return 'tls_error';
  return 'connection_error';
}

function parseJson(text: string): { ok?: unknown; error?: unknown; ts?: unknown } | null {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as { ok?: unknown; error?: unknown; ts?: unknown }) : null;
  } catch {
    return null;
  }
}

/** Form encoding as @slack/web-api's serializeBody: strings, numbers and booleans as they are, anything else as JSON. */
export function formEncode(args: Record<string, unknown>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) {
    if (v === undefined || v === null) continue;
    p.append(k, typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v));
  }
  return p.toString();
}

export function createSlackApi(opts: SlackApiOptions) {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_SLACK_TIMEOUT_MS;
  const guard = createEgressGuard({ allowPrivate: opts.allowPrivateDestinations, overrides: opts.overrides, dnsCacheMs: 5_000, forbiddenPorts: opts.forbiddenPorts });
  const dispatcher = new Agent({
    keepAliveTimeout: 4_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: guard.connector({ timeout: timeoutMs, secureContext: upstreamSecureContext(opts.extraCa) }) as never,
  });

  async function post(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SlackCallResult> {
    const started = performance.now();
    const done = (r: Omit<SlackCallResult, 'durationMs'>): SlackCallResult => ({ ...r, durationMs: Math.round(performance.now() - started) });
    let u: URL;
    try {
      u = new URL(url);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('scheme');
    } catch {
      return done({ ok: false, statusCode: null, error: 'invalid_url', ts: null, retryAfterSecs: null });
    }
    const deadline = AbortSignal.timeout(timeoutMs);
    const both = signal ? AbortSignal.any([signal, deadline]) : deadline;
    try {
      const res = await request(u, { method: 'POST', headers, body, dispatcher, signal: both });
      let size = 0;
      const chunks: Buffer[] = [];
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size <= MAX_ANSWER) chunks.push(chunk as Buffer);
      }
      const text = Buffer.concat(chunks).toString('utf8');
      const retryAfter = Number(res.headers['retry-after']);
      const retryAfterSecs = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null;
      if (res.statusCode === 429) return done({ ok: false, statusCode: 429, error: 'ratelimited', ts: null, retryAfterSecs: retryAfterSecs ?? 30 });
      if (res.statusCode < 200 || res.statusCode >= 300) {
        return done({ ok: false, statusCode: res.statusCode, error: res.statusCode >= 300 && res.statusCode < 400 ? 'redirect' : 'http_status', ts: null, retryAfterSecs });
      }
      // A response_url answers `ok` as text; the Web API answers JSON {ok, ...}.
      const json = parseJson(text);
      if (json) {
        if (json.ok === true) return done({ ok: true, statusCode: res.statusCode, error: null, ts: typeof json.ts === 'string' ? json.ts : null, retryAfterSecs: null });
        if (json.ok === false) {
          const word = typeof json.error === 'string' && /^[a-z0-9_]{1,100}$/.test(json.error) ? json.error : 'slack_error';
          return done({ ok: false, statusCode: res.statusCode, error: word, ts: null, retryAfterSecs });
        }
      }
      return done({ ok: true, statusCode: res.statusCode, error: null, ts: null, retryAfterSecs: null });
    } catch (err) {
      return done({ ok: false, statusCode: null, error: transportWord(err), ts: null, retryAfterSecs: null });
    }
  }

  /** A Web API method (`chat.postMessage`) at `baseUrl` with the bot token. */
  function call(baseUrl: string, method: string, token: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<SlackCallResult> {
    const url = `${baseUrl.replace(/\/+$/, '')}/${method}`;
    return post(url, {
      authorization: `Bearer ${token}`,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
      'user-agent': 'agent-gateway-slack/1',
    }, formEncode(args), signal);
  }

  /** An ephemeral reply through an interaction's response_url: JSON, no token. */
  function respond(responseUrl: string, text: string, signal?: AbortSignal): Promise<SlackCallResult> {
    return post(responseUrl, { 'content-type': 'application/json', 'user-agent': 'agent-gateway-slack/1' },
      JSON.stringify({ response_type: 'ephemeral', replace_original: false, text }), signal);
  }

  return {
    call,
    respond,
    async close(): Promise<void> {
      await dispatcher.close();
    },
  };
}

export type SlackApi = ReturnType<typeof createSlackApi>;
