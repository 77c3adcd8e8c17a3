import type { Db, Tx, Queryable } from '../store/db.js';
import { isMysql, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { ServiceError, notFound } from '../lib/errors.js';
import type { EnvironmentRow, ActualState } from './environments.store.js';
import { eventsStore } from './events.store.js';

/**
 * What hosts ask of environments (issue 12): which ones wait for a host, placing one on a
 * host inside the host's placement transaction, the environments a host runs, and the
 * state a host reports (with its event, source `host`). Also the activity an exec, file
 * or process call records, which wakes a suspended or stopped environment.
 *
 * The environments table stays this domain's: hosts/ calls these functions.
 */
export interface RuntimeStateDeps {
  db: Db;
  clock: Clock;
  /** Called after a commit that changes what a host should do with the environment. */
  onChange?: (environmentId: string) => void;
  /** In the report's transaction when the VM is gone (stopped, failed, destroyed): the agent's keep-awakes end with it. */
  onVmGone?: (trx: Tx, environmentId: string) => Promise<void>;
}

/** Environments whose desired state holds a host's capacity. */
const HOLDING = ['running', 'suspended'];

export function createRuntimeState(deps: RuntimeStateDeps) {
  const { db, clock } = deps;
  const table = (q: Queryable) => q<EnvironmentRow>('environments');

  /** Oldest first: environments that want to run and have no host. */
  function waitingForHost(limit: number): Promise<EnvironmentRow[]> {
    return table(db).whereNull('host_id').where({ state: 'pending', desired_state: 'running' }).orderBy('created_at', 'asc').limit(limit);
  }

  /** cpus and base memory held on a host (inside its placement transaction; outside one for metrics). */
  async function heldOn(trx: Queryable, hostId: string): Promise<{ cpus: number; memoryMib: number }> {
    const r = await table(trx)
      .where({ host_id: hostId })
      .whereIn('desired_state', HOLDING)
      .whereNotIn('state', ['failed', 'destroyed'])
      .sum({ cpus: 'cpus', mem: 'base_memory_mib' })
      .first();
    return { cpus: Number((r as { cpus?: number })?.cpus ?? 0), memoryMib: Number((r as { mem?: number })?.mem ?? 0) };
  }

  /** Sets host_id if nobody placed it meanwhile; true when this call placed it. */
  async function claim(trx: Tx, environmentId: string, hostId: string): Promise<EnvironmentRow | null> {
    const n = await table(trx).where({ id: environmentId, desired_state: 'running' }).whereNull('host_id').update({ host_id: hostId, updated_at: clock.nowMs() });
    if (n !== 1) return null;
    const row = (await table(trx).where({ id: environmentId }).first())!;
    await eventsStore.append(trx, { environment_id: row.id, developer_id: row.developer_id, kind: 'placed', source: 'host', data: { host_id: hostId }, created_at: clock.nowMs() });
    return row;
  }

  /** Every environment a host has (destroyed ones excluded once the host reported them). */
  function onHost(hostId: string): Promise<EnvironmentRow[]> {
    return table(db).where({ host_id: hostId }).whereNot({ state: 'destroyed' });
  }

  function byId(id: string): Promise<EnvironmentRow | undefined> {
    return table(db).where({ id }).first();
  }

  /**
   * A host's report: the new state, an event (kind, data, source `host`), and
   * failure_reason for `failed` (cleared by any other state). Nothing is written when
   * the state already holds and no event is asked for.
   */
  async function report(id: string, state: ActualState, kind: string | null, data: Record<string, unknown> = {}): Promise<void> {
    await withTx(db, async (trx) => {
      const q = table(trx).where({ id });
      const row = await (isMysql(trx) ? q.forUpdate() : q).first();
      if (!row) return;
      if (row.state === 'destroyed') return;
      const now = clock.nowMs();
      const patch: Partial<EnvironmentRow> = { updated_at: now };
      if (row.state !== state) patch.state = state;
      // The usage meter counts running time from here (environments/usage.service.ts).
      if (state === 'running' && row.state !== 'running') (patch as Record<string, unknown>).metered_at = now;
      patch.failure_reason = state === 'failed' ? String(data.reason ?? 'the VM could not be started') : null;
      if (!patch.state && !kind && row.failure_reason === patch.failure_reason) return;
      await table(trx).where({ id }).update(patch);
      if (kind) await eventsStore.append(trx, { environment_id: id, developer_id: row.developer_id, kind, source: 'host', data, created_at: now });
      if (patch.state && ['stopped', 'failed', 'destroyed'].includes(state)) await deps.onVmGone?.(trx, id);
    });
  }

  /**
   * An exec, file or process call: counted as activity (last_active_at), and it wakes a
   * suspended or stopped environment (desired `running`, event `wake`). Refused on a
   * destroyed (409 environment_destroyed), failed (409 environment_failed) or usage-limited
   * (409 limit_exceeded) environment.
   */
  async function activity(developerId: string, id: string, call: string): Promise<EnvironmentRow> {
    let woke = false;
    const row = await withTx(db, async (trx) => {
      const q = table(trx).where({ developer_id: developerId, id });
      const row = await (isMysql(trx) ? q.forUpdate() : q).first();
      if (!row) throw notFound();
      if (row.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
      if (row.state === 'failed') throw new ServiceError('environment_failed', `the environment failed: ${row.failure_reason ?? 'its VM could not be started'}`);
      if (row.limit_exceeded) throw new ServiceError('limit_exceeded', 'a usage limit suspended this environment');
      const now = clock.nowMs();
      const patch: Partial<EnvironmentRow> = { last_active_at: now, updated_at: now };
      if (row.desired_state !== 'running') {
        patch.desired_state = 'running';
        woke = true;
        await eventsStore.append(trx, { environment_id: id, developer_id: developerId, kind: 'wake', source: 'api', data: { from: row.desired_state, reason: call }, created_at: now });
      }
      await table(trx).where({ id }).update(patch);
      return { ...row, ...patch };
    });
    if (woke) deps.onChange?.(id);
    return row;
  }

  /**
   * The VM used CPU (the host measured it): activity, without an event. Only a running
   * environment that should run; a suspended one uses none.
   */
  async function cpuActive(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const now = clock.nowMs();
    await table(db).whereIn('id', ids).where({ state: 'running', desired_state: 'running' }).update({ last_active_at: now });
  }

  return { waitingForHost, heldOn, claim, onHost, byId, report, activity, cpuActive };
}

export type RuntimeState = ReturnType<typeof createRuntimeState>;
