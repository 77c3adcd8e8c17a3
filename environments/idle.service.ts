import type { Db, Queryable } from '../store/db.js';
import { isMysql, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { EnvironmentRow } from './environments.store.js';
import { eventsStore } from './events.store.js';

/**
 * The idle ladder (service.md, Environment state table; issue 13, item 1):
 * - state `running` with no activity for `suspend_after_secs` → suspended (`idle_suspended`);
 * - state `suspended` with no activity for `stop_after_secs`, both counted from
 *   `last_active_at` → stopped (`idle_stopped`); only powered off from suspended;
 * - a step of 0 is off; a keep-awake holds the ladder until `keep_awake_until`.
 *
 * A step moves `desired_state` (event source `system`); the host then brings the VM there
 * and reports `state`. The sweep runs on the job runner and the injectable clock, so six
 * hours of idleness are tested by advancing the clock.
 */
export type IdleStep = 'suspend' | 'stop';

export interface NextStep {
  step: IdleStep | null;
  at: number | null;
  /** Why (for the record): the step's threshold, or what holds it. */
  reason: string | null;
}

/** When and why the ladder will take its next step for this environment (none: nulls). */
export function nextIdleStep(r: Pick<EnvironmentRow, 'state' | 'desired_state' | 'last_active_at' | 'suspend_after_secs' | 'stop_after_secs' | 'keep_awake_until'>): NextStep {
  const hold = Number(r.keep_awake_until ?? 0);
  const last = Number(r.last_active_at);
  if (r.state === 'running' && r.desired_state === 'running' && Number(r.suspend_after_secs) > 0) {
    const due = last + Number(r.suspend_after_secs) * 1000;
    return hold > due
      ? { step: 'suspend', at: hold, reason: 'keep_awake' }
      : { step: 'suspend', at: due, reason: 'suspend_after_secs' };
  }
  if (r.state === 'suspended' && r.desired_state === 'suspended' && Number(r.stop_after_secs) > 0) {
    const due = last + Number(r.stop_after_secs) * 1000;
    return hold > due
      ? { step: 'stop', at: hold, reason: 'keep_awake' }
      : { step: 'stop', at: due, reason: 'stop_after_secs' };
  }
  return { step: null, at: null, reason: null };
}

/** What the environment record shows (`idle.next_step`, `idle.next_step_at`); when a keep-awake holds the step, `next_step_at` is `keep_awake_until`. */
export function idleView(r: EnvironmentRow): { next_step: IdleStep | null; next_step_at: string | null } {
  const n = nextIdleStep(r);
  return { next_step: n.step, next_step_at: iso(n.at) };
}

export interface IdleLadderDeps {
  db: Db;
  clock: Clock;
  /** After a step commits: the host acts on the new desired state. */
  onChange?: (environmentId: string) => void;
}

export function createIdleLadder(deps: IdleLadderDeps) {
  const { db, clock } = deps;

  /** Candidates whose step is due by the numbers (rechecked under the row's lock). */
  function due(q: Queryable, state: 'running' | 'suspended', column: 'suspend_after_secs' | 'stop_after_secs', now: number): Promise<EnvironmentRow[]> {
    return q<EnvironmentRow>('environments')
      .where({ state, desired_state: state })
      .where(column, '>', 0)
      .whereRaw(`last_active_at + ${column} * 1000 <= ?`, [now])
      .where((w) => w.whereNull('keep_awake_until').orWhere('keep_awake_until', '<=', now))
      .limit(500);
  }

  async function step(row: EnvironmentRow, now: number): Promise<boolean> {
    return withTx(db, async (trx) => {
      const q = trx<EnvironmentRow>('environments').where({ id: row.id });
      const cur = await (isMysql(trx) ? q.forUpdate() : q).first();
      if (!cur) return false;
      const next = nextIdleStep(cur);
      if (!next.step || next.at! > now) return false; // activity or a keep-awake came in meanwhile
      const desired = next.step === 'suspend' ? 'suspended' : 'stopped';
      await trx('environments').where({ id: row.id }).update({ desired_state: desired, updated_at: now });
      await eventsStore.append(trx, {
        environment_id: row.id,
        developer_id: cur.developer_id,
        kind: next.step === 'suspend' ? 'idle_suspended' : 'idle_stopped',
        source: 'system',
        data: { last_active_at: iso(Number(cur.last_active_at)), idle_secs: Math.floor((now - Number(cur.last_active_at)) / 1000) },
        created_at: now,
      });
      return true;
    });
  }

  /** One sweep: every due step taken; returns how many. */
  async function run(): Promise<number> {
    const now = clock.nowMs();
    let n = 0;
    for (const [state, column] of [['running', 'suspend_after_secs'], ['suspended', 'stop_after_secs']] as const) {
      for (const row of await due(db, state, column, now)) {
        if (await step(row, now)) {
          n++;
          deps.onChange?.(row.id);
        }
      }
    }
    return n;
  }

  return { run };
}

export type IdleLadder = ReturnType<typeof createIdleLadder>;
