import { createHash } from 'node:crypto';
import type { Db } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { applyKeysetAfter } from '../store/keyset.js';

/**
 * Browser profiles (service.md, Browser profile; issue 14, item 1): one per end user and
 * name; `version` starts at 0 and grows by one per saved write lease. Deleted profiles are
 * not listed and their signed-in state is erased at once.
 */
export interface ProfileRow {
  id: string;
  developer_id: string;
  end_user_id: string;
  name: string;
  live_key: string | null;
  version: number;
  state_enc: string | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export interface Profile {
  id: string;
  end_user_id: string;
  name: string;
  version: number;
  created_at: string | null;
  updated_at: string | null;
}

export function toProfile(r: ProfileRow): Profile {
  return { id: r.id, end_user_id: r.end_user_id, name: r.name, version: Number(r.version), created_at: iso(r.created_at), updated_at: iso(r.updated_at) };
}

/** Unique per end user among live profiles, whatever the engine's collation (a hash, as environments' liveKey). */
function liveKey(endUserId: string, name: string): string {
  return createHash('sha256').update(endUserId, 'utf8').update('\u0000').update(name, 'utf8').digest('hex');
}

export function createProfilesService(deps: {
  db: Db;
  clock: Clock;
  /** Whether a pending, active or releasing lease uses the profile (leases arrive with the broker). */
  inUse?: (profileId: string) => Promise<boolean>;
}) {
  const { db, clock } = deps;
  const live = () => db<ProfileRow>('browser_profiles').whereNull('deleted_at');

  async function create(developerId: string, input: { end_user_id: string; name: string }): Promise<Profile> {
    const now = clock.nowMs();
    const row: ProfileRow = {
      id: newId('bpr'), developer_id: developerId, end_user_id: input.end_user_id, name: input.name,
      live_key: liveKey(input.end_user_id, input.name), version: 0, state_enc: null, created_at: now, updated_at: now, deleted_at: null,
    };
    try {
      await db('browser_profiles').insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceError('profile_exists', 'this end user already has a browser profile of that name');
      throw err;
    }
    return toProfile(row);
  }

  async function getRow(developerId: string, id: string): Promise<ProfileRow> {
    const r = await live().where({ developer_id: developerId, id }).first();
    if (!r) throw notFound();
    return r;
  }

  async function get(developerId: string, id: string): Promise<Profile> {
    return toProfile(await getRow(developerId, id));
  }

  async function list(developerId: string, opts: { endUserId?: string; limit: number; after: string | null }): Promise<Profile[]> {
    const q = live().where({ developer_id: developerId });
    if (opts.endUserId !== undefined) q.where({ end_user_id: opts.endUserId });
    await applyKeysetAfter(db, q, 'browser_profiles', 'created_at', opts.after, 'asc', { developer_id: developerId });
    return (await q.limit(opts.limit + 1)).map(toProfile);
  }

  /** 204; the signed-in state goes with it; 409 profile_in_use while a lease uses it; 404 once deleted. */
  async function remove(developerId: string, id: string): Promise<void> {
    await getRow(developerId, id);
    if (deps.inUse && (await deps.inUse(id))) throw new ServiceError('profile_in_use', 'a pending, active or releasing browser lease uses this profile');
    const now = clock.nowMs();
    const n = await db('browser_profiles').where({ developer_id: developerId, id }).whereNull('deleted_at')
      .update({ deleted_at: now, updated_at: now, live_key: null, state_enc: null });
    if (n === 0) throw notFound();
  }

  return { create, get, getRow, list, remove };
}

export type ProfilesService = ReturnType<typeof createProfilesService>;
