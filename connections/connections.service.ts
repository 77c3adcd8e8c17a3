import type { Dispatcher } from 'undici';
import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { notFound } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { enqueueEvent } from '../webhooks/outbox.js';
import { tokenContext } from './callback.js';
import { postForm } from './providers/token-exchange.js';
import type { Provider, ProviderEndpoints } from './providers.js';
import type { OAuthClientsService } from './oauth-clients.service.js';

/** The API record (service.md "Connection"): never a token. */
export interface Connection {
  id: string;
  provider: Provider;
  end_user_id: string;
  account: string | null;
  connectors: string[];
  status: 'active' | 'error' | 'revoked';
  created_at: string | null;
  revoked_at: string | null;
}

interface ConnectionRow {
  id: string;
  developer_id: string;
  end_user_id: string;
  provider: Provider;
  account: string | null;
  connectors: string;
  status: Connection['status'];
  access_token_enc: string | null;
  refresh_token_enc: string | null;
  created_at: number;
  revoked_at: number | null;
}

/** service.md Limits: the list is at most 500, not paginated. */
export const MAX_LISTED = 500;

function toConnection(r: ConnectionRow): Connection {
  return {
    id: r.id, provider: r.provider, end_user_id: r.end_user_id, account: r.account, connectors: JSON.parse(r.connectors) as string[], status: r.status,
    created_at: iso(Number(r.created_at)), revoked_at: iso(r.revoked_at == null ? null : Number(r.revoked_at)),
  };
}

/** Connections of a developer: list, get, revoke (service.md Connections endpoints). */
export function createConnectionsService(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  http: Dispatcher;
  endpoints: Readonly<Record<Provider, ProviderEndpoints>>;
  timeoutMs: number;
  /** The app that holds the grant (Google's revocation authenticates the client when asked to). */
  oauthClients?: Pick<OAuthClientsService, 'resolve'>;
  /** Called after a connection changed (the gateway's stand-in lookups are stale). */
  onChange?: () => void;
}) {
  const { db, clock, keyring, log } = deps;

  /** Newest first, at most 500 (`has_more` when there are more); revoked ones only when asked for. */
  async function list(developerId: string, opts: { endUserId?: string; includeRevoked: boolean }): Promise<{ data: Connection[]; has_more: boolean }> {
    const q = db<ConnectionRow>('connections').where({ developer_id: developerId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(MAX_LISTED + 1);
    if (opts.endUserId !== undefined) q.andWhere({ end_user_id: opts.endUserId });
    if (!opts.includeRevoked) q.andWhereNot({ status: 'revoked' });
    const rows = await q;
    return { data: rows.slice(0, MAX_LISTED).map(toConnection), has_more: rows.length > MAX_LISTED };
  }

  async function get(developerId: string, id: string): Promise<Connection> {
    const row = await db<ConnectionRow>('connections').where({ developer_id: developerId, id }).first();
    if (!row) throw notFound();
    return toConnection(row);
  }

  /**
   * Idempotent: 200 with the revoked connection. Its tokens are erased in the same
   * transaction as the status change (its stand-ins stop at once: the gateway reads the
   * status), `connection.revoked` is queued, and the provider is asked to revoke the token,
   * best effort, after the commit and with a deadline.
   */
  async function revoke(developerId: string, id: string): Promise<Connection> {
    let tokens: { access: string | null; refresh: string | null } | null = null;
    const row = await withTx(db, async (trx) => {
      const r = await trx<ConnectionRow>('connections').where({ developer_id: developerId, id }).forUpdate().first();
      if (!r) throw notFound();
      if (r.status === 'revoked') return r;
      const at = clock.nowMs();
      tokens = {
        access: r.access_token_enc ? keyring.decryptString(r.access_token_enc, tokenContext(id, 'access')) : null,
        refresh: r.refresh_token_enc ? keyring.decryptString(r.refresh_token_enc, tokenContext(id, 'refresh')) : null,
      };
      await trx('connections').where({ id }).update({ status: 'revoked', access_token_enc: null, refresh_token_enc: null, revoked_at: at, updated_at: at });
      await enqueueEvent(trx, {
        developerId, environmentId: null, type: 'connection.revoked', createdAtMs: at,
        data: { connection_id: id, end_user_id: r.end_user_id, provider: r.provider, reason: 'revoked' },
      });
      return { ...r, status: 'revoked' as const, access_token_enc: null, refresh_token_enc: null, revoked_at: at };
    });
    deps.onChange?.();
    if (tokens) void revokeAtProvider(developerId, row.provider, tokens);
    return toConnection(row);
  }

  async function revokeAtProvider(developerId: string, provider: Provider, tokens: { access: string | null; refresh: string | null }): Promise<void> {
    // Google revokes the whole grant from either token (the refresh token is the lasting one); Slack's auth.revoke takes the user token.
    const token = provider === 'google' ? tokens.refresh ?? tokens.access : tokens.access;
    if (!token) return;
    try {
      // RFC 7009 lets a provider require client authentication here; Google does not, and ignores it.
      const client = provider === 'google' ? await deps.oauthClients?.resolve(developerId, provider) : null;
      const form: Record<string, string> = { token, ...(client ? { client_id: client.clientId, client_secret: client.clientSecret } : {}) };
      const { status } = await postForm(deps.http, deps.endpoints[provider].revokeUrl, form, deps.timeoutMs);
      if (status >= 400) log.warn({ provider, status }, 'oauth: the provider refused to revoke a token (it is erased here anyway)');
    } catch (err) {
      log.warn({ provider, reason: (err as { reason?: string }).reason ?? 'unknown' }, 'oauth: revoking at the provider failed (best effort; erased here)');
    }
  }

  return { list, get, revoke };
}

export type ConnectionsService = ReturnType<typeof createConnectionsService>;
