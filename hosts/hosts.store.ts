import type { Queryable } from '../store/db.js';
import { isMysql } from '../store/db.js';

export interface HostRow {
  id: string;
  name: string;
  driver: string;
  cpus: number;
  memory_mib: number;
  capabilities: string;
  status: 'online' | 'offline';
  started_at: number;
  last_heartbeat_at: number;
  created_at: number;
  /** Where it serves exec and files for other processes (hosts/rpc.ts); null: nowhere. */
  endpoint: string | null;
  /** Placement puts nothing new here (migration 0030; 0/1 as the drivers read it). Never written by the host itself. */
  draining?: boolean | number;
}

/** The draining flag as stored (a boolean column reads 0/1 on MySQL and SQLite). */
export function isDraining(row: Pick<HostRow, 'draining'>): boolean {
  return Boolean(Number(row.draining ?? 0));
}

export const hostsStore = {
  get(db: Queryable, id: string): Promise<HostRow | undefined> {
    return db<HostRow>('hosts').where({ id }).first();
  },
  /** The row, locked until the transaction ends (MySQL; SQLite has one writer): placement's lock. */
  getForUpdate(db: Queryable, id: string): Promise<HostRow | undefined> {
    const q = db<HostRow>('hosts').where({ id });
    return (isMysql(db) ? q.forUpdate() : q).first();
  },
  async upsert(db: Queryable, row: HostRow): Promise<void> {
    const { id, created_at: _created, ...rest } = row;
    const n = await db('hosts').where({ id }).update(rest);
    if (n === 0) await db('hosts').insert(row);
  },
  async heartbeat(db: Queryable, id: string, now: number): Promise<void> {
    await db('hosts').where({ id }).update({ last_heartbeat_at: now, status: 'online' });
  },
  async markOffline(db: Queryable, id: string): Promise<void> {
    await db('hosts').where({ id }).update({ status: 'offline' });
  },
  /** Hosts whose last heartbeat is older than `before`: marked offline; their ids returned. */
  async sweepOffline(db: Queryable, before: number): Promise<string[]> {
    const stale = await db<HostRow>('hosts').where({ status: 'online' }).where('last_heartbeat_at', '<', before).select('id');
    if (stale.length === 0) return [];
    const ids = stale.map((r) => r.id);
    await db('hosts').whereIn('id', ids).where('last_heartbeat_at', '<', before).update({ status: 'offline' });
    return ids;
  },
  list(db: Queryable): Promise<HostRow[]> {
    return db<HostRow>('hosts').orderBy('created_at', 'asc');
  },
  /** Sets or clears draining; false when there is no such host. */
  async setDraining(db: Queryable, id: string, draining: boolean): Promise<boolean> {
    return (await db('hosts').where({ id }).update({ draining })) > 0;
  },
};
