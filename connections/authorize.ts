import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { iso } from '../lib/clock.js';
import { ServiceError } from '../lib/errors.js';
import { deleteInBatches, type PruneOptions } from '../store/prune.js';
import type { OAuthClientsService } from './oauth-clients.service.js';
import { CONNECTORS, CONNECTOR_SCOPES, GOOGLE_IDENTITY_SCOPES, type Connector, type Provider, type ProviderEndpoints } from './providers.js';

/** service.md "Authorization link": valid 10 minutes, single use. */
export const LINK_LIFETIME_MS = 10 * 60 * 1000;
/** Longest return_url accepted (it comes back in a Location header). */
export const MAX_RETURN_URL = 2048;

export interface AuthorizeInput {
  end_user_id: string;
  connectors: string[];
  return_url: string;
}

export interface AuthorizationLink {
  url: string;
  expires_at: string;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const verifierContext = (stateHash: string) => `oauth-pkce:${stateHash}`;

/**
 * POST /v1/connections/authorize (service.md): the link the end user opens at the provider.
 * Google: PKCE S256, exactly the connectors' scopes plus `openid email`, offline access and
 * the consent screen every time (Google returns a refresh token only then). Slack: the
 * connectors' scopes as `user_scope` (a user token: the agent acts as the user), no bot
 * `scope`. The state is 256 random bits; only its SHA-256 is stored.
 */
export function createAuthorizer(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  oauthClients: Pick<OAuthClientsService, 'resolve' | 'redirectUri'>;
  endpoints: Readonly<Record<Provider, ProviderEndpoints>>;
}) {
  const { db, clock, keyring } = deps;

  /** The connectors' single provider, duplicates removed; 400 for unknown ones or a mix. */
  function validate(input: AuthorizeInput): { provider: Provider; connectors: Connector[]; returnUrl: string } {
    if (input.end_user_id.length === 0 || input.end_user_id.length > 200) throw new ServiceError('invalid_request', 'end_user_id must be 1 to 200 characters');
    if (input.connectors.length === 0) throw new ServiceError('invalid_request', 'connectors must name at least one connector');
    const unknown = input.connectors.filter((c) => !Object.hasOwn(CONNECTORS, c));
    if (unknown.length > 0) throw new ServiceError('invalid_request', `unknown connector ${JSON.stringify(unknown[0])}: use gmail, calendar or slack`);
    const connectors = [...new Set(input.connectors)] as Connector[];
    const providers = new Set(connectors.map((c) => CONNECTORS[c]));
    if (providers.size > 1) throw new ServiceError('invalid_request', 'connectors must all belong to one provider (gmail and calendar are google, slack is slack)');
    let url: URL;
    try {
      url = new URL(input.return_url);
    } catch {
      throw new ServiceError('invalid_request', 'return_url must be an absolute http(s) URL');
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || input.return_url.length > MAX_RETURN_URL || url.username || url.password) {
      throw new ServiceError('invalid_request', `return_url must be an absolute http(s) URL of at most ${MAX_RETURN_URL} characters, without credentials`);
    }
    return { provider: [...providers][0]!, connectors, returnUrl: url.toString() };
  }

  async function authorize(developerId: string, input: AuthorizeInput): Promise<AuthorizationLink> {
    const { provider, connectors, returnUrl } = validate(input);
    const client = await deps.oauthClients.resolve(developerId, provider);
    if (!client) throw new ServiceError('no_oauth_client', `no ${provider} OAuth app: register one with PUT /v1/oauth-clients/${provider}`);
    const state = randomBytes(32).toString('base64url');
    const stateHash = sha256(state);
    const now = clock.nowMs();
    const expiresAt = now + LINK_LIFETIME_MS;
    const scopes = connectors.flatMap((c) => CONNECTOR_SCOPES[c]);
    const url = new URL(deps.endpoints[provider].authUrl);
    const q = url.searchParams;
    q.set('client_id', client.clientId);
    q.set('redirect_uri', deps.oauthClients.redirectUri(provider));
    q.set('state', state);
    let verifier: string | null = null;
    if (provider === 'google') {
      verifier = randomBytes(48).toString('base64url'); // 64 characters (RFC 7636: 43-128)
      q.set('response_type', 'code');
      q.set('scope', [...GOOGLE_IDENTITY_SCOPES, ...scopes].join(' '));
      q.set('code_challenge', createHash('sha256').update(verifier).digest('base64url'));
      q.set('code_challenge_method', 'S256');
      q.set('access_type', 'offline');
      q.set('prompt', 'consent');
    } else {
      q.set('user_scope', scopes.join(','));
    }
    await db('oauth_states').insert({
      state_hash: stateHash, developer_id: developerId, end_user_id: input.end_user_id, provider, connectors: JSON.stringify(connectors),
      return_url: returnUrl, code_verifier_enc: verifier ? keyring.encrypt(verifier, verifierContext(stateHash)) : null,
      client_source: client.source, created_at: now, expires_at: expiresAt, used_at: null,
    });
    return { url: url.toString(), expires_at: iso(expiresAt)! };
  }

  /**
   * Retention: links that expired before `beforeMs` (used ones included: a link is dead
   * 10 minutes after it was made either way), in batches, by the expires_at index.
   */
  function prune(beforeMs: number, opts: PruneOptions = {}): Promise<number> {
    return deleteInBatches(db, 'oauth_states', (q) => q.where('expires_at', '<', beforeMs), { ...opts, key: 'state_hash' });
  }

  return { authorize, prune };
}

export type Authorizer = ReturnType<typeof createAuthorizer>;
