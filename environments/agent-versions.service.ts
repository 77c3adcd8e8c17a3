import type { Db } from '../store/db.js';
import { isMysql, isUniqueViolation, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import type { EnvironmentRow } from './environments.store.js';
import { eventsStore } from './events.store.js';

/**
 * Agent versions (issue 13, item 6; service.md, Versioning): the developer's default
 * version (what an environment gets when its create names none), an upgrade of one
 * environment, and a rollout to all of them that, once complete, makes the version the
 * default. Every upgrade is an `agent_upgrade` event `{from, to, rollout_id?}`. A VM picks
 * up its new version at its next boot (SERVICE_AGENT_VERSION inside).
 */
interface RolloutRow {
  id: string;
  developer_id: string;
  version: string;
  status: 'running' | 'completed';
  running_key: string | null;
  upgraded: number;
  created_at: number;
  completed_at: number | null;
}

export interface Rollout {
  id: string;
  version: string;
  status: 'running' | 'completed';
  upgraded: number;
  remaining: number;
  created_at: string | null;
  completed_at: string | null;
}

const BATCH = 200;

export function createAgentVersionsService(deps: {
  db: Db;
  clock: Clock;
  defaultVersion(developerId: string): Promise<string | null>;
  setDefaultVersion(developerId: string, version: string | null): Promise<void>;
}) {
  const { db, clock } = deps;

  const behind = (developerId: string, version: string) =>
    db<EnvironmentRow>('environments').where({ developer_id: developerId }).whereNot({ desired_state: 'destroyed' })
      .where((w) => w.whereNull('agent_version').orWhereNot({ agent_version: version }));

  async function view(r: RolloutRow): Promise<Rollout> {
    const remaining = r.status === 'completed' ? 0 : Number((await behind(r.developer_id, r.version).count({ n: '*' }).first())?.n ?? 0);
    return { id: r.id, version: r.version, status: r.status, upgraded: Number(r.upgraded), remaining, created_at: iso(r.created_at), completed_at: iso(r.completed_at) };
  }

  /** One environment to `version` (unchanged when it is there already). */
  async function upgrade(developerId: string, environmentId: string, version: string): Promise<void> {
    await withTx(db, async (trx) => {
      const q = trx<EnvironmentRow>('environments').where({ developer_id: developerId, id: environmentId });
      const env = await (isMysql(trx) ? q.forUpdate() : q).first();
      if (!env) throw notFound();
      if (env.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
      if (env.agent_version === version) return;
      const now = clock.nowMs();
      await trx('environments').where({ id: env.id }).update({ agent_version: version, updated_at: now });
      await eventsStore.append(trx, { environment_id: env.id, developer_id: developerId, kind: 'agent_upgrade', source: 'api', data: { from: env.agent_version, to: version }, created_at: now });
    });
  }

  async function startRollout(developerId: string, version: string): Promise<Rollout> {
    const row: RolloutRow = { id: newId('rol'), developer_id: developerId, version, status: 'running', running_key: developerId, upgraded: 0, created_at: clock.nowMs(), completed_at: null };
    try {
      await db('agent_rollouts').insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceError('rollout_in_progress', 'a rollout is already running for this developer; wait for it to complete');
      throw err;
    }
    await advance(row.id);
    return getRollout(developerId, row.id);
  }

  async function getRollout(developerId: string, id: string): Promise<Rollout> {
    const r = await db<RolloutRow>('agent_rollouts').where({ developer_id: developerId, id }).first();
    if (!r) throw notFound();
    return view(r);
  }

  async function listRollouts(developerId: string): Promise<Rollout[]> {
    const rows = await db<RolloutRow>('agent_rollouts').where({ developer_id: developerId }).orderBy('created_at', 'desc').limit(50);
    return Promise.all(rows.map(view));
  }

  /** One batch of a running rollout; completes it (and sets the default) when nothing is left. */
  async function advance(id: string): Promise<void> {
    const r = await db<RolloutRow>('agent_rollouts').where({ id, status: 'running' }).first();
    if (!r) return;
    const batch = await behind(r.developer_id, r.version).orderBy('created_at').limit(BATCH);
    for (const env of batch) {
      await withTx(db, async (trx) => {
        const now = clock.nowMs();
        const n = await trx('environments').where({ id: env.id }).whereNot({ desired_state: 'destroyed' })
          .where((w) => w.whereNull('agent_version').orWhereNot({ agent_version: r.version }))
          .update({ agent_version: r.version, updated_at: now });
        if (n !== 1) return;
        await eventsStore.append(trx, { environment_id: env.id, developer_id: r.developer_id, kind: 'agent_upgrade', source: 'system', data: { from: env.agent_version, to: r.version, rollout_id: r.id }, created_at: now });
        await trx('agent_rollouts').where({ id: r.id }).increment('upgraded', 1);
      });
    }
    if (batch.length < BATCH) {
      const done = await db('agent_rollouts').where({ id: r.id, status: 'running' }).update({ status: 'completed', running_key: null, completed_at: clock.nowMs() });
      if (done) await deps.setDefaultVersion(r.developer_id, r.version);
    }
  }

  /** The job: every running rollout, one batch each. */
  async function advanceAll(): Promise<void> {
    for (const r of await db<RolloutRow>('agent_rollouts').where({ status: 'running' }).select('id')) await advance(r.id);
  }

  return {
    defaultVersion: deps.defaultVersion,
    setDefaultVersion: deps.setDefaultVersion,
    upgrade, startRollout, getRollout, listRollouts, advanceAll,
  };
}

export type AgentVersionsService = ReturnType<typeof createAgentVersionsService>;
