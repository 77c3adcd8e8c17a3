import type { Db, Tx } from '../store/db.js';
import { fromJson, isUniqueViolation, toJson, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { TemplatesService } from './templates.service.js';
import { environmentsStore, liveKey, type EnvironmentRow, type DesiredState } from './environments.store.js';
import { eventsStore, toEvent, type EnvironmentEvent, type EventSource } from './events.store.js';
import { insertSecrets } from './secrets.service.js';
import { idleView } from './idle.service.js';
import { secretsStore } from './secrets.store.js';
import {
  AGENT_SETTINGS_DEFAULTS, IDLE_DEFAULTS, RESOURCE_DEFAULTS, normalizeFiles,
  type AgentSettings, type FileInput, type SecretInput, type StoredFile,
} from './rules.js';

export interface CreateEnvironmentInput {
  end_user_id: string;
  agent_version?: string | null;
  resources?: Partial<Record<'cpus' | 'memory_mib' | 'base_memory_mib' | 'disk_gib', number>>;
  idle?: Partial<Record<'suspend_after_secs' | 'stop_after_secs', number>>;
  env?: Record<string, string>;
  files?: Record<string, string | FileInput>;
  secrets?: Record<string, SecretInput>;
  egress_allow?: string[];
  template?: string | null;
}

export interface Environment {
  id: string;
  end_user_id: string;
  agent_version: string | null;
  desired_state: DesiredState;
  state: string;
  last_active_at: string | null;
  idle: {
    suspend_after_secs: number;
    stop_after_secs: number;
    keep_awake_until: string | null;
    /** Beyond the spec (issue 13): the ladder's next step and when it is due. */
    next_step: 'suspend' | 'stop' | null;
    next_step_at: string | null;
  };
  resources: { cpus: number; memory_mib: number; base_memory_mib: number; disk_gib: number };
  template: string | null;
  host_id: string | null;
  failure_reason: string | null;
  limit_exceeded: boolean;
  created_at: string | null;
  updated_at: string | null;
}

export interface Configuration {
  env: Record<string, string>;
  files: Record<string, StoredFile>;
}

export function toEnvironment(r: EnvironmentRow): Environment {
  return {
    id: r.id,
    end_user_id: r.end_user_id,
    agent_version: r.agent_version,
    desired_state: r.desired_state,
    state: r.state,
    last_active_at: iso(r.last_active_at),
    idle: {
      suspend_after_secs: Number(r.suspend_after_secs),
      stop_after_secs: Number(r.stop_after_secs),
      keep_awake_until: iso(r.keep_awake_until),
      ...idleView(r),
    },
    resources: { cpus: Number(r.cpus), memory_mib: Number(r.memory_mib), base_memory_mib: Number(r.base_memory_mib), disk_gib: Number(r.disk_gib) },
    template: r.template,
    host_id: r.host_id,
    failure_reason: r.failure_reason,
    limit_exceeded: Boolean(r.limit_exceeded),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

export function agentSettingsOf(r: EnvironmentRow): AgentSettings {
  return { ...AGENT_SETTINGS_DEFAULTS, ...(fromJson<Partial<AgentSettings>>(r.agent_settings) ?? {}) };
}

export interface CreateResult {
  /** 201 for a new environment, 200 for an Idempotency-Key retry. */
  status: 201 | 200;
  environment: Environment;
}

export interface EnvironmentsDeps {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  templates: TemplatesService;
  log: Logger;
  defaultAgentVersion: (developerId: string) => Promise<string | null>;
  /** Called after a destroy commits: caches holding the environment's credentials drop them. */
  onDestroyed?: (environmentId: string) => void;
  /** In the settings' transaction when scheduling is turned off: the agent's keep-awakes end. */
  onSchedulingOff?: (trx: Tx, environmentId: string) => Promise<void>;
  /** Called after a commit that changes what a host should do (create, desired state, config): the local host acts at once. */
  onChange?: (environmentId: string) => void;
}

export function createEnvironmentsService(deps: EnvironmentsDeps) {
  const { db, clock, keyring, templates } = deps;

  async function event(trx: Tx, env: { id: string; developer_id: string }, kind: string, source: EventSource, data: Record<string, unknown> = {}): Promise<void> {
    await eventsStore.append(trx, { environment_id: env.id, developer_id: env.developer_id, kind, source, data, created_at: clock.nowMs() });
  }

  /** What an Idempotency-Key is bound to answers a retry: the original, or 409 for another end user. */
  async function replayIdempotent(developerId: string, key: string, endUserId: string): Promise<CreateResult | null> {
    const bound = await environmentsStore.idempotencyKey(db, developerId, key);
    if (!bound) return null;
    if (bound.end_user_id !== endUserId) {
      throw new ServiceError('idempotency_key_reused', 'this Idempotency-Key was used to create an environment for another end user', { environment_id: bound.environment_id });
    }
    const row = await environmentsStore.get(db, developerId, bound.environment_id);
    if (!row) return null;
    return { status: 200, environment: toEnvironment(row) };
  }

  async function create(developerId: string, input: CreateEnvironmentInput, idempotencyKey?: string): Promise<CreateResult> {
    if (idempotencyKey) {
      const replay = await replayIdempotent(developerId, idempotencyKey, input.end_user_id);
      if (replay) return replay;
    }
    const agentVersion = input.agent_version !== undefined ? input.agent_version : await deps.defaultAgentVersion(developerId);
    const memory = input.resources?.memory_mib ?? RESOURCE_DEFAULTS.memory_mib;
    try {
      const row = await withTx(db, async (trx) => {
        if (input.template) await templates.requireReady(trx, developerId, input.template);
        const now = clock.nowMs();
        const row: EnvironmentRow = {
          id: newId('env'),
          developer_id: developerId,
          end_user_id: input.end_user_id,
          live_end_user_id: liveKey(input.end_user_id),
          agent_version: agentVersion ?? null,
          desired_state: 'running',
          state: 'pending',
          template: input.template ?? null,
          host_id: null,
          failure_reason: null,
          limit_exceeded: false,
          cpus: input.resources?.cpus ?? RESOURCE_DEFAULTS.cpus,
          memory_mib: memory,
          // A 512 MiB ceiling cannot hold the 1024 MiB default base: the default shrinks to fit.
          base_memory_mib: input.resources?.base_memory_mib ?? Math.min(RESOURCE_DEFAULTS.base_memory_mib, memory),
          disk_gib: input.resources?.disk_gib ?? RESOURCE_DEFAULTS.disk_gib,
          suspend_after_secs: input.idle?.suspend_after_secs ?? IDLE_DEFAULTS.suspend_after_secs,
          stop_after_secs: input.idle?.stop_after_secs ?? IDLE_DEFAULTS.stop_after_secs,
          keep_awake_until: null,
          last_active_at: now,
          egress_allow: input.egress_allow ? toJson(input.egress_allow.map((h) => h.toLowerCase())) : null,
          agent_settings: toJson({}),
          created_at: now,
          updated_at: now,
          destroyed_at: null,
        };
        await environmentsStore.insert(trx, row);
        if (idempotencyKey) {
          await environmentsStore.insertIdempotencyKey(trx, { developer_id: developerId, idem_key: idempotencyKey, environment_id: row.id, end_user_id: input.end_user_id, created_at: now });
        }
        if (input.env || input.files) {
          await environmentsStore.putConfig(trx, { environment_id: row.id, env: toJson(input.env ?? {}), files: toJson(normalizeFiles(input.files ?? {})), updated_at: now });
        }
        if (input.secrets) {
          await insertSecrets(trx, keyring, now, { developerId, environmentId: row.id, scope: row.id }, input.secrets);
        }
        await event(trx, row, 'created', 'api', { end_user_id: row.end_user_id, agent_version: row.agent_version, template: row.template });
        return row;
      });
      deps.onChange?.(row.id);
      return { status: 201, environment: toEnvironment(row) };
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Lost a race: to the same Idempotency-Key (answer as a retry) or to another create
      // for this end user (the database's unique index decided).
      if (idempotencyKey) {
        const replay = await replayIdempotent(developerId, idempotencyKey, input.end_user_id);
        if (replay) return replay;
      }
      const live = await environmentsStore.liveForEndUser(db, developerId, input.end_user_id);
      if (live) {
        throw new ServiceError('environment_exists', 'this end user already has an environment that is not destroyed', { environment_id: live.id });
      }
      throw err;
    }
  }

  async function get(developerId: string, id: string): Promise<Environment> {
    const row = await environmentsStore.get(db, developerId, id);
    if (!row) throw notFound();
    return toEnvironment(row);
  }

  async function getRow(developerId: string, id: string): Promise<EnvironmentRow> {
    const row = await environmentsStore.get(db, developerId, id);
    if (!row) throw notFound();
    return row;
  }

  async function list(developerId: string, opts: { state?: string; limit: number; after: string | null }): Promise<Environment[]> {
    return (await environmentsStore.list(db, developerId, opts)).map(toEnvironment);
  }

  /** Runs a state move on the locked row; `move` returns the patch and events, or null for "unchanged". */
  async function transition(
    developerId: string,
    id: string,
    move: (row: EnvironmentRow, now: number) => { patch: Partial<EnvironmentRow>; events: Array<[string, Record<string, unknown>?]> } | null,
    after?: (trx: Tx, row: EnvironmentRow) => Promise<void>,
  ): Promise<Environment> {
    let changed = false;
    const row = await withTx(db, async (trx) => {
      const row = await environmentsStore.getForUpdate(trx, developerId, id);
      if (!row) throw notFound();
      const now = clock.nowMs();
      const out = move(row, now);
      if (!out) return row;
      const next = { ...row, ...out.patch, updated_at: now };
      await environmentsStore.update(trx, id, { ...out.patch, updated_at: now });
      for (const [kind, data] of out.events) await event(trx, row, kind, 'api', data ?? {});
      if (after) await after(trx, next);
      changed = true;
      return next;
    });
    if (changed) deps.onChange?.(id);
    return toEnvironment(row);
  }

  // Only environment_exists and idempotency_key_reused carry environment_id (service.md,
  // Errors); every other error body is exactly {error, message}.
  function refuseDestroyed(row: EnvironmentRow, code: 'invalid_state_transition' | 'environment_destroyed' = 'invalid_state_transition'): void {
    if (row.desired_state === 'destroyed') {
      throw new ServiceError(code, 'the environment is destroyed');
    }
  }

  function refuseLimit(row: EnvironmentRow): void {
    if (row.limit_exceeded) throw new ServiceError('limit_exceeded', 'a usage limit suspended this environment');
  }

  const suspend = (developerId: string, id: string) =>
    transition(developerId, id, (row) => {
      if (row.desired_state === 'suspended') return null;
      if (row.desired_state !== 'running') {
        throw new ServiceError('invalid_state_transition', `cannot suspend an environment whose desired state is ${row.desired_state}`);
      }
      return { patch: { desired_state: 'suspended' }, events: [['desired_suspended']] };
    });

  const resume = (developerId: string, id: string) =>
    transition(developerId, id, (row) => {
      refuseDestroyed(row);
      refuseLimit(row);
      if (row.desired_state === 'running') return null;
      // Not counted as activity (service.md): last_active_at stays.
      return { patch: { desired_state: 'running' }, events: [['desired_running', { from: row.desired_state }]] };
    });

  const wake = (developerId: string, id: string) =>
    transition(developerId, id, (row, now) => {
      refuseDestroyed(row);
      refuseLimit(row);
      const patch: Partial<EnvironmentRow> = { last_active_at: now };
      if (row.desired_state !== 'running') patch.desired_state = 'running';
      return { patch, events: [['wake', { from: row.desired_state }]] };
    });

  const keepAwake = (developerId: string, id: string, seconds: number) =>
    transition(developerId, id, (row, now) => {
      refuseDestroyed(row);
      refuseLimit(row);
      const until = Math.max(Number(row.keep_awake_until ?? 0), now + seconds * 1000);
      const patch: Partial<EnvironmentRow> = { last_active_at: now, keep_awake_until: until };
      if (row.desired_state !== 'running') patch.desired_state = 'running';
      return { patch, events: [['keep_awake', { seconds, until: iso(until) }]] };
    }, async (trx, row) => {
      // Recorded per grant (environments/agent.service.ts): an agent hold that ends falls
      // back to this one. The move's own time, so both record the same instant.
      const now = Number(row.updated_at);
      await trx('keep_awakes').insert({ id: newId('kaw'), environment_id: row.id, developer_id: row.developer_id, source: 'api', seconds, granted_at: now, until: now + seconds * 1000, pid: null, pid_start: null, released_at: null, release_reason: null });
    });

  const updateIdle = (developerId: string, id: string, idle: Partial<Record<'suspend_after_secs' | 'stop_after_secs', number>>) =>
    transition(developerId, id, (row) => {
      refuseDestroyed(row, 'environment_destroyed');
      const patch: Partial<EnvironmentRow> = {};
      if (idle.suspend_after_secs !== undefined) patch.suspend_after_secs = idle.suspend_after_secs;
      if (idle.stop_after_secs !== undefined) patch.stop_after_secs = idle.stop_after_secs;
      if (Object.keys(patch).length === 0) return null;
      return { patch, events: [['idle_updated', { ...idle }]] };
    });

  /**
   * Resources of an existing environment (issue 24, item 4: "resize on a resources update";
   * docs/api.md). Only fields sent change; an empty update reads the current values. The disk
   * only grows (a filesystem is not shrunk under its data). The host applies the change to a
   * VM that exists: the process sandbox's cgroup limits at once and its disk as soon as it
   * can (docs/environments.md); placement is not redone (an update never moves a VM).
   */
  const updateResources = (developerId: string, id: string, r: Partial<Record<'cpus' | 'memory_mib' | 'base_memory_mib' | 'disk_gib', number>>) =>
    transition(developerId, id, (row) => {
      refuseDestroyed(row, 'environment_destroyed');
      const memory = r.memory_mib ?? Number(row.memory_mib);
      const base = r.base_memory_mib ?? Number(row.base_memory_mib);
      if (base > memory) throw new ServiceError('invalid_request', `base_memory_mib must be at most memory_mib (${memory})`);
      if (r.disk_gib !== undefined && r.disk_gib < Number(row.disk_gib)) {
        throw new ServiceError('invalid_request', `disk_gib can only grow (it is ${row.disk_gib}): a filesystem is not shrunk under its data`);
      }
      const patch: Partial<EnvironmentRow> = {};
      const changed: Record<string, number> = {};
      for (const k of ['cpus', 'memory_mib', 'base_memory_mib', 'disk_gib'] as const) {
        if (r[k] !== undefined && r[k] !== Number(row[k])) {
          patch[k] = r[k];
          changed[k] = r[k]!;
        }
      }
      if (Object.keys(patch).length === 0) return null;
      return { patch, events: [['resources_updated', changed]] };
    });

  /**
   * Destroy is idempotent. The host deletes the VM, data disk and backups; an environment
   * that was never placed on a host has nothing to delete, so it is destroyed at once.
   * Idempotency keys are released, pending wakeups cancelled, and the environment's
   * secrets and configuration erased; events stay readable.
   */
  const destroy = async (developerId: string, id: string): Promise<Environment> => {
    const env = await destroyTx(developerId, id);
    deps.onDestroyed?.(id);
    return env;
  };

  const destroyTx = (developerId: string, id: string) =>
    transition(
      developerId,
      id,
      (row, now) => {
        if (row.desired_state === 'destroyed') return null;
        const patch: Partial<EnvironmentRow> = { desired_state: 'destroyed', live_end_user_id: null, destroyed_at: now, keep_awake_until: null };
        const events: Array<[string, Record<string, unknown>?]> = [['desired_destroyed']];
        if (!row.host_id) {
          patch.state = 'destroyed';
          events.push(['destroyed', { reason: 'never placed on a host' }]);
        }
        return { patch, events };
      },
      async (trx, row) => {
        if (row.desired_state !== 'destroyed') return;
        await environmentsStore.deleteIdempotencyKeys(trx, row.id);
        await trx('wakeups').where({ environment_id: row.id, status: 'pending' }).update({ status: 'cancelled', cancelled_at: clock.nowMs() });
        await trx('schedules').where({ environment_id: row.id }).delete();
        await secretsStore.deleteScope(trx, developerId, row.id);
        await environmentsStore.deleteConfig(trx, row.id);
      },
    );

  async function getConfig(developerId: string, id: string): Promise<Configuration> {
    await getRow(developerId, id);
    const c = await environmentsStore.config(db, id);
    return { env: fromJson(c?.env) ?? {}, files: fromJson(c?.files) ?? {} };
  }

  /** Replaces env and files as a whole (`{}` clears); does not wake the environment. */
  async function putConfig(developerId: string, id: string, input: { env?: Record<string, string>; files?: Record<string, string | FileInput> }): Promise<Configuration> {
    const config: Configuration = { env: input.env ?? {}, files: normalizeFiles(input.files ?? {}) };
    await withTx(db, async (trx) => {
      const row = await environmentsStore.getForUpdate(trx, developerId, id);
      if (!row) throw notFound();
      refuseDestroyed(row, 'environment_destroyed');
      const now = clock.nowMs();
      await environmentsStore.putConfig(trx, { environment_id: id, env: toJson(config.env), files: toJson(config.files), updated_at: now });
      await event(trx, row, 'config_updated', 'api', { env: Object.keys(config.env), files: Object.keys(config.files) });
    });
    deps.onChange?.(id);
    return config;
  }

  async function listEvents(developerId: string, id: string, opts: { after: number | null; limit: number; kind?: string }): Promise<{ data: EnvironmentEvent[]; next: number | null }> {
    await getRow(developerId, id);
    const rows = await eventsStore.list(db, id, opts);
    const data = rows.map(toEvent);
    return { data, next: data.length === opts.limit ? data[data.length - 1]!.id : null };
  }

  async function getAgentSettings(developerId: string, id: string): Promise<AgentSettings> {
    return agentSettingsOf(await getRow(developerId, id));
  }

  /** Only fields sent change; an empty update reads the current values. */
  async function updateAgentSettings(developerId: string, id: string, patch: Partial<AgentSettings>): Promise<AgentSettings> {
    if (Object.keys(patch).length === 0) return getAgentSettings(developerId, id);
    let settings!: AgentSettings;
    await transition(developerId, id, (row) => {
      refuseDestroyed(row, 'environment_destroyed');
      settings = { ...agentSettingsOf(row), ...patch };
      return { patch: { agent_settings: toJson(settings) }, events: [['agent_settings_updated', { ...patch }]] };
    }, async (trx, row) => {
      // scheduling: false ends a keep-awake the agent holds (service.md, Agent settings).
      if (patch.scheduling === false) await deps.onSchedulingOff?.(trx, row.id);
    });
    return settings;
  }

  return {
    create, get, getRow, list, suspend, resume, wake, keepAwake, updateIdle, updateResources, destroy,
    getConfig, putConfig, listEvents, getAgentSettings, updateAgentSettings,
  };
}

export type EnvironmentsService = ReturnType<typeof createEnvironmentsService>;
