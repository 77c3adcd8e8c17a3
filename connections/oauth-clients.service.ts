import type { Db } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { oauthClientsStore } from './oauth-clients.store.js';
import { PROVIDERS, isProvider, type PlatformApp, type Provider } from './providers.js';

/** The API record (service.md "OAuth client entry"); the secret is never in it. */
export interface OAuthClientEntry {
  provider: Provider;
  client_id: string | null;
  platform_app_available: boolean;
  redirect_uri: string;
}

/** What authorize and the token exchange use: the developer's own app, else the platform's. */
export interface ResolvedClient {
  clientId: string;
  clientSecret: string;
  source: 'developer' | 'platform';
}

/** Longest client id and secret accepted (Google's are ~72 and ~35 characters, Slack's shorter). */
export const MAX_CLIENT_VALUE = 512;

const secretContext = (developerId: string, provider: Provider) => `oauth-client:${developerId}:${provider}`;

export function createOAuthClientsService(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  /** BASE_URL, read when an entry is built (known only once the API listens). */
  baseUrl: () => string;
  platformApps: Readonly<Partial<Record<Provider, PlatformApp>>>;
}) {
  const { db, clock, keyring } = deps;

  const redirectUri = (provider: Provider): string => `${deps.baseUrl().replace(/\/+$/, '')}/v1/oauth/${provider}/callback`;

  function entry(provider: Provider, clientId: string | null): OAuthClientEntry {
    return { provider, client_id: clientId, platform_app_available: Boolean(deps.platformApps[provider]), redirect_uri: redirectUri(provider) };
  }

  /** One entry per provider, registered or not (redirect_uri even before registration). */
  async function list(developerId: string): Promise<OAuthClientEntry[]> {
    const rows = new Map((await oauthClientsStore.list(db, developerId)).map((r) => [r.provider, r]));
    return PROVIDERS.map((p) => entry(p, rows.get(p)?.client_id ?? null));
  }

  /** Registers (or replaces) the developer's app. 404 for an unknown provider, 400 for empty or oversized values. */
  async function put(developerId: string, provider: string, input: { client_id: string; client_secret: string }): Promise<OAuthClientEntry> {
    if (!isProvider(provider)) throw notFound();
    for (const field of ['client_id', 'client_secret'] as const) {
      const v = input[field];
      if (v.trim() === '') throw new ServiceError('invalid_request', `${field} must not be empty`);
      if (v.length > MAX_CLIENT_VALUE) throw new ServiceError('invalid_request', `${field} may be at most ${MAX_CLIENT_VALUE} characters`);
      // eslint-disable-next-line no-control-regex
      if (/[\u0000-\u001f\u007f\s]/.test(v)) throw new ServiceError('invalid_request', `${field} may not contain whitespace or control characters`);
    }
    const now = clock.nowMs();
    await oauthClientsStore.upsert(db, {
      developer_id: developerId, provider, client_id: input.client_id,
      client_secret_enc: keyring.encrypt(input.client_secret, secretContext(developerId, provider)), created_at: now, updated_at: now,
    });
    return entry(provider, input.client_id);
  }

  /**
   * The app authorize and the token exchange use, or null (authorize answers 409
   * no_oauth_client). With `source`, the app of that source only: a connection (and the
   * callback of a link) keeps the app it was issued under. A developer registering an app of
   * its own made every platform-issued connection refresh with an app that never issued its
   * token (`invalid_client`), which erased them all (a fourth review).
   */
  async function resolve(developerId: string, provider: Provider, source?: 'developer' | 'platform'): Promise<ResolvedClient | null> {
    if (source !== 'platform') {
      const row = await oauthClientsStore.get(db, developerId, provider);
      if (row) return { clientId: row.client_id, clientSecret: keyring.decryptString(row.client_secret_enc, secretContext(developerId, provider)), source: 'developer' };
      if (source === 'developer') return null;
    }
    const platform = deps.platformApps[provider];
    return platform ? { clientId: platform.clientId, clientSecret: platform.clientSecret, source: 'platform' } : null;
  }

  return { list, put, resolve, redirectUri };
}

export type OAuthClientsService = ReturnType<typeof createOAuthClientsService>;
