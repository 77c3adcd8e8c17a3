import type { Db, Tx } from '../store/db.js';
import { isMysql, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { applyKeysetAfter } from '../store/keyset.js';
import { deleteInBatches, type PruneOptions } from '../store/prune.js';
import { environmentsStore } from './environments.store.js';
import { eventsStore } from './events.store.js';
import { LIMITS } from './rules.js';

interface WakeupRow {
  id: string;
  environment_id: string;
  developer_id: string;
  at: number;
  reason: string | null;
  status: 'pending' | 'fired' | 'cancelled';
  created_at: number;
  fired_at: number | null;
  cancelled_at: number | null;
}

export interface Wakeup {
  id: string;
  environment_id: string;
  at: string | null;
  reason: string | null;
  status: WakeupRow['status'];
  created_at: string | null;
}

function toWakeup(r: WakeupRow): Wakeup {
  return { id: r.id, environment_id: r.environment_id, at: iso(r.at), reason: r.reason, status: r.status, created_at: iso(r.created_at) };
}

/** RFC 3339 with an explicit zone; anything else is not an instant. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

export function parseRfc3339(value: string): number | null {
  if (!RFC3339.test(value)) return null;
  const ms = Date.parse(value.replace(' ', 'T'));
  return Number.isFinite(ms) ? ms : null;
}

/**
 * `at` may lie one minute in the past; a client that sends exactly "now minus 60 s" loses
 * the transit time of its request on the way, so that much slack is allowed on top.
 */
const TRANSIT_GRACE_MS = 500;

export function createWakeupsService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  /**
   * Fires one pending wakeup inside the caller's transaction: the environment is woken
   * (counted as activity). Each wakeup fires once even with several workers: the
   * conditional update from `pending` decides who fires it. False when someone else did.
   */
  async function fire(trx: Tx, w: WakeupRow, now: number): Promise<boolean> {
    const claimed = await trx('wakeups').where({ id: w.id, status: 'pending' }).update({ status: 'fired', fired_at: now });
    if (claimed === 0) return false;
    const envQ = trx('environments').where({ id: w.environment_id });
    const env = await (isMysql(trx) ? envQ.forUpdate() : envQ).first();
    if (!env || env.desired_state === 'destroyed') return true;
    const patch: Record<string, unknown> = { last_active_at: now, updated_at: now };
    if (env.desired_state !== 'running' && !env.limit_exceeded) patch.desired_state = 'running';
    await trx('environments').where({ id: env.id }).update(patch);
    await eventsStore.append(trx, {
      environment_id: env.id, developer_id: env.developer_id, kind: 'wakeup_fired', source: 'system',
      data: { wakeup_id: w.id, reason: w.reason, from: env.desired_state }, created_at: now,
    });
    return true;
  }

  async function create(developerId: string, environmentId: string, input: { at: string; reason?: string | null }): Promise<Wakeup> {
    const at = parseRfc3339(input.at);
    if (at === null) throw new ServiceError('invalid_request', 'at must be an RFC 3339 time with a zone, e.g. 2026-11-22T10:00:00Z');
    const row = await withTx(db, async (trx) => {
      const env = await environmentsStore.getForUpdate(trx, developerId, environmentId);
      if (!env) throw notFound();
      if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
      const now = clock.nowMs();
      if (at < now - LIMITS.wakeupPastMs - TRANSIT_GRACE_MS || at > now + LIMITS.wakeupAheadMs) {
        throw new ServiceError('invalid_request', 'at must be from one minute ago to 366 days ahead');
      }
      const pending = await trx('wakeups').where({ environment_id: environmentId, status: 'pending' }).count({ n: '*' }).first();
      if (Number(pending?.n ?? 0) >= LIMITS.pendingWakeups) {
        throw new ServiceError('wakeup_limit_reached', `an environment can have at most ${LIMITS.pendingWakeups} pending wakeups`);
      }
      const row: WakeupRow = {
        id: newId('wak'), environment_id: environmentId, developer_id: developerId, at, reason: input.reason || null,
        status: 'pending', created_at: now, fired_at: null, cancelled_at: null,
      };
      await trx('wakeups').insert(row);
      await eventsStore.append(trx, { environment_id: environmentId, developer_id: developerId, kind: 'wakeup_created', source: 'api', data: { wakeup_id: row.id, at: iso(at) }, created_at: now });
      // A wakeup that is already due fires at once (service.md, Limits), not at the next
      // job run: the caller sees the environment woken when the 201 arrives.
      if (at <= now) {
        await fire(trx, row, now);
        return { ...row, status: 'fired' as const, fired_at: now };
      }
      return row;
    });
    return toWakeup(row);
  }

  async function listPending(developerId: string, environmentId: string, limit: number, after: string | null): Promise<Wakeup[]> {
    if (!(await environmentsStore.get(db, developerId, environmentId))) throw notFound();
    const q = db<WakeupRow>('wakeups').where({ environment_id: environmentId, status: 'pending' });
    await applyKeysetAfter(db, q, 'wakeups', 'at', after, 'asc', { environment_id: environmentId });
    return (await q.limit(limit + 1)).map(toWakeup);
  }

  /** 404 when the wakeup never existed, already fired or was cancelled (spec). */
  async function cancel(developerId: string, environmentId: string, wakeupId: string): Promise<void> {
    await withTx(db, async (trx) => {
      const now = clock.nowMs();
      const n = await trx('wakeups')
        .where({ id: wakeupId, environment_id: environmentId, developer_id: developerId, status: 'pending' })
        .update({ status: 'cancelled', cancelled_at: now });
      if (n === 0) throw notFound();
      await eventsStore.append(trx, { environment_id: environmentId, developer_id: developerId, kind: 'wakeup_cancelled', source: 'api', data: { wakeup_id: wakeupId }, created_at: now });
    });
  }

  /** Fires every pending wakeup that is due (see fire()). */
  async function fireDue(batch = 100): Promise<number> {
    let fired = 0;
    for (;;) {
      const now = clock.nowMs();
      const due = await db<WakeupRow>('wakeups').where({ status: 'pending' }).andWhere('at', '<=', now).orderBy('at').limit(batch);
      if (due.length === 0) return fired;
      for (const w of due) {
        await withTx(db, async (trx) => {
          if (await fire(trx, w, now)) fired++;
        });
      }
      if (due.length < batch) return fired;
    }
  }

  /**
   * Retention: deletes wakeups that are over, fired or cancelled before `beforeMs`, in
   * batches. Nothing reads them any more (the API lists pending wakeups only, and a cancel
   * of a fired or cancelled one is 404 whether its row is there or not); the environment's
   * events (wakeup_fired, wakeup_cancelled) keep the history. A fired wakeup's `at` is at
   * or before its fired_at, so `at < beforeMs` narrows the fired ones to one range of
   * the (status, at) index.
   */
  async function prune(beforeMs: number, opts: PruneOptions = {}): Promise<number> {
    const fired = await deleteInBatches(db, 'wakeups', (q) => q.where('status', 'fired').andWhere('at', '<', beforeMs).andWhere('fired_at', '<', beforeMs), opts);
    const cancelled = await deleteInBatches(db, 'wakeups', (q) => q.where('status', 'cancelled').andWhere('cancelled_at', '<', beforeMs), opts);
    return fired + cancelled;
  }

  return { create, listPending, cancel, fireDue, prune };
}

export type WakeupsService = ReturnType<typeof createWakeupsService>;
