import type { Db } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { notFound } from '../lib/errors.js';
import { applyKeysetAfter } from '../store/keyset.js';
import { environmentsStore } from './environments.store.js';
import { eventsStore } from './events.store.js';

export interface ScheduleRow {
  id: string;
  environment_id: string;
  developer_id: string;
  schedule_key: string;
  cron: string | null;
  tz: string | null;
  at: number | null;
  source: string;
  next_run_at: number | null;
  /** The handler an agent registered (JSON argv), and when it last fired (environments/agent.service.ts). */
  command?: string | null;
  last_fired_at?: number | null;
  created_at: number;
  updated_at: number;
}

export interface Schedule {
  id: string;
  key: string;
  cron: string | null;
  tz: string | null;
  at: string | null;
  source: string;
  next_run_at: string | null;
  created_at: string | null;
}

function toSchedule(r: ScheduleRow): Schedule {
  return { id: r.id, key: r.schedule_key, cron: r.cron, tz: r.tz, at: iso(r.at), source: r.source, next_run_at: iso(r.next_run_at), created_at: iso(r.created_at) };
}

/**
 * The developer's view of schedules: list and cancel. Agents register schedules through
 * the control socket (hosts/, a later issue); the rows land in the same table.
 */
export function createSchedulesService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  async function list(developerId: string, environmentId: string, limit: number, after: string | null): Promise<Schedule[]> {
    if (!(await environmentsStore.get(db, developerId, environmentId))) throw notFound();
    const q = db<ScheduleRow>('schedules').where({ environment_id: environmentId });
    await applyKeysetAfter(db, q, 'schedules', 'created_at', after, 'asc', { environment_id: environmentId });
    return (await q.limit(limit + 1)).map(toSchedule);
  }

  async function cancel(developerId: string, environmentId: string, key: string): Promise<void> {
    await withTx(db, async (trx) => {
      const env = await environmentsStore.get(trx, developerId, environmentId);
      if (!env) throw notFound();
      const n = await trx('schedules').where({ environment_id: environmentId, schedule_key: key }).delete();
      if (n === 0) throw notFound();
      await eventsStore.append(trx, { environment_id: environmentId, developer_id: developerId, kind: 'schedule_deleted', source: 'api', data: { key }, created_at: clock.nowMs() });
    });
  }

  return { list, cancel };
}

export type SchedulesService = ReturnType<typeof createSchedulesService>;
