import type { Db, Queryable } from '../store/db.js';
import { toJson, fromJson, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { randomHex } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/clock.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { LIMITS, SECRET_NAME, secretRule, type SecretInput } from './rules.js';
import { DEVELOPER_SCOPE, secretsStore, type SecretRow } from './secrets.store.js';
import { environmentsStore } from './environments.store.js';
import { eventsStore } from './events.store.js';
import { compileHostPatterns, normalizePatterns, type HostMatcher } from './egress.matcher.js';
import type { GatewayCache, GatewaySnapshot } from './egress.cache.js';
import { secretSlots, type Slot } from '../lib/credential-slots.js';

/**
 * What a secret looks like in a response: the placeholder, never the value. `inject` and
 * `allow_minting` appear only when set, so the record of a secret that uses neither is
 * exactly decisions.md's.
 */
export interface SecretInfo {
  name: string;
  placeholder: string;
  allowed_hosts: string[];
  infrastructure: boolean;
  inject?: string[];
  allow_minting?: true;
  created_at: string | null;
}

export function toSecretInfo(r: SecretRow): SecretInfo {
  const inject = r.inject ? fromJson<string[]>(r.inject) : null;
  return {
    name: r.name,
    placeholder: r.placeholder,
    allowed_hosts: fromJson<string[]>(r.allowed_hosts),
    infrastructure: Boolean(r.infrastructure),
    ...(inject && inject.length > 0 ? { inject } : {}),
    ...(r.allow_minting ? { allow_minting: true as const } : {}),
    created_at: iso(r.created_at),
  };
}

/** The stored form of an `inject` list: null when there is none. */
function injectColumn(inject: string[] | null | undefined): string | null {
  return inject && inject.length > 0 ? toJson([...new Set(inject)]) : null;
}

/** AAD of a secret's ciphertext: the ciphertext only opens for this developer, scope and name. */
export function secretContext(developerId: string, scope: string, name: string): string {
  return `secret:${developerId}:${scope}:${name}`;
}

/** `svcph_` and 32 lowercase hex (128 random bits). */
export function newPlaceholder(): string {
  return `svcph_${randomHex(16)}`;
}

/** One placeholder, anchored; for scanning use findPlaceholders. */
export const PLACEHOLDER = /^svcph_[0-9a-f]{32}$/;

/** Every placeholder-shaped token in `text`, in order of appearance (duplicates kept). */
export function findPlaceholders(text: string): string[] {
  if (!text.includes('svcph_')) return [];
  return [...text.matchAll(/svcph_[0-9a-f]{32}/g)].map((m) => m[0]);
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
      allowed_hosts: toJson(normalizePatterns(s.allowed_hosts)),
      infrastructure: Boolean(s.infrastructure),
      inject: injectColumn(s.inject),
      allow_minting: Boolean(s.allow_minting),
      created_at: at,
      updated_at: at,
    });
  }
}

/**
 * A secret as the proxy uses it in one environment. Structurally a proxy `Credential`
 * (token, connector, kind, infrastructure, hostAllowed, value), so the placeholder index
 * can serve as the proxy's credential set as it is.
 */
export interface GatewaySecret {
  /** The placeholder (the token the VM sees). */
  token: string;
  kind: 'secret';
  name: string;
  /** The policy connector of requests that carry this secret: `secret:NAME`. */
  connector: `secret:${string}`;
  /** `environment` for the environment's own secret, `developer` for a developer-level one. */
  level: 'environment' | 'developer';
  placeholder: string;
  /**
   * Where the value may be sent; the placeholder going anywhere else is
   * `secret_host_not_allowed`. A pattern without a port allows port 443 only.
   */
  allowedHosts: HostMatcher;
  /** Skips the policy (decision `allow`, reason `infrastructure_credential`). */
  infrastructure: boolean;
  /** Same as allowedHosts.allows, with the port. */
  hostAllowed(host: string, port: number): boolean;
  /** Where in a request it may be swapped in: the Authorization header, plus `inject`. */
  slots: readonly Slot[];
  /** May be sent to an endpoint that mints new credentials. */
  allowMinting: boolean;
  /**
   * The plaintext. Decrypted on first call, then kept in memory for as long as this
   * snapshot lives (at most the cache's ttl). Throws when the ciphertext does not open
   * (wrong master key, tampered row): the proxy must fail closed.
   */
  value(): string;
}

export interface EnvironmentSecrets {
  byPlaceholder: ReadonlyMap<string, GatewaySecret>;
  byName: ReadonlyMap<string, GatewaySecret>;
  /** Sorted by secret name. */
  placeholders: readonly string[];
}

export interface SecretWriteResult {
  /** True when the PUT made a new secret (201), false when it replaced one (200). */
  created: boolean;
  secret: SecretInfo;
}

const EMPTY_SECRETS: EnvironmentSecrets = Object.freeze({ byPlaceholder: new Map(), byName: new Map(), placeholders: Object.freeze([]) });

/** Builds the proxy's index of a snapshot's secrets; nothing is decrypted here. */
export function indexSecrets(snapshot: GatewaySnapshot, keyring: Keyring): EnvironmentSecrets {
  if (snapshot.destroyed || snapshot.secrets.length === 0) return EMPTY_SECRETS;
  const byPlaceholder = new Map<string, GatewaySecret>();
  const byName = new Map<string, GatewaySecret>();
  for (const s of snapshot.secrets) {
    let plain: string | undefined;
    const allowedHosts = compileHostPatterns(s.allowedHosts, { portless: 443 });
    const g: GatewaySecret = Object.freeze({
      token: s.placeholder,
      kind: 'secret' as const,
      name: s.name,
      connector: `secret:${s.name}` as const,
      level: s.level,
      placeholder: s.placeholder,
      allowedHosts,
      infrastructure: s.infrastructure,
      hostAllowed: (host: string, port: number) => allowedHosts.allows(host, port),
      slots: secretSlots(s.inject),
      allowMinting: s.allowMinting,
      value(): string {
        plain ??= keyring.decryptString(s.valueEnc, secretContext(s.developerId, s.scope, s.name));
        return plain;
      },
    });
    byPlaceholder.set(s.placeholder, g);
    byName.set(s.name, g);
  }
  return Object.freeze({ byPlaceholder, byName, placeholders: Object.freeze(snapshot.secrets.map((s) => s.placeholder)) });
}

function invalid(message: string): ServiceError {
  return new ServiceError('invalid_request', message);
}

/**
 * Environment secrets (`environmentId` set) and developer-level secrets (`environmentId`
 * null, stored with scope '*'): the management API's reads and writes, and the proxy's
 * lookup `secretsForEnvironment`.
 */
export function createSecretsService(deps: {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  cache: GatewayCache;
  /**
   * Called after every committed secret write in this process (environmentId null: a
   * developer-level secret, all of the developer's environments). For whoever pushes
   * variables into running VMs: a new secret is a new variable there.
   */
  onChanged?: (change: { developerId: string; environmentId: string | null; name: string }) => void;
}) {
  const { db, clock, keyring, cache } = deps;
  const indexes = new WeakMap<GatewaySnapshot, EnvironmentSecrets>();

  function checkName(name: string): void {
    if (!SECRET_NAME.test(name)) throw invalid(`secret name "${name}" must match [A-Z][A-Z0-9_]{0,63}`);
  }

  /**
   * Locks what a write to this scope serializes on (the environment row, or the
   * developer row for developer-level secrets) and refuses what may not be written.
   * Returns the environment row for event writing, or null for the developer scope.
   */
  async function lockScope(trx: Queryable, developerId: string, environmentId: string | null) {
    if (environmentId === null) {
      if (!(await secretsStore.lockDeveloper(trx, developerId))) throw notFound();
      return null;
    }
    const env = await environmentsStore.getForUpdate(trx, developerId, environmentId);
    if (!env) throw notFound();
    if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
    return env;
  }

  function invalidate(developerId: string, environmentId: string | null): void {
    if (environmentId === null) cache.invalidateDeveloper(developerId);
    else cache.invalidateEnvironment(environmentId);
  }

  /** Sorted by name; 404 for a missing or foreign environment. A destroyed environment has none left. */
  async function list(developerId: string, environmentId: string | null): Promise<SecretInfo[]> {
    if (environmentId !== null && !(await environmentsStore.get(db, developerId, environmentId))) throw notFound();
    return (await secretsStore.list(db, developerId, environmentId ?? DEVELOPER_SCOPE)).map(toSecretInfo);
  }

  /**
   * Creates or replaces a secret. A replace keeps the id, placeholder and created_at (the
   * running VM's variable keeps working) and takes the new value, hosts, places and flags
   * as a whole (`infrastructure`, `inject`, `allow_minting` omitted mean false / none). At most 100 secrets per scope: the
   * count and insert run under the scope's row lock, so a burst cannot pass 100.
   */
  async function put(developerId: string, environmentId: string | null, name: string, input: SecretInput): Promise<SecretWriteResult> {
    checkName(name);
    const broken = secretRule(name, input);
    if (broken) throw invalid(broken);
    const scope = environmentId ?? DEVELOPER_SCOPE;
    const allowedHosts = toJson(normalizePatterns(input.allowed_hosts));
    // Sealed before the transaction: no crypto while the row lock is held.
    const sealed = keyring.encrypt(input.value, secretContext(developerId, scope, name));
    let out: SecretWriteResult;
    try {
      out = await withTx(db, async (trx) => {
        const env = await lockScope(trx, developerId, environmentId);
        if (env) {
          const config = await environmentsStore.config(trx, env.id);
          const vars = fromJson<Record<string, string> | null>(config?.env) ?? {};
          if (Object.hasOwn(vars, name)) throw invalid(`"${name}" is both an environment variable and a secret`);
        }
        const now = clock.nowMs();
        const existing = await secretsStore.get(trx, developerId, scope, name);
        let row: SecretRow;
        if (existing) {
          const patch = {
            value_enc: sealed, allowed_hosts: allowedHosts, infrastructure: Boolean(input.infrastructure),
            inject: injectColumn(input.inject), allow_minting: Boolean(input.allow_minting), updated_at: now,
          };
          await secretsStore.update(trx, existing.id, patch);
          row = { ...existing, ...patch };
        } else {
          const n = await secretsStore.count(trx, developerId, scope);
          if (n >= LIMITS.secretsPerScope) {
            throw invalid(`at most ${LIMITS.secretsPerScope} secrets per ${environmentId ? 'environment' : 'developer'}; delete one first`);
          }
          row = {
            id: newId('sec'),
            developer_id: developerId,
            environment_id: environmentId,
            scope,
            name,
            value_enc: sealed,
            placeholder: newPlaceholder(),
            allowed_hosts: allowedHosts,
            infrastructure: Boolean(input.infrastructure),
            inject: injectColumn(input.inject),
            allow_minting: Boolean(input.allow_minting),
            created_at: now,
            updated_at: now,
          };
          await secretsStore.insert(trx, row);
        }
        if (env) {
          await eventsStore.append(trx, { environment_id: env.id, developer_id: developerId, kind: 'secret_set', source: 'api', data: { name, replaced: Boolean(existing) }, created_at: now });
        }
        return { created: !existing, secret: toSecretInfo(row) };
      });
    } finally {
      invalidate(developerId, environmentId);
    }
    deps.onChanged?.({ developerId, environmentId, name });
    return out;
  }

  /** 404 when there is no such secret; 409 `environment_destroyed` on a destroyed environment. */
  async function remove(developerId: string, environmentId: string | null, name: string): Promise<void> {
    checkName(name);
    try {
      await withTx(db, async (trx) => {
        const env = await lockScope(trx, developerId, environmentId);
        const n = await secretsStore.remove(trx, developerId, environmentId ?? DEVELOPER_SCOPE, name);
        if (n === 0) throw notFound();
        if (env) {
          await eventsStore.append(trx, { environment_id: env.id, developer_id: developerId, kind: 'secret_deleted', source: 'api', data: { name }, created_at: clock.nowMs() });
        }
      });
    } finally {
      invalidate(developerId, environmentId);
    }
    deps.onChanged?.({ developerId, environmentId, name });
  }

  /**
   * The proxy's lookup: the environment's secrets and its developer's (an environment
   * secret shadows a developer secret of the same name), indexed by placeholder. From
   * the gateway cache; null for an unknown environment, empty for a destroyed one.
   */
  async function secretsForEnvironment(environmentId: string): Promise<EnvironmentSecrets | null> {
    const snap = await cache.get(environmentId);
    if (!snap) return null;
    let idx = indexes.get(snap);
    if (!idx) {
      idx = indexSecrets(snap, keyring);
      indexes.set(snap, idx);
    }
    return idx;
  }

  return { list, put, remove, secretsForEnvironment };
}

export type SecretsService = ReturnType<typeof createSecretsService>;
