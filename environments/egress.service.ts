import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { hostPatternsRule } from './rules.js';
import { environmentsStore } from './environments.store.js';
import { eventsStore } from './events.store.js';
import { egressStore, type UnknownHosts } from './egress.store.js';
import { DENY_ALL, compileHostPatterns, normalizePatterns, type HostMatcher } from './egress.matcher.js';
import type { GatewayCache, GatewaySnapshot } from './egress.cache.js';
import { GrantIndex, type Category, type GrantLike } from '../policy-engine/index.js';

/** Where the base of an environment's effective allowlist comes from. */
export type EgressSource = 'environment' | 'developer' | 'none';

/**
 * The compiled effective egress allowlist of one environment (decisions.md): the
 * environment's `egress_allow` if set, else the developer default, else empty; plus the
 * `allowed_hosts` of every secret the environment can use, plus the extension point's
 * hosts (connections). `patterns` is the union, sorted.
 */
export interface EffectiveEgress extends HostMatcher {
  source: EgressSource;
  /**
   * A host `allows()` refuses: 403 `egress_denied` (`deny`), or held for a person's approval
   * (`ask`; issue 26, item 3). Always `deny` for a destroyed environment.
   */
  unknownHosts: UnknownHosts;
}

export type { UnknownHosts } from './egress.store.js';

/**
 * The approval connector for a host off the allowlist (issue 26, item 3): `egress:` and the
 * canonical host, without a port (a grant lets the host through on every port, like an
 * allowlist entry without one). Approvals, grants and the audit log store connectors in
 * 100 characters, so a host longer than this is never asked about (refused as under deny).
 */
export const EGRESS_CONNECTOR_PREFIX = 'egress:';
export const MAX_CONNECTOR_LENGTH = 100;
export function egressConnector(host: string): string | null {
  const c = `${EGRESS_CONNECTOR_PREFIX}${host}`;
  return c.length <= MAX_CONNECTOR_LENGTH ? c : null;
}
/** The category of every egress approval and grant; policy rules cannot name it. */
export const EGRESS_CATEGORY = 'connect';

/** GET/PUT `/v1/environments/{id}/egress`. */
export interface EnvironmentEgress {
  /** The environment's own list; null when not set (the developer default applies). */
  allow: string[] | null;
  source: EgressSource;
  /** Every pattern the proxy enforces for this environment right now. */
  effective: string[];
  /** What happens to a host off `effective`: `deny` (the default) or `ask`. The environment's own setting. */
  unknown_hosts: UnknownHosts;
}

/** GET/PUT `/v1/egress`: the developer default ([] when never set). */
export interface DeveloperEgress {
  allow: string[];
}

const DENIED: EffectiveEgress = Object.freeze({ allows: DENY_ALL.allows, patterns: DENY_ALL.patterns, source: 'none' as const, unknownHosts: 'deny' as const });

/** Pure: the effective allowlist of a snapshot. A destroyed environment reaches nothing. */
export function effectiveEgressOf(snap: GatewaySnapshot): EffectiveEgress {
  const source: EgressSource = snap.environmentAllow !== null ? 'environment' : snap.developerAllow !== null ? 'developer' : 'none';
  if (snap.destroyed) return { ...DENIED, source };
  const base = snap.environmentAllow ?? snap.developerAllow ?? [];
  const m = compileHostPatterns([...base, ...snap.secrets.flatMap((s) => s.allowedHosts), ...snap.extraHosts]);
  return Object.freeze({ allows: m.allows, patterns: m.patterns, source, unknownHosts: snap.unknownHosts === 'ask' ? 'ask' : 'deny' });
}

function checkPatterns(allow: string[] | null, what: string): string[] | null {
  if (allow === null) return null;
  const broken = hostPatternsRule(allow, what);
  if (broken) throw new ServiceError('invalid_request', broken);
  return normalizePatterns(allow);
}

/** A host off the allowlist under `unknown_hosts: "ask"`: what to ask under, and the grant that already covers it. */
export interface UnknownHostVerdict {
  connector: string;
  category: typeof EGRESS_CATEGORY;
  grant: { id: string } | null;
}

/**
 * The grant that lets `connector` (`egress:<host>`) through for a request with these task and
 * session ids, honouring scope and expiry (policy-engine GrantIndex, as for policy grants).
 * A grant with limits (issue 26, item 2: uses or amounts, counted only for credentialed
 * requests) never covers a host: nothing would count its uses, so it fails closed and asks.
 */
export function findEgressGrant<G extends GrantLike>(grants: readonly G[], connector: string, tags: { task_id?: string | null; session_id?: string | null }, nowMs: number): G | null {
  const mine = grants.filter((g) => g.connector === connector && g.category === (EGRESS_CATEGORY as string) && ((g as { limits?: unknown }).limits ?? null) === null);
  if (mine.length === 0) return null;
  return new GrantIndex(mine).find({ connector, category: EGRESS_CATEGORY as unknown as Category, task_id: tags.task_id ?? null, session_id: tags.session_id ?? null }, nowMs);
}

export function createEgressService(deps: {
  db: Db;
  clock: Clock;
  cache: GatewayCache;
  /**
   * The environment's grants in effect (approvals' grantsInEffect), read on each request to a
   * host off the allowlist under `ask` (a revoked grant stops at once). Absent: no grant covers.
   */
  grantsInEffect?: (developerId: string, environmentId: string) => Promise<readonly GrantLike[]>;
}) {
  const { db, clock, cache } = deps;
  const compiled = new WeakMap<GatewaySnapshot, EffectiveEgress>();

  function compiledFor(snap: GatewaySnapshot): EffectiveEgress {
    let e = compiled.get(snap);
    if (!e) {
      e = effectiveEgressOf(snap);
      compiled.set(snap, e);
    }
    return e;
  }

  function view(snap: GatewaySnapshot): EnvironmentEgress {
    const e = effectiveEgressOf(snap);
    // The stored setting, also for a destroyed environment (whose gateway refuses every host anyway).
    return { allow: snap.environmentAllow ? [...snap.environmentAllow] : null, source: e.source, effective: [...e.patterns], unknown_hosts: snap.unknownHosts };
  }

  /** Read from the store, not the cache: the API reads its own (and other replicas') writes. */
  async function getEnvironment(developerId: string, environmentId: string): Promise<EnvironmentEgress> {
    const snap = await cache.load(environmentId);
    if (!snap || snap.developerId !== developerId) throw notFound();
    return view(snap);
  }

  /**
   * `allow: null` clears the environment's own list (the developer default applies again).
   * A field left undefined is left as it is (the API requires at least one of the two).
   */
  async function putEnvironment(developerId: string, environmentId: string, allow: string[] | null | undefined, unknownHosts?: UnknownHosts): Promise<EnvironmentEgress> {
    const list = allow === undefined ? undefined : checkPatterns(allow, 'allow');
    try {
      await withTx(db, async (trx) => {
        const env = await environmentsStore.getForUpdate(trx, developerId, environmentId);
        if (!env) throw notFound();
        if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
        const now = clock.nowMs();
        if (list !== undefined) await egressStore.setEnvironment(trx, environmentId, list, now);
        if (unknownHosts !== undefined) await egressStore.setUnknownHosts(trx, environmentId, unknownHosts, now);
        // The event gives the size, not the list: 500 patterns would not fit an event row.
        // `count` is absent when only unknown_hosts changed; `unknown_hosts` only when it was given.
        const data: Record<string, unknown> = list === undefined ? {} : { count: list === null ? null : list.length };
        if (unknownHosts !== undefined) data.unknown_hosts = unknownHosts;
        await eventsStore.append(trx, { environment_id: environmentId, developer_id: developerId, kind: 'egress_updated', source: 'api', data, created_at: now });
      });
    } finally {
      cache.invalidateEnvironment(environmentId);
    }
    return getEnvironment(developerId, environmentId);
  }

  async function getDeveloper(developerId: string): Promise<DeveloperEgress> {
    return { allow: (await egressStore.developer(db, developerId)) ?? [] };
  }

  /** `allow: null` clears the default (same effect as []). */
  async function putDeveloper(developerId: string, allow: string[] | null): Promise<DeveloperEgress> {
    const list = checkPatterns(allow, 'allow');
    try {
      await egressStore.setDeveloper(db, developerId, list);
    } finally {
      cache.invalidateDeveloper(developerId);
    }
    return { allow: list ?? [] };
  }

  /**
   * The proxy's lookup, from the gateway cache: null for an unknown environment; a
   * destroyed environment's matcher allows nothing. Compiled once per snapshot.
   */
  async function effectiveEgress(environmentId: string): Promise<EffectiveEgress | null> {
    const snap = await cache.get(environmentId);
    return snap ? compiledFor(snap) : null;
  }

  /**
   * For the proxy, a host `effectiveEgress(...).allows()` refused (issue 26, item 3): null when
   * it is refused (`unknown_hosts: "deny"`, an unknown or destroyed environment, a host too
   * long to name in a connector); else the approval's connector and category and the grant in
   * effect that covers this request, if any.
   */
  async function unknownHost(developerId: string, environmentId: string, host: string, tags: { task_id?: string; session_id?: string }): Promise<UnknownHostVerdict | null> {
    const e = await effectiveEgress(environmentId);
    if (!e || e.unknownHosts !== 'ask') return null;
    const connector = egressConnector(host);
    if (!connector) return null;
    const grants = deps.grantsInEffect ? await deps.grantsInEffect(developerId, environmentId) : [];
    const g = findEgressGrant(grants, connector, tags, clock.nowMs());
    return { connector, category: EGRESS_CATEGORY, grant: g ? { id: g.id } : null };
  }

  return { getEnvironment, putEnvironment, getDeveloper, putDeveloper, effectiveEgress, unknownHost };
}

export type EgressService = ReturnType<typeof createEgressService>;
