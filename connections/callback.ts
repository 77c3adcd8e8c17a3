import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import { notFound } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { enqueueEvent } from '../webhooks/outbox.js';
import type { OAuthClientsService } from './oauth-clients.service.js';
import { CONNECTOR_SCOPES, isProvider, type Connector, type Provider, type ProviderEndpoints } from './providers.js';
import { exchangeGoogleCode } from './providers/google.js';
import { exchangeSlackCode } from './providers/slack.js';
import { TokenExchangeError, type TokenSet } from './providers/token-exchange.js';

/** What the callback answers: a redirect to the developer's return_url, or a page of its own. */
export type CallbackOutcome = { kind: 'redirect'; location: string } | { kind: 'page'; status: 400; title: string; text: string };

interface StateRow {
  state_hash: string;
  developer_id: string;
  end_user_id: string;
  provider: string;
  connectors: string;
  return_url: string;
  code_verifier_enc: string | null;
  /** The app the authorize link was made for. */
  client_source: 'developer' | 'platform';
  expires_at: number;
  used_at: number | null;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
/** Reasons passed on to the developer: a provider's error code, or ours; never free text. */
const reasonOf = (s: string): string => (/^[a-z0-9_.-]{1,64}$/i.test(s) ? s : 'provider_error');
export const tokenContext = (connectionId: string, which: 'access' | 'refresh') => `connection:${connectionId}:${which}`;

/**
 * GET /v1/oauth/{provider}/callback (public; service.md Connections): the one-time state is
 * consumed first (a used, expired or unknown one is a 400 page, never a redirect), then the
 * code is exchanged (undici through the egress guard, with a timeout), the tokens sealed, the
 * granted scopes checked, and the connection stored; authorizing again for the same
 * developer, end user and provider revokes the old connection in the same transaction and
 * `connection.created` carries `replaced`.
 */
export function createCallbackHandler(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  http: Dispatcher;
  oauthClients: Pick<OAuthClientsService, 'resolve' | 'redirectUri'>;
  endpoints: Readonly<Record<Provider, ProviderEndpoints>>;
  timeoutMs: number;
  /** Called after a connection was stored (and one replaced): the gateway's stand-in lookups are stale. */
  onChange?: () => void;
}) {
  const { db, clock, keyring, log } = deps;

  function redirect(returnUrl: string, params: Record<string, string>): CallbackOutcome {
    const u = new URL(returnUrl);
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    return { kind: 'redirect', location: u.toString() };
  }
  const page = (title: string, text: string): CallbackOutcome => ({ kind: 'page', status: 400, title, text });

  async function handle(provider: string, query: Record<string, unknown>): Promise<CallbackOutcome> {
    if (!isProvider(provider)) throw notFound();
    const state = typeof query.state === 'string' ? query.state : '';
    if (!state || state.length > 200) return page('Missing sign-in state', 'This page needs the link the app gave you. Start the connection again from the app.');
    const stateHash = sha256(state);
    const row = await db<StateRow>('oauth_states').where({ state_hash: stateHash, provider }).first();
    if (!row) return page('Unknown sign-in link', 'This sign-in link is not valid. Start the connection again from the app.');
    // Single use, atomically: of two callbacks with one state only one goes on.
    const now = clock.nowMs();
    const taken = await db('oauth_states').where({ state_hash: stateHash }).whereNull('used_at').where('expires_at', '>', now).update({ used_at: now });
    if (taken !== 1) return page('Sign-in link expired or used', 'This sign-in link has expired or was already used. Start the connection again from the app.');

    const returnUrl = row.return_url;
    if (typeof query.error === 'string' && query.error !== '') return redirect(returnUrl, { status: 'error', error: reasonOf(query.error) });
    const code = typeof query.code === 'string' ? query.code : '';
    if (!code) return redirect(returnUrl, { status: 'error', error: 'missing_code' });
    // The app the link was made for (its client id is in the authorize URL the code was issued to).
    const client = await deps.oauthClients.resolve(row.developer_id, provider, row.client_source);
    if (!client) return redirect(returnUrl, { status: 'error', error: 'no_oauth_client' });

    let tokens: TokenSet;
    try {
      const common = { tokenUrl: deps.endpoints[provider].tokenUrl, clientId: client.clientId, clientSecret: client.clientSecret, code, redirectUri: deps.oauthClients.redirectUri(provider), timeoutMs: deps.timeoutMs };
      tokens = provider === 'google'
        ? await exchangeGoogleCode(deps.http, { ...common, codeVerifier: row.code_verifier_enc ? keyring.decryptString(row.code_verifier_enc, `oauth-pkce:${stateHash}`) : '' })
        : await exchangeSlackCode(deps.http, common);
    } catch (err) {
      const reason = err instanceof TokenExchangeError ? reasonOf(err.reason) : 'provider_error';
      log.warn({ provider, developer_id: row.developer_id, reason }, 'oauth: the token exchange failed');
      return redirect(returnUrl, { status: 'error', error: reason });
    }

    // A connector is connected only if every one of its scopes was granted (a user can untick
    // some). An answer without `scope` granted exactly what was asked (RFC 6749, 5.1).
    const asked = JSON.parse(row.connectors) as Connector[];
    const granted = new Set(tokens.scopes ?? asked.flatMap((c) => CONNECTOR_SCOPES[c]));
    const connectors = asked.filter((c) => CONNECTOR_SCOPES[c].every((s) => granted.has(s)));
    if (connectors.length === 0) return redirect(returnUrl, { status: 'error', error: 'scopes_not_granted' });

    const id = newId('conn');
    await withTx(db, async (trx) => {
      const at = clock.nowMs();
      const old = await trx('connections')
        .where({ developer_id: row.developer_id, end_user_id: row.end_user_id, provider })
        .whereIn('status', ['active', 'error'])
        .forUpdate()
        .select('id');
      if (old.length > 0) {
        await trx('connections').whereIn('id', old.map((o: { id: string }) => o.id)).update({
          status: 'revoked', access_token_enc: null, refresh_token_enc: null, revoked_at: at, updated_at: at, replaced_by: id, error: 'replaced',
        });
      }
      await trx('connections').insert({
        id, developer_id: row.developer_id, end_user_id: row.end_user_id, provider, account: tokens.account, connectors: JSON.stringify(connectors),
        scopes: JSON.stringify([...granted]), status: 'active',
        access_token_enc: keyring.encrypt(tokens.accessToken, tokenContext(id, 'access')),
        refresh_token_enc: tokens.refreshToken ? keyring.encrypt(tokens.refreshToken, tokenContext(id, 'refresh')) : null,
        access_expires_at: tokens.expiresIn ? at + tokens.expiresIn * 1000 : null, client_source: client.source, error: null, replaced_by: null,
        created_at: at, updated_at: at, revoked_at: null,
      });
      await enqueueEvent(trx, {
        developerId: row.developer_id, environmentId: null, type: 'connection.created', createdAtMs: at,
        data: { connection_id: id, end_user_id: row.end_user_id, provider, account: tokens.account, connectors, replaced: (old[0] as { id: string } | undefined)?.id ?? null },
      });
    });
    deps.onChange?.();
    return redirect(returnUrl, { status: 'ok', connection_id: id });
  }

  return { handle };
}

export type CallbackHandler = ReturnType<typeof createCallbackHandler>;
