import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { hostPatternsRule } from './rules.js';
import { environmentsStore } from './environments.store.js';
import { eventsStore } from './events.store.js';
import { egressStore } from './egress.store.js';
import { DENY_ALL, compileHostPatterns, normalizePatterns, type HostMatcher } from './egress.matcher.js';
import type { GatewayCache, GatewaySnapshot } from './egress.cache.js';

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
}

/** GET/PUT `/v1/environments/{id}/egress`. */
export interface EnvironmentEgress {
  /** The environment's own list; null when not set (the developer default applies). */
  allow: string[] | null;
  source: EgressSource;
  /** Every pattern the proxy enforces for this environment right now. */
  effective: string[];
}

/** GET/PUT `/v1/egress`: the developer default ([] when never set). */
export interface DeveloperEgress {
  allow: string[];
}

const DENIED: EffectiveEgress = Object.freeze({ allows: DENY_ALL.allows, patterns: DENY_ALL.patterns, source: 'none' as const });

/** Pure: the effective allowlist of a snapshot. A destroyed environment reaches nothing. */
export function effectiveEgressOf(snap: GatewaySnapshot): EffectiveEgress {
  const source: EgressSource = snap.environmentAllow !== null ? 'environment' : snap.developerAllow !== null ? 'developer' : 'none';
  if (snap.destroyed) return { ...DENIED, source };
  const base = snap.environmentAllow ?? snap.developerAllow ?? [];
  const m = compileHostPatterns([...base, ...snap.secrets.flatMap((s) => s.allowedHosts), ...snap.extraHosts]);
  return Object.freeze({ allows: m.allows, patterns: m.patterns, source });
}

function checkPatterns(allow: string[] | null, what: string): string[] | null {
  if (allow === null) return null;
  const broken = hostPatternsRule(allow, what);
  if (broken) throw new ServiceError('invalid_request', broken);
  return normalizePatterns(allow);
}

export function createEgressService(deps: { db: Db; clock: Clock; cache: GatewayCache }) {
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
    return { allow: snap.environmentAllow ? [...snap.environmentAllow] : null, source: e.source, effective: [...e.patterns] };
  }

  /** Read from the store, not the cache: the API reads its own (and other replicas') writes. */
  async function getEnvironment(developerId: string, environmentId: string): Promise<EnvironmentEgress> {
    const snap = await cache.load(environmentId);
    if (!snap || snap.developerId !== developerId) throw notFound();
    return view(snap);
  }

  /** `allow: null` clears the environment's own list (the developer default applies again). */
  async function putEnvironment(developerId: string, environmentId: string, allow: string[] | null): Promise<EnvironmentEgress> {
    const list = checkPatterns(allow, 'allow');
    try {
      await withTx(db, async (trx) => {
        const env = await environmentsStore.getForUpdate(trx, developerId, environmentId);
        if (!env) throw notFound();
        if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
        const now = clock.nowMs();
        await egressStore.setEnvironment(trx, environmentId, list, now);
        // The event gives the size, not the list: 500 patterns would not fit an event row.
        await eventsStore.append(trx, { environment_id: environmentId, developer_id: developerId, kind: 'egress_updated', source: 'api', data: { count: list === null ? null : list.length }, created_at: now });
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

  return { getEnvironment, putEnvironment, getDeveloper, putDeveloper, effectiveEgress };
}

export type EgressService = ReturnType<typeof createEgressService>;
