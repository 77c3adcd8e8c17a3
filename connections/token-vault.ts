import type { Dispatcher } from 'undici';
import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import { enqueueEvent } from '../webhooks/outbox.js';
import { tokenContext } from './callback.js';
import type { OAuthClientsService } from './oauth-clients.service.js';
import type { Provider, ProviderEndpoints } from './providers.js';
import { GRANT_GONE, refreshAt } from './providers/refresh.js';
import { TokenExchangeError } from './providers/token-exchange.js';

/** An access token this close to its expiry is refreshed before it is used. */
export const REFRESH_MARGIN_MS = 60_000;
/** How long a refresh lease holds (a crashed holder's runs out). */
const LEASE_MS = 30_000;
/** How often a process waiting for another's refresh looks again. */
const WAIT_STEP_MS = 25;

interface Row {
  id: string;
  developer_id: string;
  end_user_id: string;
  provider: Provider;
  status: 'active' | 'error' | 'revoked';
  access_token_enc: string | null;
  refresh_token_enc: string | null;
  access_expires_at: number | null;
  refresh_lease_until: number | null;
  /** The app it was issued under: it is refreshed with that one (oauth-clients resolve). */
  client_source: 'developer' | 'platform';
}

/** The access token could not be had: the gateway answers with `code`. */
export class ConnectionUnusable extends Error {
  constructor(readonly code: 'connection_revoked' | 'connection_error', message: string) {
    super(message);
  }
}

/**
 * The token vault (issue 11, item 4): the access token of a connection, refreshed first when
 * it is within REFRESH_MARGIN_MS of expiry. One refresh per connection at a time across all
 * processes (a lease on the row, taken with a conditional UPDATE; the row read again after
 * taking it, in case another process refreshed meanwhile) and, within a process, concurrent
 * callers share the one refresh in flight. A rotated refresh token is saved with the new
 * access token in one UPDATE. A provider that refuses the refresh (invalid_grant, ...) marks
 * the connection `error` and queues `connection.error`; the gateway answers 401
 * connection_error.
 */
export function createTokenVault(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  http: Dispatcher;
  oauthClients: Pick<OAuthClientsService, 'resolve'>;
  endpoints: Readonly<Record<Provider, ProviderEndpoints>>;
  timeoutMs: number;
  onChange?: () => void;
}) {
  const { db, clock, keyring, log } = deps;
  const owner = newId('conn').replace('conn_', 'vault_');
  const inFlight = new Map<string, Promise<string>>();

  const read = (id: string): Promise<Row | undefined> => db<Row>('connections').where({ id }).first();
  const fresh = (r: Row, now: number): boolean => r.access_expires_at == null || Number(r.access_expires_at) - now > REFRESH_MARGIN_MS;
  const access = (r: Row): string => keyring.decryptString(r.access_token_enc!, tokenContext(r.id, 'access'));

  function usable(r: Row | undefined): Row {
    if (!r || r.status === 'revoked') throw new ConnectionUnusable('connection_revoked', 'the connection was revoked or replaced');
    if (r.status === 'error' || !r.access_token_enc) throw new ConnectionUnusable('connection_error', 'the provider refused to refresh the connection');
    return r;
  }

  /** The connection's access token, refreshed first if it is about to expire. */
  async function accessToken(id: string): Promise<string> {
    const r = usable(await read(id));
    if (fresh(r, clock.nowMs())) return access(r);
    let p = inFlight.get(id);
    if (!p) {
      p = refreshed(id).finally(() => inFlight.delete(id));
      inFlight.set(id, p);
    }
    return p;
  }

  async function refreshed(id: string): Promise<string> {
    const deadline = Date.now() + LEASE_MS + deps.timeoutMs;
    for (;;) {
      const now = clock.nowMs();
      const taken = await db('connections').where({ id, status: 'active' })
        .andWhere((q) => q.whereNull('refresh_lease_until').orWhere('refresh_lease_until', '<', now))
        .update({ refresh_lease_until: now + LEASE_MS, refresh_lease_owner: owner });
      const r = usable(await read(id));
      if (taken === 1) {
        // Read again after taking the lease: another process may have refreshed just before.
        if (fresh(r, clock.nowMs())) {
          await release(id);
          return access(r);
        }
        return refreshNow(r);
      }
      if (fresh(r, clock.nowMs())) return access(r); // the holder finished
      if (Date.now() > deadline) throw new ConnectionUnusable('connection_error', 'the token refresh did not finish in time');
      await new Promise((res) => setTimeout(res, WAIT_STEP_MS));
    }
  }

  const release = (id: string) => db('connections').where({ id, refresh_lease_owner: owner }).update({ refresh_lease_until: null, refresh_lease_owner: null });

  async function refreshNow(r: Row): Promise<string> {
    const refreshToken = r.refresh_token_enc ? keyring.decryptString(r.refresh_token_enc, tokenContext(r.id, 'refresh')) : null;
    const client = await deps.oauthClients.resolve(r.developer_id, r.provider, r.client_source);
    try {
      if (!refreshToken) throw new TokenExchangeError('no_refresh_token', 'the provider gave no refresh token');
      if (!client) throw new TokenExchangeError('no_oauth_client', 'the OAuth app is no longer registered');
      const t = await refreshAt(deps.http, r.provider, {
        tokenUrl: deps.endpoints[r.provider].tokenUrl, clientId: client.clientId, clientSecret: client.clientSecret, refreshToken, timeoutMs: deps.timeoutMs,
      });
      const now = clock.nowMs();
      // New access token and (Slack) the rotated refresh token in one statement: never one without the other.
      const n = await db('connections').where({ id: r.id, status: 'active', refresh_lease_owner: owner }).update({
        access_token_enc: keyring.encrypt(t.accessToken, tokenContext(r.id, 'access')),
        ...(t.refreshToken ? { refresh_token_enc: keyring.encrypt(t.refreshToken, tokenContext(r.id, 'refresh')) } : {}),
        access_expires_at: t.expiresIn ? now + t.expiresIn * 1000 : null, updated_at: now, refresh_lease_until: null, refresh_lease_owner: null,
      });
      if (n !== 1) throw new ConnectionUnusable('connection_revoked', 'the connection was revoked while it was being refreshed');
      deps.onChange?.();
      return t.accessToken;
    } catch (err) {
      const reason = err instanceof TokenExchangeError ? err.reason : null;
      if (reason && (GRANT_GONE.has(reason) || reason === 'no_refresh_token' || reason === 'no_oauth_client')) {
        await markError(r, reason);
        throw new ConnectionUnusable('connection_error', `the provider refused to refresh the connection (${reason})`);
      }
      await release(r.id).catch(() => {});
      log.warn({ provider: r.provider, connection_id: r.id, reason: reason ?? 'unknown' }, 'oauth: a token refresh failed (will be tried again)');
      if (err instanceof ConnectionUnusable) throw err;
      throw new ConnectionUnusable('connection_error', 'the token refresh failed; try again');
    }
  }

  async function markError(r: Row, reason: string): Promise<void> {
    await withTx(db, async (trx) => {
      const now = clock.nowMs();
      const n = await trx('connections').where({ id: r.id, status: 'active' }).update({
        status: 'error', error: reason.slice(0, 255), access_token_enc: null, refresh_token_enc: null, updated_at: now, refresh_lease_until: null, refresh_lease_owner: null,
      });
      if (n === 1) {
        await enqueueEvent(trx, {
          developerId: r.developer_id, environmentId: null, type: 'connection.error', createdAtMs: now,
          data: { connection_id: r.id, end_user_id: r.end_user_id, provider: r.provider, reason },
        });
      }
    });
    log.warn({ provider: r.provider, connection_id: r.id, reason }, 'oauth: the provider refused a refresh; the connection is now in error');
    deps.onChange?.();
  }

  /** The background job: refreshes active connections expiring within `withinMs`. Returns how many. */
  async function refreshDue(withinMs = 10 * 60_000): Promise<number> {
    const now = clock.nowMs();
    const due = await db<Row>('connections').where({ status: 'active' }).whereNotNull('access_expires_at').where('access_expires_at', '<', now + withinMs).limit(500).select('id');
    let n = 0;
    for (const { id } of due) {
      try {
        await accessToken(id);
        n++;
      } catch {
        // logged (and marked) in refreshNow
      }
    }
    return n;
  }

  return { accessToken, refreshDue };
}

export type TokenVault = ReturnType<typeof createTokenVault>;
