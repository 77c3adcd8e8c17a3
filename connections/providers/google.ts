import { request, type Dispatcher } from 'undici';
import { TokenExchangeError, postForm, str, type TokenSet } from './token-exchange.js';

/**
 * Google's authorization-code exchange (PKCE) and the account label. The email comes from
 * the id_token's payload: it was received directly from the token endpoint over verified TLS,
 * which OpenID Connect Core 3.1.3.7 accepts in place of checking its signature.
 */
export async function exchangeGoogleCode(http: Dispatcher, opts: {
  tokenUrl: string; clientId: string; clientSecret: string; code: string; redirectUri: string; codeVerifier: string; timeoutMs: number;
}): Promise<TokenSet> {
  const { status, json } = await postForm(http, opts.tokenUrl, {
    grant_type: 'authorization_code', code: opts.code, redirect_uri: opts.redirectUri, client_id: opts.clientId,
    client_secret: opts.clientSecret, code_verifier: opts.codeVerifier,
  }, opts.timeoutMs);
  if (status !== 200 || str(json.error)) throw new TokenExchangeError(str(json.error) ?? 'provider_error', `token endpoint answered ${status}`);
  const accessToken = str(json.access_token);
  if (!accessToken) throw new TokenExchangeError('provider_error', 'no access_token in the answer');
  return {
    accessToken,
    refreshToken: str(json.refresh_token),
    expiresIn: typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in : null,
    scopes: str(json.scope) === null ? null : str(json.scope)!.split(' ').filter(Boolean),
    account: await accountOf(http, str(json.id_token), accessToken, opts.timeoutMs),
  };
}

/**
 * The account's email: the id_token's `email` claim (Google puts it there); when the token
 * does not carry it (a provider that keeps claims for userinfo, as OpenID Connect allows),
 * the userinfo endpoint named by the issuer's discovery document (the id_token's `iss`),
 * asked with the new access token. Null when neither says.
 */
async function accountOf(http: Dispatcher, idToken: string | null, accessToken: string, timeoutMs: number): Promise<string | null> {
  const claims = claimsOf(idToken);
  if (typeof claims?.email === 'string') return claims.email.slice(0, 320);
  if (typeof claims?.iss !== 'string' || !/^https?:\/\//.test(claims.iss)) return null;
  try {
    const discovery = await getJson(http, `${claims.iss.replace(/\/+$/, '')}/.well-known/openid-configuration`, null, timeoutMs);
    const userinfo = typeof discovery?.userinfo_endpoint === 'string' ? discovery.userinfo_endpoint : null;
    if (!userinfo) return null;
    const info = await getJson(http, userinfo, accessToken, timeoutMs);
    return typeof info?.email === 'string' ? info.email.slice(0, 320) : null;
  } catch {
    return null; // the label is a convenience; the connection stands without it
  }
}

function claimsOf(idToken: string | null): { email?: unknown; iss?: unknown } | null {
  const payload = idToken?.split('.')[1];
  if (!payload) return null;
  try {
    return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { email?: unknown; iss?: unknown };
  } catch {
    return null;
  }
}

async function getJson(http: Dispatcher, url: string, bearer: string | null, timeoutMs: number): Promise<Record<string, unknown> | null> {
  const r = await request(url, { dispatcher: http, headers: { accept: 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
  const text = await r.body.text();
  if (r.statusCode !== 200 || text.length > 64 * 1024) return null;
  const json = JSON.parse(text) as unknown;
  return json && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
}
