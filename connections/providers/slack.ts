import type { Dispatcher } from 'undici';
import { TokenExchangeError, postForm, str, type TokenSet } from './token-exchange.js';

/**
 * Slack's `oauth.v2.access` for a user token: the token, its scopes and (with token
 * rotation) its refresh token are under `authed_user`; Slack answers 200 with `ok: false`
 * and an `error` on failure. The account label is "<user id>@<team name>".
 */
export async function exchangeSlackCode(http: Dispatcher, opts: {
  tokenUrl: string; clientId: string; clientSecret: string; code: string; redirectUri: string; timeoutMs: number;
}): Promise<TokenSet> {
  const { json } = await postForm(http, opts.tokenUrl, {
    code: opts.code, redirect_uri: opts.redirectUri, client_id: opts.clientId, client_secret: opts.clientSecret,
  }, opts.timeoutMs);
  if (json.ok !== true) throw new TokenExchangeError(str(json.error) ?? 'provider_error', 'oauth.v2.access was not ok');
  const user = (json.authed_user ?? {}) as Record<string, unknown>;
  const team = (json.team ?? {}) as Record<string, unknown>;
  const accessToken = str(user.access_token);
  if (!accessToken) throw new TokenExchangeError('provider_error', 'no user token in the answer (was a bot scope asked for?)');
  const userId = str(user.id);
  const teamName = str(team.name) ?? str(team.id);
  return {
    accessToken,
    refreshToken: str(user.refresh_token),
    expiresIn: typeof user.expires_in === 'number' && user.expires_in > 0 ? user.expires_in : null,
    scopes: str(user.scope) === null ? null : str(user.scope)!.split(',').filter(Boolean),
    account: userId ? `${userId}${teamName ? `@${teamName}` : ''}`.slice(0, 320) : null,
  };
}
