import { request, type Dispatcher } from 'undici';

/** What a provider's token endpoint gave, normalised (google.ts, slack.ts). */
export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  /** Seconds, or null when the token does not expire (Slack without rotation). */
  expiresIn: number | null;
  /**
   * Scopes granted (a user may untick some); null when the answer leaves `scope` out, which
   * RFC 6749 (5.1) allows only when it is exactly the scope requested.
   */
  scopes: string[] | null;
  /** The account label: Google's email, Slack's user and team. */
  account: string | null;
}

/** A token call that failed: `reason` goes to the developer (`status=error&error=<reason>`), never a token. */
export class TokenExchangeError extends Error {
  constructor(readonly reason: string, detail: string) {
    super(`${reason}: ${detail}`);
    this.name = 'TokenExchangeError';
  }
}

/** At most this much of a token endpoint's answer is read. */
const MAX_ANSWER = 64 * 1024;

/**
 * POSTs a form to a provider's token endpoint through the egress-guarded dispatcher and
 * returns its JSON. Transport failures, timeouts, non-JSON and oversized answers are
 * TokenExchangeErrors with a fixed reason; the HTTP status is returned for the caller to
 * read the provider's own error.
 */
export async function postForm(http: Dispatcher, url: string, form: Record<string, string>, timeoutMs: number): Promise<{ status: number; json: Record<string, unknown> }> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, {
      dispatcher: http, method: 'POST', body: new URLSearchParams(form).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const code = (err as { code?: string; name?: string }).code ?? (err as { name?: string }).name ?? 'unknown';
    throw new TokenExchangeError(/TIMEOUT|Timeout|AbortError/.test(code) ? 'provider_timeout' : 'provider_unreachable', code);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res.body) {
    size += (c as Buffer).length;
    if (size > MAX_ANSWER) {
      res.body.destroy();
      throw new TokenExchangeError('provider_error', 'the token endpoint answered more than 64 KiB');
    }
    chunks.push(c as Buffer);
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new TokenExchangeError('provider_error', `the token endpoint answered ${res.statusCode} without JSON`);
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new TokenExchangeError('provider_error', 'the token endpoint answered something other than a JSON object');
  return { status: res.statusCode, json: json as Record<string, unknown> };
}

export const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
