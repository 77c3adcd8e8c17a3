import { randomBytes } from 'node:crypto';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { privateHostReason } from '../lib/net.js';
import { isUniqueViolation, withTx, type Db } from '../store/db.js';
import { endpointsStore, type WebhookEndpointRow } from './endpoints.store.js';
import { eventsStore } from './events.store.js';

/** service.md Limits: the old secret keeps working 24 hours after a rotation. */
export const PREVIOUS_SECRET_LIFETIME_MS = 24 * 60 * 60 * 1000;
export const MAX_WEBHOOK_URL_LENGTH = 2048;
/** Characters of the secret shown as `secret_prefix` (`whsec_` and four more). */
export const SECRET_PREFIX_LENGTH = 10;

/** `whsec_<base64url of 32 random bytes>` (decisions.md, Webhook endpoint settings). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** AAD of both stored secrets: a ciphertext copied to another developer's row does not open. */
export function webhookSecretContext(developerId: string): string {
  return `webhook_secret:${developerId}`;
}

/**
 * Why a webhook URL is refused, or null when it is acceptable: absolute http(s), at most
 * 2048 characters, no credentials in it, and (unless private destinations are allowed) no
 * loopback, private or link-local literal host. Names are not resolved here; delivery
 * checks the resolved addresses again before it connects.
 */
export function webhookUrlProblem(url: string, allowPrivateDestinations: boolean): string | null {
  if (url.length > MAX_WEBHOOK_URL_LENGTH) return `url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'url must be an absolute http or https URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'url must be an absolute http or https URL';
  if (!u.hostname) return 'url must name a host';
  if (u.username || u.password) return 'url must not contain credentials';
  if (!allowPrivateDestinations) {
    const why = privateHostReason(u.hostname);
    if (why) return `url points at a ${why} address; private destinations are not allowed`;
  }
  return null;
}

export interface WebhookEndpointInfo {
  url: string;
  secret_prefix: string;
  /** When the previous secret stops signing (RFC 3339), or null when there is none in force. */
  previous_secret_expires_at: string | null;
}

export interface DeliveryTarget {
  url: string;
  /** [current, previous while within 24 h of a rotation]: one `v1` each. */
  secrets: string[];
}

export function createWebhookEndpointsService(deps: { db: Db; clock: Clock; keyring: Keyring; allowPrivateDestinations: boolean }) {
  const { db, clock, keyring, allowPrivateDestinations } = deps;

  const previousExpiry = (row: WebhookEndpointRow, now: number): number | null =>
    row.previous_secret_enc && row.previous_secret_expires_at != null && row.previous_secret_expires_at > now
      ? row.previous_secret_expires_at
      : null;

  const info = (row: WebhookEndpointRow): WebhookEndpointInfo => ({
    url: row.url,
    secret_prefix: row.secret_prefix,
    previous_secret_expires_at: iso(previousExpiry(row, clock.nowMs())),
  });

  const seal = (developerId: string, secret: string): string => keyring.encrypt(secret, webhookSecretContext(developerId));
  const unseal = (developerId: string, blob: string): string => keyring.decryptString(blob, webhookSecretContext(developerId));

  const secretsOf = (row: WebhookEndpointRow): string[] => {
    const out = [unseal(row.developer_id, row.secret_enc)];
    if (previousExpiry(row, clock.nowMs()) !== null) out.push(unseal(row.developer_id, row.previous_secret_enc!));
    return out;
  };

  async function update(developerId: string, url: string): Promise<WebhookEndpointInfo | null> {
    const n = await endpointsStore.update(db, developerId, { url, updated_at: clock.nowMs() });
    if (n === 0) return null;
    const row = await endpointsStore.get(db, developerId);
    return row ? info(row) : null;
  }

  return {
    async get(developerId: string): Promise<WebhookEndpointInfo | null> {
      const row = await endpointsStore.get(db, developerId);
      return row ? info(row) : null;
    },

    /**
     * Sets the URL. The first set creates the endpoint and its secret, and is the only
     * answer that carries the secret; a later set changes the URL and keeps the secret.
     */
    async set(developerId: string, url: string): Promise<WebhookEndpointInfo & { secret?: string }> {
      const problem = webhookUrlProblem(url, allowPrivateDestinations);
      if (problem) throw new ServiceError('invalid_request', problem);
      const updated = await update(developerId, url);
      if (updated) return updated;
      const secret = newWebhookSecret();
      const now = clock.nowMs();
      const row: WebhookEndpointRow = {
        developer_id: developerId,
        url,
        secret_enc: seal(developerId, secret),
        secret_prefix: secret.slice(0, SECRET_PREFIX_LENGTH),
        previous_secret_enc: null,
        previous_secret_expires_at: null,
        created_at: now,
        updated_at: now,
      };
      try {
        await endpointsStore.insert(db, row);
      } catch (err) {
        // A concurrent first PUT won the insert: this one becomes a URL change and the
        // secret shown is the winner's alone.
        if (!isUniqueViolation(err)) throw err;
        const again = await update(developerId, url);
        if (again) return again;
        throw err;
      }
      return { url, secret, secret_prefix: row.secret_prefix, previous_secret_expires_at: null };
    },

    /** Idempotent. Queued, undelivered events are cancelled with it: no further webhooks. */
    async remove(developerId: string): Promise<void> {
      await withTx(db, async (trx) => {
        await endpointsStore.delete(trx, developerId);
        await eventsStore.cancelPending(trx, developerId);
      });
    },

    /**
     * New secret; the current one becomes the previous and keeps signing for 24 hours. A
     * second rotation inside that window drops the older previous secret (only two sign).
     */
    async rotate(developerId: string): Promise<{ secret: string; previous_secret_expires_at: string }> {
      for (let attempt = 0; attempt < 5; attempt++) {
        const row = await endpointsStore.get(db, developerId);
        if (!row) throw notFound();
        const secret = newWebhookSecret();
        const now = clock.nowMs();
        const expires = now + PREVIOUS_SECRET_LIFETIME_MS;
        // Conditional on the secret we read, so two concurrent rotations cannot both
        // demote the same secret and lose the other's new one.
        const n = await endpointsStore.updateIfSecret(db, developerId, row.secret_enc, {
          secret_enc: seal(developerId, secret),
          secret_prefix: secret.slice(0, SECRET_PREFIX_LENGTH),
          previous_secret_enc: row.secret_enc,
          previous_secret_expires_at: expires,
          updated_at: now,
        });
        if (n === 1) return { secret, previous_secret_expires_at: iso(expires)! };
      }
      throw new Error('webhook secret rotation kept racing with another rotation');
    },

    /** Secrets that sign/verify right now: [current, previous-if-still-within-24h]; [] when no endpoint. */
    async signingSecrets(developerId: string): Promise<string[]> {
      const row = await endpointsStore.get(db, developerId);
      return row ? secretsOf(row) : [];
    },

    /**
     * Where and with what a webhook goes right now (one read, at send time): the current
     * URL and the signing secrets, or null when the endpoint was removed.
     */
    async deliveryTarget(developerId: string): Promise<DeliveryTarget | null> {
      const row = await endpointsStore.get(db, developerId);
      return row ? { url: row.url, secrets: secretsOf(row) } : null;
    },
  };
}

export type WebhookEndpointsService = ReturnType<typeof createWebhookEndpointsService>;
