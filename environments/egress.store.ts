import type { Queryable } from '../store/db.js';
import { fromJson, toJson } from '../store/db.js';
import { accountsStore } from '../accounts/accounts.store.js';
import type { DesiredState } from './environments.store.js';

/** What the gateway needs of an environment row: looked up by id alone (the proxy knows no developer). */
export interface GatewayEnvironmentRow {
  id: string;
  developer_id: string;
  desired_state: DesiredState;
  egress_allow: string | null;
  /** `deny` or `ask` (migration 0033); anything else reads as `deny` (parseUnknownHosts). */
  egress_unknown_hosts: string;
}

/** What the gateway does with a host off the allowlist (issue 26, item 3). */
export type UnknownHosts = 'deny' | 'ask';

/**
 * The egress allowlists: `environments.egress_allow` (this domain) and the developer
 * default in `developers.egress_allow` (a column of accounts/' table, created for this in
 * 0001; read and written through accounts/' own store functions).
 * JSON array text, or NULL for "not set".
 */
export const egressStore = {
  environment(db: Queryable, environmentId: string): Promise<GatewayEnvironmentRow | undefined> {
    return db<GatewayEnvironmentRow>('environments')
      .select('id', 'developer_id', 'desired_state', 'egress_allow', 'egress_unknown_hosts')
      .where({ id: environmentId })
      .first();
  },
  async setEnvironment(db: Queryable, environmentId: string, allow: string[] | null, at: number): Promise<void> {
    await db('environments').where({ id: environmentId }).update({ egress_allow: allow === null ? null : toJson(allow), updated_at: at });
  },
  async setUnknownHosts(db: Queryable, environmentId: string, mode: UnknownHosts, at: number): Promise<void> {
    await db('environments').where({ id: environmentId }).update({ egress_unknown_hosts: mode, updated_at: at });
  },
  async developer(db: Queryable, developerId: string): Promise<string[] | null> {
    const row = await accountsStore.getDeveloper(db, developerId);
    return parseAllow(row?.egress_allow ?? null);
  },
  async setDeveloper(db: Queryable, developerId: string, allow: string[] | null): Promise<void> {
    await accountsStore.updateDeveloper(db, developerId, { egress_allow: allow === null ? null : toJson(allow) });
  },
};

export function parseAllow(column: string | null): string[] | null {
  const v = fromJson<unknown>(column);
  return Array.isArray(v) ? (v as string[]) : null;
}

/** Fail closed: only the exact word `ask` asks. */
export function parseUnknownHosts(column: string | null | undefined): UnknownHosts {
  return column === 'ask' ? 'ask' : 'deny';
}
