import type { Dispatcher } from 'undici';
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
    scopes: (str(json.scope) ?? '').split(' ').filter(Boolean),
    account: emailOf(str(json.id_token)),
  };
}

function emailOf(idToken: string | null): string | null {
  const payload = idToken?.split('.')[1];
  if (!payload) return null;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { email?: unknown };
    return typeof claims.email === 'string' ? claims.email.slice(0, 320) : null;
  } catch {
    return null;
  }
}
