import type { Db, Tx } from '../store/db.js';
import { isMysql, isUniqueViolation, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { applyKeysetAfter } from '../store/keyset.js';
import type { BrowserBroker, StorageState } from './broker.js';
import type { ProfileRow } from './profiles.service.js';
import { createHash, randomBytes } from 'node:crypto';
import { enqueueEvent } from '../webhooks/outbox.js';

/**
 * Browser leases (service.md, Browser lease state table; decisions.md, Browser; issue 14,
 * item 2). A lease belongs to one environment and optionally one profile:
 *
 * - modes: with a profile `write` (default) or `read`, never `clean`; without one only
 *   `clean`; one write lease per profile (409 `profile_locked`, by a unique index);
 * - `pending` (the browser context is being opened) → `active` (15 minutes, renewable) →
 *   on release: a saving write lease `releasing` (60 s for the state to come back) →
 *   `released` with `saved` (profile version + 1) or `discarded`; read and clean leases are
 *   `released` at once; an active lease past its time is reclaimed to `expired`;
 * - concurrency limits per developer and per end user (429 `lease_limit_reached`).
 */
export type LeaseMode = 'read' | 'write' | 'clean';
export type LeaseState = 'pending' | 'active' | 'releasing' | 'released' | 'expired';

interface LeaseRow {
  id: string;
  developer_id: string;
  environment_id: string;
  end_user_id: string;
  profile_id: string | null;
  mode: LeaseMode;
  state: LeaseState;
  expires_at: number;
  save_outcome: 'saved' | 'discarded' | null;
  taken_over: boolean | number;
  write_lock: string | null;
  base_version: number | null;
  created_at: number;
  updated_at: number;
  released_at: number | null;
}

export interface Lease {
  id: string;
  environment_id: string;
  profile_id: string | null;
  mode: LeaseMode;
  state: LeaseState;
  expires_at: string | null;
  save_outcome: 'saved' | 'discarded' | null;
  taken_over: boolean;
  cdp_url: string | null;
  /** Beyond the spec: the same endpoint as the agent reaches it from inside its VM (ws://127.0.0.1:9222/...). */
  vm_cdp_url: string | null;
  created_at: string | null;
}

export const LEASE_MS = 15 * 60_000;
export const SAVE_DEADLINE_MS = 60_000;
const LIVE: LeaseState[] = ['pending', 'active', 'releasing'];

function toLease(r: LeaseRow, cdpUrl?: (id: string) => string | null): Lease {
  return {
    id: r.id, environment_id: r.environment_id, profile_id: r.profile_id, mode: r.mode, state: r.state,
    expires_at: iso(Number(r.expires_at)), save_outcome: r.save_outcome, taken_over: Boolean(r.taken_over),
    // The agent's CDP endpoint (cdp-relay.ts), while the lease is active.
    cdp_url: r.state === 'active' && cdpUrl ? cdpUrl(r.id) : null,
    vm_cdp_url: r.state === 'active' && cdpUrl ? (cdpUrl(r.id)?.replace(/^wss?:\/\/[^/]+/, 'ws://127.0.0.1:9222') ?? null) : null,
    created_at: iso(Number(r.created_at)),
  };
}

export interface LeasesDeps {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  broker: BrowserBroker;
  limits: { perDeveloper: number; perEndUser: number };
  /** The lease's CDP URL (with its token). */
  cdpUrl?: (leaseId: string) => string | null;
  /** A lease ended (released, expired): its agent connections are closed. */
  onEnded?: (leaseId: string) => void;
  /** The public base of view_url. */
  baseUrl: () => string;
  /** Whether the environment is placed on a host that is online (takeover and handback: 503 host_unavailable otherwise, service.md). */
  environmentOnHost?: (environmentId: string) => Promise<boolean>;
  /** A person handed the browser back (API, button or `{done: true}`): viewers are closed. */
  onHandback?: (leaseId: string) => void;
  /** A person takes the browser: the agent's CDP connections to the lease are closed and their sessions detached (before the pages are reloaded). */
  onTakeover?: (leaseId: string) => Promise<void>;
}

export const VIEW_URL_MS = 10 * 60_000;
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

export function createLeasesService(deps: LeasesDeps) {
  const { db, clock, keyring, broker, log } = deps;
  const stateContext = (profileId: string) => `browser-profile:${profileId}`;

  async function lockLease(trx: Tx, developerId: string, id: string): Promise<LeaseRow | undefined> {
    const q = trx<LeaseRow>('browser_leases').where({ developer_id: developerId, id });
    return (isMysql(trx) ? q.forUpdate() : q).first();
  }

  async function create(developerId: string, input: { environment_id: string; profile_id?: string | null; mode?: LeaseMode | null }): Promise<Lease> {
    const profileId = input.profile_id ?? null;
    const mode: LeaseMode = input.mode ?? (profileId ? 'write' : 'clean');
    if (profileId && mode === 'clean') throw new ServiceError('invalid_request', 'a lease with a profile is read or write, never clean');
    if (!profileId && mode !== 'clean') throw new ServiceError('invalid_request', 'a lease without a profile can only be clean');
    const now = clock.nowMs();
    let row: LeaseRow;
    let profile: ProfileRow | undefined;
    try {
      row = await withTx(db, async (trx) => {
        // Every create of this developer passes this row's lock: the limits hold under races.
        const n = await trx('browser_lease_counters').where({ developer_id: developerId }).update({ touched_at: now });
        if (!n) {
          try {
            await trx('browser_lease_counters').insert({ developer_id: developerId, touched_at: now });
          } catch (err) {
            if (!isUniqueViolation(err)) throw err;
          }
        }
        const cq = trx('browser_lease_counters').where({ developer_id: developerId });
        await (isMysql(trx) ? cq.forUpdate() : cq).first();
        const env = await trx('environments').where({ developer_id: developerId, id: input.environment_id }).first();
        if (!env) throw notFound();
        if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
        if (profileId) {
          profile = await trx<ProfileRow>('browser_profiles').where({ developer_id: developerId, id: profileId }).whereNull('deleted_at').first();
          if (!profile) throw notFound();
          if (profile.end_user_id !== env.end_user_id) throw new ServiceError('invalid_request', 'the profile belongs to another end user than the environment');
        }
        await reclaimExpiredIn(trx, developerId, now);
        const live = await trx('browser_leases').where({ developer_id: developerId }).whereIn('state', LIVE).count({ n: '*' }).first();
        if (Number(live?.n ?? 0) >= deps.limits.perDeveloper) throw new ServiceError('lease_limit_reached', `at most ${deps.limits.perDeveloper} browser leases at once per developer`);
        const mine = await trx('browser_leases').where({ developer_id: developerId, end_user_id: env.end_user_id }).whereIn('state', LIVE).count({ n: '*' }).first();
        if (Number(mine?.n ?? 0) >= deps.limits.perEndUser) throw new ServiceError('lease_limit_reached', `at most ${deps.limits.perEndUser} browser leases at once per end user`);
        const r: LeaseRow = {
          id: newId('bls'), developer_id: developerId, environment_id: env.id, end_user_id: env.end_user_id, profile_id: profileId, mode,
          state: 'pending', expires_at: now + LEASE_MS, save_outcome: null, taken_over: false,
          write_lock: mode === 'write' ? profileId : null, base_version: profile ? Number(profile.version) : null,
          created_at: now, updated_at: now, released_at: null,
        };
        await trx('browser_leases').insert(r);
        return r;
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceError('profile_locked', 'another write lease holds this profile');
      throw err;
    }
    // The context: the profile's state (read and write), or nothing (clean).
    try {
      const storageState = profile?.state_enc ? (JSON.parse(keyring.decryptString(profile.state_enc, stateContext(profile.id))) as StorageState) : null;
      await broker.open({ id: row.id, environmentId: row.environment_id, storageState });
    } catch (err) {
      log.error({ err, lease_id: row.id }, 'browser context could not be opened');
      await db('browser_leases').where({ id: row.id }).update({ state: 'released', write_lock: null, released_at: clock.nowMs(), updated_at: clock.nowMs() });
      throw new ServiceError('host_unavailable', 'the browser could not be started');
    }
    await db('browser_leases').where({ id: row.id, state: 'pending' }).update({ state: 'active', updated_at: clock.nowMs() });
    return get(developerId, row.id);
  }

  /** Active or pending leases past their time become `expired`; releasing ones past the deadline are discarded. */
  async function reclaimExpiredIn(trx: Tx | Db, developerId: string | null, now: number): Promise<string[]> {
    const q = trx<LeaseRow>('browser_leases').whereIn('state', LIVE).where('expires_at', '<=', now);
    if (developerId) q.where({ developer_id: developerId });
    const due = await q;
    for (const r of due) {
      const next = r.state === 'releasing'
        ? { state: 'released', save_outcome: 'discarded' }
        : { state: 'expired' };
      await trx('browser_leases').where({ id: r.id, state: r.state }).update({ ...next, write_lock: null, released_at: now, updated_at: now });
    }
    const ids = due.map((r) => r.id);
    // The contexts close after the commit (a rollback would leave them open: the next sweep closes them).
    setImmediate(() => {
      for (const id of ids) {
        takenOver.delete(id);
        deps.onEnded?.(id);
        void broker.close(id);
      }
    });
    return ids;
  }

  async function reclaimDue(): Promise<number> {
    return (await withTx(db, (trx) => reclaimExpiredIn(trx, null, clock.nowMs()))).length;
  }

  async function get(developerId: string, id: string): Promise<Lease> {
    const r = await db<LeaseRow>('browser_leases').where({ developer_id: developerId, id }).first();
    if (!r) throw notFound();
    if (LIVE.includes(r.state) && Number(r.expires_at) <= clock.nowMs()) {
      await withTx(db, (trx) => reclaimExpiredIn(trx, developerId, clock.nowMs()));
      return get(developerId, id);
    }
    return toLease(r, deps.cdpUrl);
  }

  async function list(developerId: string, opts: { environmentId?: string; state?: string; limit: number; after: string | null }): Promise<Lease[]> {
    await withTx(db, (trx) => reclaimExpiredIn(trx, developerId, clock.nowMs()));
    const q = db<LeaseRow>('browser_leases').where({ developer_id: developerId });
    if (opts.environmentId !== undefined) q.where({ environment_id: opts.environmentId });
    if (opts.state !== undefined) q.where('state', opts.state);
    await applyKeysetAfter(db, q, 'browser_leases', 'created_at', opts.after, 'asc', { developer_id: developerId });
    return (await q.limit(opts.limit + 1)).map((r) => toLease(r, deps.cdpUrl));
  }

  const notActive = (): ServiceError => new ServiceError('lease_not_active', 'the lease is not active');

  async function renew(developerId: string, id: string): Promise<Lease> {
    const now = clock.nowMs();
    await withTx(db, async (trx) => {
      const r = await lockLease(trx, developerId, id);
      if (!r) throw notFound();
      if (r.state !== 'active' || Number(r.expires_at) <= now) throw notActive();
      await trx('browser_leases').where({ id }).update({ expires_at: now + LEASE_MS, updated_at: now });
    });
    return get(developerId, id);
  }

  /** `save` omitted or null means true; meaningful only for write leases. */
  async function release(developerId: string, id: string, save: boolean | null | undefined): Promise<Lease> {
    const now = clock.nowMs();
    const saving = save !== false;
    const outcome = await withTx(db, async (trx) => {
      const r = await lockLease(trx, developerId, id);
      if (!r) throw notFound();
      if (LIVE.includes(r.state) && Number(r.expires_at) <= now) {
        await reclaimExpiredIn(trx, developerId, now);
        return 'expired' as const;
      }
      if (r.state === 'released') return 'as_is' as const;
      if (r.state === 'releasing') {
        if (!saving) throw notActive();
        return 'as_is' as const;
      }
      if (r.state !== 'active') throw notActive();
      if (r.mode === 'write' && saving) {
        await trx('browser_leases').where({ id }).update({ state: 'releasing', expires_at: now + SAVE_DEADLINE_MS, updated_at: now });
        return 'export' as const;
      }
      await trx('browser_leases').where({ id }).update({
        state: 'released', save_outcome: r.mode === 'write' ? 'discarded' : null, write_lock: null, released_at: now, updated_at: now,
      });
      return 'close' as const;
    });
    if (outcome === 'expired') throw notActive();
    if (outcome === 'close' || outcome === 'export') {
      takenOver.delete(id);
      deps.onEnded?.(id);
    }
    // Not awaited (issue 29, item 3): the lease leaves the broker's registry at once, so no
    // relay or viewer reaches its context any more; Chromium's disposal of it (~10 ms: its
    // renderers end) goes on after the answer.
    if (outcome === 'close') void broker.close(id);
    if (outcome === 'export') void saveState(developerId, id);
    return get(developerId, id);
  }

  /**
   * The broker ends the session and hands the signed-in state back; it is encrypted and
   * stored as the profile's next version. Nothing back before the deadline: the reclaim
   * job discards it.
   */
  async function saveState(developerId: string, id: string): Promise<void> {
    let state: StorageState;
    try {
      state = await broker.exportState(id);
    } catch (err) {
      log.warn({ err, lease_id: id }, 'browser state could not be exported; the lease will be discarded at its deadline');
      return;
    } finally {
      await broker.close(id);
    }
    await withTx(db, async (trx) => {
      const r = await lockLease(trx, developerId, id);
      if (!r || r.state !== 'releasing' || !r.profile_id) return;
      const now = clock.nowMs();
      const sealed = keyring.encrypt(JSON.stringify(state), stateContext(r.profile_id));
      const n = await trx('browser_profiles').where({ id: r.profile_id }).whereNull('deleted_at').update({ state_enc: sealed, updated_at: now, version: trx.raw('version + 1') });
      await trx('browser_leases').where({ id }).update({ state: 'released', save_outcome: n ? 'saved' : 'discarded', write_lock: null, released_at: now, updated_at: now });
    });
  }

  /** Whether a pending, active or releasing lease uses the profile (profile delete: 409 profile_in_use). */
  async function profileInUse(profileId: string): Promise<boolean> {
    const r = await db('browser_leases').where({ profile_id: profileId }).whereIn('state', LIVE).where('expires_at', '>', clock.nowMs()).first('id');
    return Boolean(r);
  }

  /** Leases a person holds now, in this process (the CDP relay refuses the agent's commands). */
  const takenOver = new Set<string>();

  function isTakenOver(id: string): boolean {
    return takenOver.has(id);
  }

  /**
   * Takeover: the lease is held by a person (every agent CDP command refused) and a new
   * one-time view_url, valid 10 minutes, is made each call.
   */
  async function requireHost(environmentId: string): Promise<void> {
    if (deps.environmentOnHost && !(await deps.environmentOnHost(environmentId))) {
      throw new ServiceError('host_unavailable', 'the environment is not placed on a host, or its host is offline');
    }
  }

  async function takeover(developerId: string, id: string): Promise<{ view_url: string; expires_at: string | null }> {
    const now = clock.nowMs();
    const pre = await db<LeaseRow>('browser_leases').where({ developer_id: developerId, id }).first();
    if (!pre) throw notFound();
    if (pre.state !== 'active' || Number(pre.expires_at) <= now) throw notActive();
    await requireHost(pre.environment_id);
    const token = randomBytes(32).toString('base64url');
    const already = await withTx(db, async (trx) => {
      const r = await lockLease(trx, developerId, id);
      if (!r) throw notFound();
      if (r.state !== 'active' || Number(r.expires_at) <= now) throw notActive();
      if (!broker.up() || !broker.has(id)) throw new ServiceError('host_unavailable', 'the browser broker is not up');
      await broker.ensurePage(id);
      await trx('browser_leases').where({ id }).update({ taken_over: true, updated_at: now });
      await trx('browser_view_tokens').insert({ token_hash: sha256(token), lease_id: id, expires_at: now + VIEW_URL_MS, used_at: null, invalidated_at: null, created_at: now });
      return Boolean(r.taken_over);
    });
    takenOver.add(id);
    if (!already) {
      // The person gets a browser the agent cannot watch (issue 23, item 3): the agent's
      // connections and sessions end (with them its bindings, scripts and subscriptions), then
      // every page of the lease is loaded afresh, so nothing the agent put in a page remains.
      await deps.onTakeover?.(id);
      await broker.prepareForPerson(id).catch((err) => log.warn({ err, lease_id: id }, 'the lease\'s pages could not be reloaded for the person'));
    }
    return { view_url: `${deps.baseUrl()}/v1/browser/view/${token}`, expires_at: iso(now + VIEW_URL_MS) };
  }

  /** Handback (API, the viewer's button or `{done: true}`): the agent continues; unused viewer URLs die. */
  async function handback(developerId: string | null, id: string): Promise<Lease | null> {
    const now = clock.nowMs();
    if (developerId) {
      const pre = await db<LeaseRow>('browser_leases').where({ developer_id: developerId, id }).first();
      if (!pre) throw notFound();
      if (pre.state === 'active' && Number(pre.expires_at) > now && pre.taken_over) await requireHost(pre.environment_id);
    }
    const dev = await withTx(db, async (trx) => {
      const q = trx<LeaseRow>('browser_leases').where({ id });
      if (developerId) q.where({ developer_id: developerId });
      const r = await (isMysql(trx) ? q.forUpdate() : q).first();
      if (!r) throw notFound();
      if (r.state !== 'active' || Number(r.expires_at) <= now) throw notActive();
      if (!r.taken_over) throw new ServiceError('not_taken_over', 'the lease is not taken over');
      if (developerId && !broker.up()) throw new ServiceError('host_unavailable', 'the browser broker is not up');
      await trx('browser_leases').where({ id }).update({ taken_over: false, updated_at: now });
      await trx('browser_view_tokens').where({ lease_id: id }).whereNull('used_at').whereNull('invalidated_at').update({ invalidated_at: now });
      return r.developer_id;
    });
    takenOver.delete(id);
    deps.onHandback?.(id);
    return developerId ? get(dev, id) : null;
  }

  /** A view token's lease, if the token may open the page now (unused, unexpired, lease taken over). */
  async function viewable(token: string): Promise<{ leaseId: string } | null> {
    const now = clock.nowMs();
    const v = await db('browser_view_tokens').where({ token_hash: sha256(token) }).first();
    if (!v || v.used_at != null || v.invalidated_at != null || Number(v.expires_at) <= now) return null;
    const r = await db<LeaseRow>('browser_leases').where({ id: v.lease_id, state: 'active' }).where('expires_at', '>', now).first();
    return r && r.taken_over ? { leaseId: r.id } : null;
  }

  /** Consumes a view token for the viewer's WebSocket (once: a conditional update). */
  async function consumeView(token: string): Promise<{ leaseId: string } | null> {
    const ok = await viewable(token);
    if (!ok) return null;
    const n = await db('browser_view_tokens').where({ token_hash: sha256(token) }).whereNull('used_at').whereNull('invalidated_at').update({ used_at: clock.nowMs() });
    return n === 1 ? ok : null;
  }

  /** The agent asks for a person (control socket POST /browser/takeover): webhook browser.takeover_requested. */
  async function requestTakeover(environmentId: string, body: unknown): Promise<{ status: number; body: unknown }> {
    // Issue 24, item 5: a reason is at most 500 characters, and while a request for the lease
    // is pending (asked in the last 10 minutes and not taken over since, or taken over now)
    // another answers 202 with it: no second event, no second webhook.
    const MAX_REASON = 500;
    const PENDING_MS = 10 * 60_000;
    const b = body as { lease_id?: unknown; reason?: unknown } | null;
    if (!b || typeof b !== 'object' || Array.isArray(b) || typeof b.lease_id !== 'string' || b.lease_id.length > 100 || Object.keys(b).some((k) => k !== 'lease_id' && k !== 'reason') || (b.reason !== undefined && b.reason !== null && (typeof b.reason !== 'string' || b.reason.length > MAX_REASON))) {
      return { status: 400, body: { error: 'invalid_request', message: `the body is {lease_id, reason?}, reason at most ${MAX_REASON} characters` } };
    }
    const r = await db<LeaseRow>('browser_leases').where({ id: b.lease_id, environment_id: environmentId }).first();
    if (!r) return { status: 404, body: { error: 'not_found', message: 'no such lease of this environment' } };
    if (r.state !== 'active' || Number(r.expires_at) <= clock.nowMs()) return { status: 409, body: { error: 'lease_not_active', message: 'the lease is not active' } };
    const reason = typeof b.reason === 'string' ? b.reason : null;
    const now = clock.nowMs();
    const out = await withTx(db, async (trx) => {
      // Under the lease's lock: two requests at once cannot both find none pending.
      const locked = (await lockLease(trx, r.developer_id, r.id)) as (LeaseRow & { takeover_requested_at?: number | string | null }) | undefined;
      if (!locked || locked.state !== 'active' || Number(locked.expires_at) <= now) return null;
      const last = locked.takeover_requested_at == null ? null : Number(locked.takeover_requested_at);
      let pending = Boolean(locked.taken_over);
      if (!pending && last !== null && last > now - PENDING_MS) {
        // A takeover since the request (it makes a view token) answered it.
        pending = !(await trx('browser_view_tokens').where({ lease_id: r.id }).where('created_at', '>', last).first());
      }
      if (pending) return { requested_at: last, duplicate: true };
      await trx('browser_leases').where({ id: r.id }).update({ takeover_requested_at: now });
      await trx('environment_events').insert({ environment_id: environmentId, developer_id: r.developer_id, kind: 'takeover_requested', source: 'agent', data: JSON.stringify({ lease_id: r.id, reason }), created_at: now });
      await enqueueEvent(trx, { developerId: r.developer_id, type: 'browser.takeover_requested', environmentId, data: { lease_id: r.id, environment_id: environmentId, reason }, createdAtMs: now });
      return { requested_at: now, duplicate: false };
    });
    if (!out) return { status: 409, body: { error: 'lease_not_active', message: 'the lease is not active' } };
    return { status: 202, body: { requested: true, lease_id: r.id, requested_at: iso(out.requested_at), duplicate: out.duplicate } };
  }

  /**
   * The environment is destroyed: its live leases end with it (`released`; a write lease's
   * state is discarded: its browser, part of the environment, goes too), their agent
   * connections and viewers are closed and their contexts with them.
   */
  async function endForEnvironment(environmentId: string): Promise<string[]> {
    const now = clock.nowMs();
    const ids = await withTx(db, async (trx) => {
      const rows = await trx<LeaseRow>('browser_leases').where({ environment_id: environmentId }).whereIn('state', LIVE);
      for (const r of rows) {
        await trx('browser_leases').where({ id: r.id, state: r.state }).update({
          state: 'released', save_outcome: r.mode === 'write' ? 'discarded' : r.save_outcome, write_lock: null, taken_over: false, released_at: now, updated_at: now,
        });
        await trx('browser_view_tokens').where({ lease_id: r.id }).whereNull('used_at').whereNull('invalidated_at').update({ invalidated_at: now });
      }
      return rows.map((r) => r.id);
    });
    for (const id of ids) {
      takenOver.delete(id);
      deps.onEnded?.(id);
      await broker.close(id);
    }
    return ids;
  }

  /** An active lease (any developer) for the CDP relay's upgrade, or null. */
  async function activeRow(id: string): Promise<{ id: string; environment_id: string; taken_over: boolean } | null> {
    const r = await db<LeaseRow>('browser_leases').where({ id, state: 'active' }).where('expires_at', '>', clock.nowMs()).first();
    return r ? { id: r.id, environment_id: r.environment_id, taken_over: Boolean(r.taken_over) } : null;
  }

  /** Live leases by state, all developers (gateway_browser_leases, issue 25, item 2; the (state, expires_at) index). */
  async function countByState(): Promise<Record<string, number>> {
    const rows = await db('browser_leases').whereIn('state', LIVE).select('state').count({ n: '*' }).groupBy('state');
    const out: Record<string, number> = {};
    for (const r of rows as Array<{ state: string; n: number | string }>) out[r.state] = Number(r.n);
    return out;
  }

  return { create, get, list, renew, release, reclaimDue, profileInUse, activeRow, takeover, handback, isTakenOver, viewable, consumeView, requestTakeover, endForEnvironment, countByState };
}

export type LeasesService = ReturnType<typeof createLeasesService>;
