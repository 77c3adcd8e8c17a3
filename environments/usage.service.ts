import type { Db, Queryable } from '../store/db.js';
import { isMysql, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { EnvironmentRow } from './environments.store.js';
import { eventsStore } from './events.store.js';

/**
 * Usage limits (issue 13, item 5; docs/environments.md, Usage). The meter counts the time
 * each environment spends `running` (as its host reports it), per developer and calendar
 * month (UTC). A developer may set a limit on those seconds; past it, every environment of
 * theirs that runs or should run is suspended with `limit_exceeded` (event
 * `limit_exceeded`), and resume, wake, keep-awake and exec answer 409 `limit_exceeded`
 * until the limit is raised past the usage or removed (event `limit_cleared`; the
 * environments stay suspended until resumed).
 */
export interface Usage {
  period: string;
  period_start: string | null;
  period_end: string | null;
  running_seconds: number;
  limit: { running_seconds: number } | null;
  limit_exceeded: boolean;
}

function periodOf(ms: number): { period: string; start: number; end: number } {
  const d = new Date(ms);
  const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const end = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return { period: `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`, start, end };
}

export function createUsageService(deps: { db: Db; clock: Clock; onChange?: (environmentId: string) => void }) {
  const { db, clock } = deps;

  async function usedMs(q: Queryable, developerId: string, period: string): Promise<number> {
    const r = await q('usage_counters').where({ developer_id: developerId, period }).first();
    return Number(r?.running_ms ?? 0);
  }

  async function limitOf(q: Queryable, developerId: string): Promise<number | null> {
    const r = await q('usage_limits').where({ developer_id: developerId }).first();
    return r ? Number(r.running_seconds) : null;
  }

  async function get(developerId: string): Promise<Usage> {
    const p = periodOf(clock.nowMs());
    const used = Math.floor((await usedMs(db, developerId, p.period)) / 1000);
    const limit = await limitOf(db, developerId);
    return {
      period: p.period, period_start: iso(p.start), period_end: iso(p.end),
      running_seconds: used,
      limit: limit === null ? null : { running_seconds: limit },
      limit_exceeded: limit !== null && used >= limit,
    };
  }

  async function add(q: Queryable, developerId: string, period: string, ms: number): Promise<void> {
    if (ms <= 0) return;
    const n = await q('usage_counters').where({ developer_id: developerId, period }).increment('running_ms', ms);
    if (!n) {
      try {
        await q('usage_counters').insert({ developer_id: developerId, period, running_ms: ms });
      } catch {
        await q('usage_counters').where({ developer_id: developerId, period }).increment('running_ms', ms);
      }
    }
  }

  /**
   * Counts running time up to now (a job, every minute, and on a test-clock advance), then
   * suspends what a limit no longer allows. An environment that stopped running since the
   * last count is counted up to its last update (when its state changed).
   */
  async function meter(): Promise<{ metered: number; limited: number }> {
    const now = clock.nowMs();
    const p = periodOf(now);
    const rows = await db<EnvironmentRow & { metered_at: number | null }>('environments')
      .where((w) => w.where({ state: 'running' }).orWhereNotNull('metered_at'))
      .select('id', 'developer_id', 'state', 'metered_at', 'updated_at');
    const touched = new Set<string>();
    await withTx(db, async (trx) => {
      for (const r of rows) {
        const from = r.metered_at == null ? null : Number(r.metered_at);
        if (r.state === 'running') {
          if (from !== null) await add(trx, r.developer_id, p.period, now - from);
          await trx('environments').where({ id: r.id }).update({ metered_at: now });
        } else {
          if (from !== null) await add(trx, r.developer_id, p.period, Math.min(now, Number(r.updated_at)) - from);
          await trx('environments').where({ id: r.id }).update({ metered_at: null });
        }
        touched.add(r.developer_id);
      }
    });
    let limited = 0;
    for (const developerId of touched) limited += await enforce(developerId);
    return { metered: rows.length, limited };
  }

  /** Suspends the developer's environments when their usage reached the limit. */
  async function enforce(developerId: string): Promise<number> {
    const p = periodOf(clock.nowMs());
    const limit = await limitOf(db, developerId);
    if (limit === null) return 0;
    const used = Math.floor((await usedMs(db, developerId, p.period)) / 1000);
    if (used < limit) return 0;
    const ids = await withTx(db, async (trx) => {
      const q = trx<EnvironmentRow>('environments').where({ developer_id: developerId }).whereNot({ desired_state: 'destroyed' })
        .where((w) => w.where({ limit_exceeded: false }));
      const envs = await (isMysql(trx) ? q.forUpdate() : q);
      const now = clock.nowMs();
      const out: string[] = [];
      for (const e of envs) {
        const patch: Partial<EnvironmentRow> = { limit_exceeded: true, updated_at: now };
        if (e.desired_state === 'running') patch.desired_state = 'suspended';
        await trx('environments').where({ id: e.id }).update(patch);
        await eventsStore.append(trx, { environment_id: e.id, developer_id: developerId, kind: 'limit_exceeded', source: 'system', data: { running_seconds: used, limit_running_seconds: limit, from: e.desired_state }, created_at: now });
        out.push(e.id);
      }
      return out;
    });
    for (const id of ids) deps.onChange?.(id);
    return ids.length;
  }

  /** Clears limit_exceeded when the usage is under the (new) limit, or there is none. */
  async function clearIfUnder(developerId: string): Promise<void> {
    const p = periodOf(clock.nowMs());
    const limit = await limitOf(db, developerId);
    const used = Math.floor((await usedMs(db, developerId, p.period)) / 1000);
    if (limit !== null && used >= limit) {
      await enforce(developerId);
      return;
    }
    await withTx(db, async (trx) => {
      const envs = await trx<EnvironmentRow>('environments').where({ developer_id: developerId, limit_exceeded: true });
      const now = clock.nowMs();
      for (const e of envs) {
        await trx('environments').where({ id: e.id }).update({ limit_exceeded: false, updated_at: now });
        await eventsStore.append(trx, { environment_id: e.id, developer_id: developerId, kind: 'limit_cleared', source: 'api', data: { running_seconds: used, limit_running_seconds: limit }, created_at: now });
      }
    });
  }

  async function setLimit(developerId: string, runningSeconds: number): Promise<Usage> {
    const now = clock.nowMs();
    const n = await db('usage_limits').where({ developer_id: developerId }).update({ running_seconds: runningSeconds, updated_at: now });
    if (!n) await db('usage_limits').insert({ developer_id: developerId, running_seconds: runningSeconds, updated_at: now });
    await clearIfUnder(developerId);
    return get(developerId);
  }

  async function clearLimit(developerId: string): Promise<Usage> {
    await db('usage_limits').where({ developer_id: developerId }).delete();
    await clearIfUnder(developerId);
    return get(developerId);
  }

  return { get, meter, setLimit, clearLimit };
}

export type UsageService = ReturnType<typeof createUsageService>;
