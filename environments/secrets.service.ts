import type { Queryable } from '../store/db.js';
import { toJson, fromJson } from '../store/db.js';
import type { Keyring } from '../lib/crypto.js';
import { randomHex } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/clock.js';
import type { SecretInput } from './rules.js';
import { secretsStore, type SecretRow } from './secrets.store.js';

/** What a secret looks like in a response: the placeholder, never the value. */
export interface SecretInfo {
  name: string;
  placeholder: string;
  allowed_hosts: string[];
  infrastructure: boolean;
  created_at: string | null;
}

export function toSecretInfo(r: SecretRow): SecretInfo {
  return {
    name: r.name,
    placeholder: r.placeholder,
    allowed_hosts: fromJson<string[]>(r.allowed_hosts),
    infrastructure: Boolean(r.infrastructure),
    created_at: iso(r.created_at),
  };
}

/** AAD of a secret's ciphertext: the ciphertext only opens for this developer, scope and name. */
export function secretContext(developerId: string, scope: string, name: string): string {
  return `secret:${developerId}:${scope}:${name}`;
}

export function newPlaceholder(): string {
  return `svcph_${randomHex(16)}`;
}

/** Inserts secrets inside the caller's transaction; values are sealed before they leave this function. */
export async function insertSecrets(
  trx: Queryable,
  keyring: Keyring,
  at: number,
  owner: { developerId: string; environmentId: string | null; scope: string },
  secrets: Record<string, SecretInput>,
): Promise<void> {
  for (const [name, s] of Object.entries(secrets)) {
    await secretsStore.insert(trx, {
      id: newId('sec'),
      developer_id: owner.developerId,
      environment_id: owner.environmentId,
      scope: owner.scope,
      name,
      value_enc: keyring.encrypt(s.value, secretContext(owner.developerId, owner.scope, name)),
      placeholder: newPlaceholder(),
      allowed_hosts: toJson(s.allowed_hosts.map((h) => h.toLowerCase())),
      infrastructure: Boolean(s.infrastructure),
      created_at: at,
      updated_at: at,
    });
  }
}
