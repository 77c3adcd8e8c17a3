import { createHmac } from 'node:crypto';
import type { Db } from '../store/db.js';
import type { Keyring } from '../lib/crypto.js';
import { constantTimeEqual } from '../lib/crypto.js';

/**
 * Per-environment proxy credentials: user name = the environment id, password =
 * HMAC-SHA256(subkey, environment id), base64url. Deriving instead of storing means no
 * table to leak and nothing to migrate; the password changes only when the master key is
 * rotated (then every VM gets new proxy variables on its next start).
 *
 * A destroyed environment's credentials stop working: authenticate() checks the
 * environment's desired state, cached briefly so the proxy does not query the store on
 * every request; destroy() in this process evicts the entry at once.
 */
export interface ProxyIdentity {
  environmentId: string;
  developerId: string;
}

export function createProxyCredentials(deps: { db: Db; keyring: Keyring; cacheMs?: number; now?: () => number }) {
  const key = deps.keyring.deriveSubkey('proxy-credentials');
  const cacheMs = deps.cacheMs ?? 1000;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, { identity: ProxyIdentity | null; at: number }>();

  function passwordFor(environmentId: string): string {
    return createHmac('sha256', key).update(environmentId).digest('base64url');
  }

  /** The live environment these credentials belong to, or null (unknown, destroyed or wrong password). */
  async function authenticate(environmentId: string, password: string): Promise<ProxyIdentity | null> {
    if (!/^env_[0-9a-f]{24}$/.test(environmentId) || !constantTimeEqual(password, passwordFor(environmentId))) return null;
    const hit = cache.get(environmentId);
    if (hit && now() - hit.at < cacheMs) return hit.identity;
    const row = await deps.db('environments').where({ id: environmentId }).first('developer_id', 'desired_state');
    const identity = row && row.desired_state !== 'destroyed' ? { environmentId, developerId: row.developer_id as string } : null;
    if (cache.size > 50_000) cache.clear();
    cache.set(environmentId, { identity, at: now() });
    return identity;
  }

  function evict(environmentId: string): void {
    cache.delete(environmentId);
  }

  return { passwordFor, authenticate, evict };
}

export type ProxyCredentials = ReturnType<typeof createProxyCredentials>;
