import type { Queryable } from '../store/db.js';
import { fromJson, toJson } from '../store/db.js';
import { iso } from '../lib/clock.js';

export type EventSource = 'api' | 'agent' | 'system' | 'host';

export interface EventRow {
  id: number;
  environment_id: string;
  developer_id: string;
  kind: string;
  source: EventSource;
  data: string;
  created_at: number;
}

export interface EnvironmentEvent {
  id: number;
  environment_id: string;
  kind: string;
  source: EventSource;
  data: Record<string, unknown>;
  created_at: string | null;
}

export function toEvent(r: EventRow): EnvironmentEvent {
  return {
    id: Number(r.id),
    environment_id: r.environment_id,
    kind: r.kind,
    source: r.source,
    data: fromJson<Record<string, unknown>>(r.data) ?? {},
    created_at: iso(r.created_at),
  };
}

export const eventsStore = {
  async append(
    db: Queryable,
    e: { environment_id: string; developer_id: string; kind: string; source: EventSource; data?: Record<string, unknown>; created_at: number },
  ): Promise<void> {
    await db('environment_events').insert({ ...e, data: toJson(e.data ?? {}) });
  },
  list(db: Queryable, environmentId: string, opts: { after: number | null; limit: number; kind?: string }): Promise<EventRow[]> {
    const q = db<EventRow>('environment_events').where({ environment_id: environmentId }).orderBy('id', 'asc').limit(opts.limit);
    if (opts.after != null) q.where('id', '>', opts.after);
    if (opts.kind !== undefined) q.where({ kind: opts.kind });
    return q;
  },
};
