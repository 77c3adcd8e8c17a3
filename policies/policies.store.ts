import type { Queryable } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';

/** '*' is the developer default; otherwise the environment id (as secrets.scope). */
export const DEVELOPER_SCOPE = '*';

export interface PolicyRow {
  developer_id: string;
  scope: string;
  /** JSON array of validated rules (policy-engine validateRules output). */
  rules: string;
  created_at: number;
  updated_at: number;
}

export const policiesStore = {
  get(db: Queryable, developerId: string, scope: string): Promise<PolicyRow | undefined> {
    return db<PolicyRow>('policies').where({ developer_id: developerId, scope }).first();
  },

  /** The environment's row and the developer default, in one round trip (either may be missing). */
  effectiveRows(db: Queryable, developerId: string, environmentId: string): Promise<PolicyRow[]> {
    return db<PolicyRow>('policies').where({ developer_id: developerId }).whereIn('scope', [environmentId, DEVELOPER_SCOPE]);
  },

  /** Replaces the policy of one scope as a whole (insert or update; a concurrent first PUT is an update). */
  async put(db: Queryable, developerId: string, scope: string, rules: string, now: number): Promise<void> {
    const n = await db('policies').where({ developer_id: developerId, scope }).update({ rules, updated_at: now });
    if (n > 0) return;
    try {
      await db('policies').insert({ developer_id: developerId, scope, rules, created_at: now, updated_at: now });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await db('policies').where({ developer_id: developerId, scope }).update({ rules, updated_at: now });
    }
  },

  async delete(db: Queryable, developerId: string, scope: string): Promise<number> {
    return db('policies').where({ developer_id: developerId, scope }).delete();
  },
};
