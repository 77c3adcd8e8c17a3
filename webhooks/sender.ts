import type { LookupAddress } from 'node:dns';
import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import { createEgressGuard } from '../lib/egress-guard.js';
import { upstreamSecureContext } from '../lib/upstream-trust.js';

/**
 * The HTTP side of webhook delivery: one POST of the stored body to the endpoint URL.
 *
 * - Redirects are never followed (undici's dispatcher does not follow them); a 3xx is a
 *   failed attempt like any other non-2xx (service.md Delivery 1).
 * - One deadline covers the whole attempt: connect, headers and the (discarded) body.
 * - Unless private destinations are allowed (GATEWAY_ALLOW_PRIVATE_UPSTREAMS), every
 *   connection goes through lib/egress-guard.ts, the one function the proxy uses too: the
 *   host canonicalised (`2130706433` is 127.0.0.1), private literals refused without a
 *   lookup, names resolved once and connected to by the checked address (no rebinding
 *   window), and the address actually connected to checked again.
 * - TLS trusts what the proxy's upstream connections trust (lib/upstream-trust.ts): Node's
 *   roots plus GATEWAY_UPSTREAM_CA_FILE, so a receiver on a staging or internal CA that
 *   the operator configured for the proxy works for webhooks too. A certificate nothing
 *   trusts fails the attempt as `tls_error`.
 *
 * Every outcome is a value, with a fixed `error` word for failures.
 */
export type DeliveryErrorCode =
  | 'http_status' // a non-2xx, non-3xx status
  | 'redirect' // a 3xx: not followed
  | 'timeout' // no complete answer within the attempt's deadline
  | 'private_destination' // the host is, or resolves only to, loopback/private/link-local addresses
  | 'dns_error' // the name does not resolve
  | 'connection_refused'
  | 'connection_reset' // the connection closed before a complete answer
  | 'tls_error'
  | 'invalid_url'
  | 'connection_error' // any other transport failure
  | 'shutdown'; // this worker stopped mid-attempt

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  error: DeliveryErrorCode | null;
  durationMs: number;
}

export class PrivateDestinationError extends Error {
  readonly code = 'EWEBHOOK_PRIVATE_DESTINATION';
  constructor(readonly host: string, readonly reason: string) {
    super(`${host} is a ${reason} address; private destinations are not allowed`);
    this.name = 'PrivateDestinationError';
  }
}

export interface SenderOptions {
  allowPrivateDestinations: boolean;
  /** Deadline of one attempt (decisions.md: 10 s). */
  timeoutMs: number;
  /** Extra CA certificates (PEM, GATEWAY_UPSTREAM_CA_FILE) trusted on top of Node's roots. */
  extraCa?: string | null;
  /** Injected for tests; defaults to the system resolver. */
  resolve?: (host: string) => Promise<LookupAddress[]>;
  /** The service's own ports, shared with its other guards (lib/egress-guard.ts). */
  forbiddenPorts?: Set<number>;
}

export interface WebhookSender {
  send(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult>;
  close(): Promise<void>;
}

/** Response bodies are read (so the connection can be reused) and dropped past this. */
const MAX_RESPONSE_BYTES = 64 * 1024;

function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  return String(e?.code ?? e?.cause?.code ?? '');
}

/** The fixed word for a transport failure (undici and Node error codes). */
export function classifyError(err: unknown): DeliveryErrorCode {
  if (err instanceof PrivateDestinationError || (err as { cause?: unknown })?.cause instanceof PrivateDestinationError) return 'private_destination';
  const code = errorCode(err);
  if (code === 'EWEBHOOK_PRIVATE_DESTINATION' || code === 'EGRESS_PRIVATE_ADDRESS') return 'private_destination';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME' || code === 'EAI_FAIL') return 'dns_error';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'connection_reset';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'ETIMEDOUT') return 'timeout';
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY|HOSTNAME_MISMATCH/i.test(code)) return 'tls_error';
  return 'connection_error';
}

/** DNS answers (and failures) are shared for this long: a burst of attempts to one host makes one lookup. */
const DNS_CACHE_MS = 5_000;

export function createWebhookSender(opts: SenderOptions): WebhookSender {
  const allowPrivate = opts.allowPrivateDestinations;
  const guard = createEgressGuard({ allowPrivate, dnsCacheMs: DNS_CACHE_MS, forbiddenPorts: opts.forbiddenPorts, ...(opts.resolve ? { resolve: opts.resolve } : {}) });
  const dispatcher = new Agent({
    keepAliveTimeout: 4_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    connect: guard.connector({ timeout: opts.timeoutMs, secureContext: upstreamSecureContext(opts.extraCa) }) as never,
  });

  async function send(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult> {
    const started = performance.now();
    const done = (r: Omit<SendResult, 'durationMs'>): SendResult => ({ ...r, durationMs: Math.max(0, Math.round(performance.now() - started)) });
    let u: URL;
    try {
      u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
    } catch {
      return done({ ok: false, statusCode: null, error: 'invalid_url' });
    }
    // Refused literals (127.0.0.1, [::1], localhost, 2130706433) without a lookup or a connection.
    if (!allowPrivate) {
      const check = await guard.check(u.hostname, Number(u.port) || (u.protocol === 'https:' ? 443 : 80));
      if (!check.ok) return done({ ok: false, statusCode: null, error: check.code === 'egress_denied' ? 'private_destination' : 'dns_error' });
    }

    if (signal?.aborted) return done({ ok: false, statusCode: null, error: 'shutdown' });
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error('webhook attempt timed out'));
    }, opts.timeoutMs);
    const onOuterAbort = () => controller.abort(signal?.reason ?? new Error('aborted'));
    signal?.addEventListener('abort', onOuterAbort, { once: true });
    // The deadline and a shutdown end the attempt at once, whatever undici is waiting on
    // (a DNS answer is not abortable: the connect would only notice once it arrives).
    const ended = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
    });
    ended.catch(() => {});
    try {
      const pending = dispatcher.request({
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
        method: 'POST',
        headers,
        body,
        signal: controller.signal,
      });
      const res = await Promise.race([pending, ended]).catch((err: unknown) => {
        // Lost the race: drop whatever the request still brings.
        pending.then((late) => late.body.destroy(), () => {});
        throw err;
      });
      try {
        await res.body.dump({ limit: MAX_RESPONSE_BYTES, signal: controller.signal });
      } catch {
        // The status is what counts; a body cut short does not change the outcome.
      }
      const code = res.statusCode;
      if (code >= 200 && code < 300) return done({ ok: true, statusCode: code, error: null });
      return done({ ok: false, statusCode: code, error: code >= 300 && code < 400 ? 'redirect' : 'http_status' });
    } catch (err) {
      if (timedOut) return done({ ok: false, statusCode: null, error: 'timeout' });
      if (signal?.aborted) return done({ ok: false, statusCode: null, error: 'shutdown' });
      return done({ ok: false, statusCode: null, error: classifyError(err) });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onOuterAbort);
    }
  }

  return {
    send,
    async close() {
      await dispatcher.destroy();
    },
  };
}
