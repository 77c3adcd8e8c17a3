import type { Dispatcher } from 'undici';
import { TokenExchangeError, postForm, str, type TokenSet } from './token-exchange.js';
import type { Provider } from '../providers.js';

/**
 * A refresh-token grant at the provider. Google answers a new access token (the refresh token
 * stays); Slack, with token rotation, answers a new access token AND a new refresh token every
 * time (the old one stops working: both must be saved together). `invalid_grant` (Google) or
 * `invalid_refresh_token` (Slack) means the end user must connect again.
 */
export async function refreshAt(http: Dispatcher, provider: Provider, opts: {
  tokenUrl: string; clientId: string; clientSecret: string; refreshToken: string; timeoutMs: number;
}): Promise<Omit<TokenSet, 'account'>> {
  const { status, json } = await postForm(http, opts.tokenUrl, {
    grant_type: 'refresh_token', refresh_token: opts.refreshToken, client_id: opts.clientId, client_secret: opts.clientSecret,
  }, opts.timeoutMs);
  if (provider === 'slack' ? json.ok !== true : status !== 200 || str(json.error)) {
    throw new TokenExchangeError(str(json.error) ?? 'provider_error', `refresh answered ${status}`);
  }
  // Slack puts a refreshed user token at the top level; an answer shaped like the first exchange has it under authed_user.
  const src = provider === 'slack' && !str(json.access_token) && json.authed_user ? (json.authed_user as Record<string, unknown>) : json;
  const accessToken = str(src.access_token);
  if (!accessToken) throw new TokenExchangeError('provider_error', 'no access_token in the refresh answer');
  return {
    accessToken,
    refreshToken: str(src.refresh_token),
    expiresIn: typeof src.expires_in === 'number' && src.expires_in > 0 ? src.expires_in : null,
    scopes: str(src.scope) === null ? null : str(src.scope)!.split(provider === 'slack' ? ',' : ' ').filter(Boolean),
  };
}

/** Errors that mean the grant is gone (not a passing failure). */
export const GRANT_GONE = new Set(['invalid_grant', 'invalid_refresh_token', 'token_revoked', 'token_expired', 'unauthorized_client', 'invalid_client']);
