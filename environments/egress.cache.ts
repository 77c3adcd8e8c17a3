import { performance } from 'node:perf_hooks';
import type { Queryable } from '../store/db.js';
import { fromJson } from '../store/db.js';
import { egressStore, parseAllow, parseUnknownHosts, type UnknownHosts } from './egress.store.js';
import { DEVELOPER_SCOPE, secretsStore, type SecretRow } from './secrets.store.js';

/**
 * What the gateway knows about one environment on its hot path: egress allowlists, the
 * secrets the VM can use, and extra hosts from other domains. One snapshot per
 * environment, loaded with three small queries and kept in process memory.
 *
 * Freshness (docs/secrets-egress.md):
 * - every write through this process's secrets and egress services invalidates the
 *   snapshots it touches after its transaction commits, so the next lookup here sees it;
 * - a snapshot is reloaded when it is older than `ttlMs` (1 s): writes made by another
 *   process (a separate API replica, the lead's CLI, environment destroy) reach this
 *   process's proxy within about a second. Reload blocks the lookups that need it (one
 *   load per environment however many requests wait: single flight), so a deleted secret
 *   or narrowed allowlist is never served for longer than that.
 * - a load that was in flight while an invalidation happened is not kept: it may have
 *   read the state before the write.
 */

/** A secret as the gateway sees it in one environment; `level` says where it came from. */
export interface SnapshotSecret {
  id: string;
  name: string;
  level: 'environment' | 'developer';
  /** The scope string of the row ('*' or the environment id): part of the decryption context. */
  scope: string;
  developerId: string;
  placeholder: string;
  allowedHosts: readonly string[];
  infrastructure: boolean;
  /** Places beyond the Authorization header (null: none). */
  inject: readonly string[] | null;
  allowMinting: boolean;
  /** Sealed value (envelope blob); opened only when the proxy swaps it in. */
  valueEnc: string;
}

export interface GatewaySnapshot {
  environmentId: string;
  developerId: string;
  /** Destroyed environments get nothing: no secrets, no egress. */
  destroyed: boolean;
  /** The environment's own `egress_allow`; null when not set (the developer default applies). */
  environmentAllow: readonly string[] | null;
  /** The developer default; null when not set. */
  developerAllow: readonly string[] | null;
  /** A host off the effective allowlist: refused (`deny`) or held for a person (`ask`); the environment's own setting. */
  unknownHosts: UnknownHosts;
  /** Environment secrets plus developer secrets that no environment secret of the same name shadows; sorted by name. */
  secrets: readonly SnapshotSecret[];
  /** Hosts from the extension point (connections' hosts, later). */
  extraHosts: readonly string[];
}

/**
 * Extension point for hosts the effective egress allowlist must include beyond the
 * allowlists and secrets: the hosts of connected connectors (connections/ provides it
 * when it lands). Called on every snapshot load, so at most once per environment per
 * `ttlMs`; a provider whose data changes in this process calls `invalidateEnvironment` /
 * `invalidateDeveloper` of the cache so the change shows at once.
 */
export type ExtraHostsProvider = (env: { environmentId: string; developerId: string }) => Promise<Iterable<string>>;

/**
 * Developer-level secrets as every environment's snapshot holds them: one object per secret
 * and content, shared by the snapshots of all the developer's environments (a fourth review:
 * 100 secrets of 64 KiB and 500 hosts each were parsed and kept again in each of thousands of
 * cached snapshots, ~20 MB an environment). Reused only when the row is the same in every
 * field the snapshot reads (no timestamp is trusted); held weakly, so a secret no snapshot
 * holds any more is not kept by this map.
 */
const sharedSecrets = new Map<string, WeakRef<SnapshotSecret>>();
/** The row's JSON text a shared snapshot secret was parsed from (compared, never parsed again); gone with it. */
const sharedSource = new WeakMap<SnapshotSecret, { hosts: string; inject: string | null }>();

function sameSecret(snap: SnapshotSecret, r: SecretRow): boolean {
  const src = sharedSource.get(snap);
  return src !== undefined && snap.valueEnc === r.value_enc && src.hosts === r.allowed_hosts && src.inject === r.inject && snap.name === r.name
    && snap.placeholder === r.placeholder && snap.scope === r.scope && snap.developerId === r.developer_id
    && snap.infrastructure === Boolean(r.infrastructure) && snap.allowMinting === Boolean(r.allow_minting);
}

function sharedSnapshotSecret(r: SecretRow): SnapshotSecret {
  if (r.scope !== DEVELOPER_SCOPE) return Object.freeze(toSnapshotSecret(r));
  const seen = sharedSecrets.get(r.id)?.deref();
  if (seen !== undefined && sameSecret(seen, r)) return seen;
  const fresh = Object.freeze(toSnapshotSecret(r));
  sharedSource.set(fresh, { hosts: r.allowed_hosts, inject: r.inject });
  if (sharedSecrets.size >= 10_000) for (const [id, ref] of sharedSecrets) if (ref.deref() === undefined) sharedSecrets.delete(id);
  if (sharedSecrets.size < 10_000) sharedSecrets.set(r.id, new WeakRef(fresh));
  return fresh;
}

function toSnapshotSecret(r: SecretRow): SnapshotSecret {
  return {
    id: r.id,
    name: r.name,
    level: r.scope === DEVELOPER_SCOPE ? 'developer' : 'environment',
    scope: r.scope,
    developerId: r.developer_id,
    placeholder: r.placeholder,
    allowedHosts: Object.freeze(fromJson<string[]>(r.allowed_hosts) ?? []),
    infrastructure: Boolean(r.infrastructure),
    inject: r.inject ? Object.freeze(fromJson<string[]>(r.inject) ?? []) : null,
    allowMinting: Boolean(r.allow_minting),
    valueEnc: r.value_enc,
  };
}

/** Loads one snapshot straight from the store (no cache); null for an unknown environment. */
export async function loadSnapshot(db: Queryable, environmentId: string, extraHosts?: ExtraHostsProvider): Promise<GatewaySnapshot | null> {
  const env = await egressStore.environment(db, environmentId);
  if (!env) return null;
  const destroyed = env.desired_state === 'destroyed';
  const [developerAllow, rows, extra] = await Promise.all([
    egressStore.developer(db, env.developer_id),
    destroyed ? Promise.resolve([] as SecretRow[]) : secretsStore.forEnvironment(db, env.developer_id, env.id),
    extraHosts && !destroyed ? extraHosts({ environmentId: env.id, developerId: env.developer_id }) : Promise.resolve([] as string[]),
  ]);
  // An environment secret shadows the developer secret of the same name.
  const byName = new Map<string, SecretRow>();
  for (const r of rows) {
    const seen = byName.get(r.name);
    if (!seen || (seen.scope === DEVELOPER_SCOPE && r.scope !== DEVELOPER_SCOPE)) byName.set(r.name, r);
  }
  const secrets = [...byName.values()]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(sharedSnapshotSecret);
  return Object.freeze({
    environmentId: env.id,
    developerId: env.developer_id,
    destroyed,
    environmentAllow: freezeOrNull(parseAllow(env.egress_allow)),
    developerAllow: freezeOrNull(developerAllow),
    unknownHosts: parseUnknownHosts(env.egress_unknown_hosts),
    secrets: Object.freeze(secrets),
    extraHosts: Object.freeze([...extra]),
  });
}

function freezeOrNull<T>(v: T[] | null): readonly T[] | null {
  return v === null ? null : Object.freeze(v);
}

interface Entry {
  /** performance.now() when the load started: the data is at least this fresh. */
  loadedAt: number;
  promise: Promise<GatewaySnapshot | null>;
  /** Set once the load finished (null result entries are dropped, not kept). */
  value?: GatewaySnapshot;
  developerId?: string;
}

export interface GatewayCacheOptions {
  db: Queryable;
  /** Maximum age of a snapshot before it is reloaded; default 1000 ms. */
  ttlMs?: number;
  /** Most environments kept; the least recently loaded go first. Default 10 000. */
  maxEntries?: number;
  /** Monotonic milliseconds; injectable for tests. Default performance.now. */
  now?: () => number;
  extraHosts?: ExtraHostsProvider;
}

export interface GatewayCacheStats {
  hits: number;
  loads: number;
  size: number;
}

export function createGatewayCache(opts: GatewayCacheOptions) {
  const ttlMs = opts.ttlMs ?? 1000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const now = opts.now ?? (() => performance.now());
  const entries = new Map<string, Entry>();
  let extraHosts = opts.extraHosts;
  let hits = 0;
  let loads = 0;

  function startLoad(environmentId: string): Promise<GatewaySnapshot | null> {
    loads++;
    const entry: Entry = { loadedAt: now(), promise: undefined as unknown as Promise<GatewaySnapshot | null> };
    entry.promise = loadSnapshot(opts.db, environmentId, extraHosts).then(
      (snap) => {
        // Kept only if nobody invalidated (or replaced) this entry while it loaded.
        if (entries.get(environmentId) === entry) {
          if (snap) {
            entry.value = snap;
            entry.developerId = snap.developerId;
          } else {
            entries.delete(environmentId);
          }
        }
        return snap;
      },
      (err: unknown) => {
        if (entries.get(environmentId) === entry) entries.delete(environmentId);
        throw err;
      },
    );
    // Re-inserting moves the environment to the end: eviction takes the oldest loads.
    entries.delete(environmentId);
    entries.set(environmentId, entry);
    if (entries.size > maxEntries) {
      const oldest = entries.keys().next().value;
      if (oldest !== undefined) entries.delete(oldest);
    }
    return entry.promise;
  }

  return {
    /** The snapshot, from memory when younger than ttlMs; null for an unknown environment. */
    get(environmentId: string): Promise<GatewaySnapshot | null> {
      const e = entries.get(environmentId);
      if (e && now() - e.loadedAt < ttlMs) {
        hits++;
        return e.value ? Promise.resolve(e.value) : e.promise;
      }
      return startLoad(environmentId);
    },
    /** A fresh snapshot from the store, bypassing (and not filling) the cache: for API reads. */
    load(environmentId: string): Promise<GatewaySnapshot | null> {
      return loadSnapshot(opts.db, environmentId, extraHosts);
    },
    /** After a committed write to this environment's secrets or egress allowlist. */
    invalidateEnvironment(environmentId: string): void {
      entries.delete(environmentId);
    },
    /**
     * After a committed write to a developer's secrets or default allowlist: every
     * environment of that developer, and every load still in flight (its developer is
     * not known yet, and it may have read the state before the write).
     */
    invalidateDeveloper(developerId: string): void {
      for (const [id, e] of entries) {
        if (e.developerId === developerId || e.value === undefined) entries.delete(id);
      }
    },
    clear(): void {
      entries.clear();
    },
    /** Sets the extension point after construction (connections may be built after this cache). */
    setExtraHosts(provider: ExtraHostsProvider | undefined): void {
      extraHosts = provider;
      entries.clear();
    },
    stats(): GatewayCacheStats {
      return { hits, loads, size: entries.size };
    },
  };
}

export type GatewayCache = ReturnType<typeof createGatewayCache>;
