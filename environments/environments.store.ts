import { createHash } from 'node:crypto';
import type { Queryable } from '../store/db.js';
import { isMysql } from '../store/db.js';
import { applyKeysetAfter } from '../store/keyset.js';

export type DesiredState = 'running' | 'suspended' | 'stopped' | 'destroyed';
export type ActualState = 'pending' | 'running' | 'suspended' | 'stopped' | 'destroyed' | 'failed';

export interface EnvironmentRow {
  id: string;
  developer_id: string;
  end_user_id: string;
  /** liveKey(end_user_id) while not destroyed, NULL after (see liveKey). */
  live_end_user_id: string | null;
  agent_version: string | null;
  desired_state: DesiredState;
  state: ActualState;
  template: string | null;
  host_id: string | null;
  failure_reason: string | null;
  limit_exceeded: boolean | number;
  cpus: number;
  memory_mib: number;
  base_memory_mib: number;
  disk_gib: number;
  suspend_after_secs: number;
  stop_after_secs: number;
  keep_awake_until: number | null;
  last_active_at: number;
  egress_allow: string | null;
  agent_settings: string;
  created_at: number;
  updated_at: number;
  destroyed_at: number | null;
}

export interface IdempotencyRow {
  developer_id: string;
  idem_key: string;
  environment_id: string;
  end_user_id: string;
  created_at: number;
}

export interface ConfigRow {
  environment_id: string;
  env: string;
  files: string;
  updated_at: number;
}

/**
 * What `live_end_user_id` holds while an environment is not destroyed: the SHA-256 hex of
 * the end user id, not the id itself. MySQL/MariaDB compare VARCHARs with PAD SPACE, so
 * the unique index saw `bob` and `bob ` as one end user (a 409 naming the other user's
 * environment); a hash keeps every distinct id distinct on both engines, and fits the
 * 200-character column whatever the id's length.
 */
export function liveKey(endUserId: string): string {
  return createHash('sha256').update(endUserId, 'utf8').digest('hex');
}

export const environmentsStore = {
  get(db: Queryable, developerId: string, id: string): Promise<EnvironmentRow | undefined> {
    return db<EnvironmentRow>('environments').where({ developer_id: developerId, id }).first();
  },
  /** The row, locked for the rest of the transaction on MySQL (SQLite has one writer). */
  getForUpdate(db: Queryable, developerId: string, id: string): Promise<EnvironmentRow | undefined> {
    const q = db<EnvironmentRow>('environments').where({ developer_id: developerId, id });
    return (isMysql(db) ? q.forUpdate() : q).first();
  },
  liveForEndUser(db: Queryable, developerId: string, endUserId: string): Promise<EnvironmentRow | undefined> {
    return db<EnvironmentRow>('environments').where({ developer_id: developerId, live_end_user_id: liveKey(endUserId) }).first();
  },
  async insert(db: Queryable, row: EnvironmentRow): Promise<void> {
    await db('environments').insert(row);
  },
  async update(db: Queryable, id: string, patch: Partial<EnvironmentRow>): Promise<void> {
    await db('environments').where({ id }).update(patch);
  },
  async list(db: Queryable, developerId: string, opts: { state?: string; limit: number; after: string | null }): Promise<EnvironmentRow[]> {
    const q = db<EnvironmentRow>('environments').where({ developer_id: developerId });
    if (opts.state !== undefined) q.where('state', opts.state);
    await applyKeysetAfter(db, q, 'environments', 'created_at', opts.after, 'asc', { developer_id: developerId });
    return q.limit(opts.limit + 1);
  },

  /**
   * Environments by actual state, all developers, destroyed ones left out (they only grow):
   * gateway_environments (issue 25, item 2). Served by the (state, desired_state) index.
   */
  async countByState(db: Queryable): Promise<Record<string, number>> {
    const rows = await db('environments').whereNot('state', 'destroyed').select('state').count({ n: '*' }).groupBy('state');
    const out: Record<string, number> = {};
    for (const r of rows as Array<{ state: string; n: number | string }>) out[r.state] = Number(r.n);
    return out;
  },

  idempotencyKey(db: Queryable, developerId: string, key: string): Promise<IdempotencyRow | undefined> {
    return db<IdempotencyRow>('idempotency_keys').where({ developer_id: developerId, idem_key: key }).first();
  },
  async insertIdempotencyKey(db: Queryable, row: IdempotencyRow): Promise<void> {
    await db('idempotency_keys').insert(row);
  },
  async deleteIdempotencyKeys(db: Queryable, environmentId: string): Promise<void> {
    await db('idempotency_keys').where({ environment_id: environmentId }).delete();
  },

  config(db: Queryable, environmentId: string): Promise<ConfigRow | undefined> {
    return db<ConfigRow>('environment_configs').where({ environment_id: environmentId }).first();
  },
  async putConfig(db: Queryable, row: ConfigRow): Promise<void> {
    const n = await db('environment_configs').where({ environment_id: row.environment_id }).update({ env: row.env, files: row.files, updated_at: row.updated_at });
    if (n === 0) await db('environment_configs').insert(row);
  },
  async deleteConfig(db: Queryable, environmentId: string): Promise<void> {
    await db('environment_configs').where({ environment_id: environmentId }).delete();
  },
};
