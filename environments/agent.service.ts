import { Cron } from 'croner';
import type { Db, Queryable, Tx } from '../store/db.js';
import { fromJson, isMysql, toJson, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { parseRfc3339 } from './wakeups.service.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import { enqueueEvent } from '../webhooks/outbox.js';
import type { EnvironmentRow } from './environments.store.js';
import { eventsStore } from './events.store.js';
import { agentSettingsOf } from './environments.service.js';
import type { ScheduleRow } from './schedules.service.js';
import { cronTimes } from './cron-times.js';
import { unionCollision } from './schedule-union.js';

/**
 * What the agent may do from inside its VM, through /run/service/control.sock (service.md,
 * Agent control socket; issue 13, item 3): register, list and delete its own schedules, and
 * keep its VM awake. The environment is always the one the socket belongs to (the host
 * passes it in); nothing the agent sends names an environment.
 *
 * The developer's agent settings cap it: `scheduling`, `max_schedules`, `min_interval_secs`
 * (between any two upcoming runs of the agent's schedules, the whole set: schedule-union.ts),
 * `keep_awake_max_secs`,
 * `keep_awake_daily_secs` (granted seconds in any 24 hours). Every action and every refusal
 * is an environment event with source `agent` and an `environment.agent_*` webhook. The caps
 * never bind the developer's own API calls.
 */
export interface ControlAnswer {
  status: number;
  body: unknown;
}

export interface AgentPeer {
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22): a reused pid is another process. */
  start: string;
  /** The caller is not known to be a live process of the sandbox: why (the keep-awake is refused). */
  unidentified?: string;
}

export interface KeepAwakeRow {
  id: string;
  environment_id: string;
  developer_id: string;
  source: 'api' | 'agent';
  seconds: number;
  granted_at: number;
  until: number;
  pid: number | null;
  pid_start: string | null;
  released_at: number | null;
  release_reason: string | null;
}

const KEY = /^[A-Za-z0-9._:-]{1,200}$/;
const WEBHOOK_FIELDS = ['key', 'cron', 'tz', 'at', 'seconds', 'reason'] as const;
const DAY_MS = 86_400_000;
/** How many consecutive fire times min_interval_secs is checked over. */
const INTERVAL_SAMPLES = 60;

function agentSchedule(r: ScheduleRow): Record<string, unknown> {
  return { key: r.schedule_key, cron: r.cron, tz: r.tz, at: iso(r.at), source: r.source, command: fromJson(r.command), next_run_at: iso(r.next_run_at), created_at: iso(r.created_at) };
}

/** A 5-field cron in an IANA zone: the next fire time after `after`, or an error message. */
export function cronNext(expr: string, tz: string, after: number): { next: number | null; error?: string; cron?: Cron } {
  if (expr.trim().split(/\s+/).length !== 5) return { next: null, error: 'cron must be a 5-field expression (minute hour day month weekday)' };
  try {
    const cron = new Cron(expr, { timezone: tz, paused: true, mode: '5-part' } as never);
    const n = cron.nextRun(new Date(after));
    return { next: n ? n.getTime() : null, cron };
  } catch (err) {
    return { next: null, error: /timezone/i.test((err as Error).message) ? `tz "${tz}" is not an IANA time zone` : `cron "${expr}" is not a valid expression` };
  }
}

/** The shortest gap, in ms, between consecutive fire times of the expression (from `from`). */
export function shortestInterval(cron: Cron, from: number): number {
  const runs = cron.nextRuns(INTERVAL_SAMPLES, new Date(from)).map((d) => d.getTime());
  let min = Infinity;
  for (let i = 1; i < runs.length; i++) min = Math.min(min, runs[i]! - runs[i - 1]!);
  return min;
}

/** shortestInterval by cron-times.ts (croner's zone conversion costs ~0.5 ms a fire time: 30 ms a call). */
export function shortestGap(expr: string, tz: string, from: number): number {
  const times = cronTimes(expr, tz);
  let min = Infinity;
  let prev = times.next(from);
  for (let i = 1; i < INTERVAL_SAMPLES && prev !== null; i++) {
    const n = times.next(prev);
    if (n === null) break;
    min = Math.min(min, n - prev);
    prev = n;
  }
  return min;
}

export interface AgentServiceDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  /** After a commit that changes what the host should do (woken by a schedule, a keep-awake). */
  onChange?: (environmentId: string) => void;
  /** Runs a fired schedule's handler in the environment (exec as the agent); resolves with its exit code. */
  runHandler?: (env: { id: string; developer_id: string }, key: string, command: string[]) => Promise<number | null>;
}

export function createAgentService(deps: AgentServiceDeps) {
  const { db, clock, log } = deps;

  async function lockEnv(trx: Tx, id: string): Promise<EnvironmentRow | undefined> {
    const q = trx<EnvironmentRow>('environments').where({ id });
    return (isMysql(trx) ? q.forUpdate() : q).first();
  }

  async function record(trx: Queryable, env: { id: string; developer_id: string }, kind: string, source: 'agent' | 'system', data: Record<string, unknown>, webhook: string | null): Promise<void> {
    const now = clock.nowMs();
    await eventsStore.append(trx, { environment_id: env.id, developer_id: env.developer_id, kind, source, data, created_at: now });
    if (webhook) {
      // decisions.md: `{environment_id, key?, cron?, tz?, at?, seconds?, reason?}`, nothing else.
      const payload: Record<string, unknown> = { environment_id: env.id };
      for (const k of WEBHOOK_FIELDS) if (data[k] != null) payload[k] = data[k];
      await enqueueEvent(trx, { developerId: env.developer_id, type: webhook, environmentId: env.id, data: payload, createdAtMs: now });
    }
  }

  /** A refusal: the event and webhook, then the answer. */
  async function refuse(env: EnvironmentRow, status: number, code: string, message: string, data: Record<string, unknown> = {}): Promise<ControlAnswer> {
    await withTx(db, (trx) => record(trx, env, 'agent_request_rejected', 'agent', { ...data, reason: code }, 'environment.agent_request_rejected'));
    return { status, body: { error: code, message } };
  }

  async function envOf(id: string): Promise<EnvironmentRow | null> {
    const env = await db<EnvironmentRow>('environments').where({ id }).first();
    return env && env.desired_state !== 'destroyed' ? env : null;
  }

  const gone: ControlAnswer = { status: 410, body: { error: 'environment_destroyed', message: 'the environment is destroyed' } };

  async function listSchedules(environmentId: string): Promise<ControlAnswer> {
    const rows = await db<ScheduleRow>('schedules').where({ environment_id: environmentId, source: 'agent' }).orderBy('created_at', 'asc');
    return { status: 200, body: { data: rows.map(agentSchedule) } };
  }

  async function setSchedule(environmentId: string, key: string, body: unknown): Promise<ControlAnswer> {
    const env = await envOf(environmentId);
    if (!env) return gone;
    const settings = agentSettingsOf(env);
    if (!KEY.test(key)) return refuse(env, 400, 'invalid_request', 'the key is 1 to 200 of A-Z a-z 0-9 . _ : -', { key: key.slice(0, 200) });
    const b = body as Record<string, unknown> | null;
    const allowed = new Set(['cron', 'tz', 'at', 'command']);
    if (!b || typeof b !== 'object' || Array.isArray(b) || Object.keys(b).some((k) => !allowed.has(k))) {
      return refuse(env, 400, 'invalid_request', 'the body is {cron, tz, command?} or {at, command?}', { key });
    }
    const command = b.command;
    if (command !== undefined && (!Array.isArray(command) || command.length === 0 || command.length > 256 || command.some((c) => typeof c !== 'string' || c.length > 8192 || c.includes('\u0000')))) {
      return refuse(env, 400, 'invalid_request', 'command is an argv array of 1 to 256 strings', { key });
    }
    if (!settings.scheduling) return refuse(env, 403, 'scheduling_disabled', 'the developer turned scheduling off for this environment', { key });
    const now = clock.nowMs();
    let cron: string | null = null;
    let tz: string | null = null;
    let at: number | null = null;
    let next: number | null;
    if (typeof b.cron === 'string' && b.at === undefined) {
      cron = b.cron.trim();
      tz = b.tz === undefined ? 'UTC' : typeof b.tz === 'string' ? b.tz : '';
      const parsed = cronNext(cron, tz, now);
      if (parsed.error) return refuse(env, 400, 'invalid_request', parsed.error, { key, cron, tz });
      if (parsed.next === null) return refuse(env, 400, 'invalid_request', 'the expression never fires', { key, cron, tz });
      const gap = shortestGap(cron, tz, now);
      if (gap < settings.min_interval_secs * 1000) {
        return refuse(env, 400, 'interval_too_short', `fires every ${Math.round(gap / 1000)} s at the closest; min_interval_secs is ${settings.min_interval_secs}`, { key, cron, tz });
      }
      next = parsed.next;
    } else if (typeof b.at === 'string' && b.cron === undefined && b.tz === undefined) {
      at = parseRfc3339(b.at);
      if (at === null) return refuse(env, 400, 'invalid_request', 'at must be an RFC 3339 time with a zone', { key });
      if (at < now - 60_000 || at > now + 366 * DAY_MS) return refuse(env, 400, 'invalid_request', 'at must be from one minute ago to 366 days ahead', { key, at: iso(at) });
      next = at;
    } else {
      return refuse(env, 400, 'invalid_request', 'the body is {cron, tz, command?} or {at, command?}', { key });
    }
    const out = await withTx(db, async (trx) => {
      const locked = await lockEnv(trx, environmentId);
      if (!locked || locked.desired_state === 'destroyed') return gone;
      const existing = await trx<ScheduleRow>('schedules').where({ environment_id: environmentId, schedule_key: key }).first();
      if (existing && existing.source !== 'agent') return { status: 409, body: { error: 'schedule_not_agents', message: 'a schedule of that key was set by the developer' } };
      if (!existing) {
        const count = await trx('schedules').where({ environment_id: environmentId, source: 'agent' }).count({ n: '*' }).first();
        if (Number(count?.n ?? 0) >= settings.max_schedules) return null; // refused below, outside this transaction
      }
      // min_interval_secs between any two runs of the agent's schedules (the union), under the
      // environment's lock so two PUTs at once cannot each pass against the old set.
      const others = await trx<ScheduleRow>('schedules').where({ environment_id: environmentId, source: 'agent' }).whereNot({ schedule_key: key }).select('schedule_key', 'cron', 'tz', 'at');
      const hit = unionCollision(
        others.map((o) => ({ key: o.schedule_key, cron: o.cron, tz: o.tz, at: o.at == null ? null : Number(o.at) })),
        { key, cron, tz, at }, settings.min_interval_secs * 1000, now,
      );
      if (hit) return { collision: hit }; // refused below, outside this transaction
      const row = {
        environment_id: environmentId, developer_id: locked.developer_id, schedule_key: key, cron, tz, at, source: 'agent',
        next_run_at: next, command: command === undefined ? null : toJson(command), updated_at: now,
      };
      if (existing) await trx('schedules').where({ id: existing.id }).update(row);
      else await trx('schedules').insert({ ...row, id: newId('sch'), created_at: now, last_fired_at: null });
      await record(trx, locked, 'schedule_set', 'agent', { key, cron, tz, at: iso(at) }, 'environment.agent_schedule_set');
      const saved = (await trx<ScheduleRow>('schedules').where({ environment_id: environmentId, schedule_key: key }).first())!;
      return { status: existing ? 200 : 201, body: agentSchedule(saved) };
    });
    if (out === null) return refuse(env, 409, 'schedule_limit_reached', `at most ${settings.max_schedules} schedules (max_schedules)`, { key });
    if ('collision' in out) {
      const c = out.collision;
      const gap = Math.round(Math.abs(c.fire - c.other) / 1000);
      const what = c.key === key ? 'its own next run' : `schedule "${c.key}"`;
      return refuse(env, 400, 'interval_too_short', `it would run ${gap} s from ${what} (at ${iso(c.other)}); min_interval_secs (${settings.min_interval_secs}) holds between any two runs of the agent's schedules`, { key, cron, tz, at: iso(at), with: c.key });
    }
    return out;
  }

  async function deleteSchedule(environmentId: string, key: string): Promise<ControlAnswer> {
    const env = await envOf(environmentId);
    if (!env) return gone;
    return withTx(db, async (trx) => {
      const n = await trx('schedules').where({ environment_id: environmentId, schedule_key: key, source: 'agent' }).delete();
      if (n === 0) return { status: 404, body: { error: 'not_found', message: 'no such schedule' } };
      await record(trx, env, 'schedule_deleted', 'agent', { key }, 'environment.agent_schedule_deleted');
      return { status: 204, body: null };
    });
  }

  /** The latest hold of the environment's unreleased keep-awakes (null: none). */
  async function holdUntil(trx: Queryable, environmentId: string, now: number): Promise<number | null> {
    const r = await trx('keep_awakes').where({ environment_id: environmentId }).whereNull('released_at').where('until', '>', now).max({ m: 'until' }).first();
    return r?.m == null ? null : Number(r.m);
  }

  /** Records a developer's keep-awake (environments.service keepAwake), so agent releases keep it. */
  async function recordApiKeepAwake(trx: Queryable, env: { id: string; developer_id: string }, seconds: number, until: number): Promise<void> {
    await trx('keep_awakes').insert({ id: newId('kaw'), environment_id: env.id, developer_id: env.developer_id, source: 'api', seconds, granted_at: clock.nowMs(), until, pid: null, pid_start: null, released_at: null, release_reason: null });
  }

  /**
   * `peer`: the calling process (null where it cannot be known: a VM), or how to look it up:
   * the lookup spawns a helper on the host (hosts/peer.ts), so it runs only after the body,
   * the caps and the budget passed (issue 24, item 5: cheap to refuse).
   */
  async function keepAwake(environmentId: string, body: unknown, peer: AgentPeer | null | (() => Promise<AgentPeer | null>)): Promise<ControlAnswer> {
    const env = await envOf(environmentId);
    if (!env) return gone;
    const settings = agentSettingsOf(env);
    const seconds = (body as { seconds?: unknown } | null)?.seconds;
    if (!body || typeof body !== 'object' || Array.isArray(body) || Object.keys(body).some((k) => k !== 'seconds') || !Number.isInteger(seconds) || (seconds as number) < 1) {
      return refuse(env, 400, 'invalid_request', 'the body is {seconds} (a positive integer)');
    }
    const s = seconds as number;
    if (!settings.scheduling) return refuse(env, 403, 'scheduling_disabled', 'the developer turned scheduling (and keep-awake) off for this environment', { seconds: s });
    if (s > settings.keep_awake_max_secs) return refuse(env, 400, 'keep_awake_too_long', `at most ${settings.keep_awake_max_secs} seconds (keep_awake_max_secs)`, { seconds: s });
    const now = clock.nowMs();
    if (env.limit_exceeded) return { status: 409, body: { error: 'limit_exceeded', message: 'a usage limit suspended this environment' } };
    // The budget before the lookup (checked again under the lock below).
    const usedBefore = Number((await db('keep_awakes').where({ environment_id: environmentId, source: 'agent' }).where('granted_at', '>', now - DAY_MS).sum({ s: 'seconds' }).first())?.s ?? 0);
    if (usedBefore + s > settings.keep_awake_daily_secs) {
      return refuse(env, 429, 'keep_awake_budget_exhausted', `${usedBefore} of ${settings.keep_awake_daily_secs} seconds (keep_awake_daily_secs) were used in the last 24 hours`, { seconds: s });
    }
    const who = typeof peer === 'function' ? await peer() : peer;
    if (who?.unidentified) {
      return refuse(env, 409, 'caller_unknown', `the calling process could not be identified (${who.unidentified}); a keep-awake lasts while the process that asked lives`, { seconds: s, pid: who.pid || null, why: who.unidentified });
    }
    const out = await withTx(db, async (trx) => {
      const locked = await lockEnv(trx, environmentId);
      if (!locked || locked.desired_state === 'destroyed') return gone;
      if (locked.limit_exceeded) return { status: 409, body: { error: 'limit_exceeded', message: 'a usage limit suspended this environment' } };
      const used = await trx('keep_awakes').where({ environment_id: environmentId, source: 'agent' }).where('granted_at', '>', now - DAY_MS).sum({ s: 'seconds' }).first();
      const usedSecs = Number(used?.s ?? 0);
      if (usedSecs + s > settings.keep_awake_daily_secs) return usedSecs;
      const until = now + s * 1000;
      await trx('keep_awakes').insert({ id: newId('kaw'), environment_id: environmentId, developer_id: locked.developer_id, source: 'agent', seconds: s, granted_at: now, until, pid: who?.pid ?? null, pid_start: who?.start ?? null, released_at: null, release_reason: null });
      const hold = Math.max(Number(locked.keep_awake_until ?? 0), until);
      const patch: Partial<EnvironmentRow> = { keep_awake_until: hold, last_active_at: now, updated_at: now };
      if (locked.desired_state !== 'running') patch.desired_state = 'running';
      await trx('environments').where({ id: environmentId }).update(patch);
      await record(trx, locked, 'keep_awake', 'agent', { seconds: s, until: iso(until), pid: who?.pid ?? null }, 'environment.agent_keep_awake');
      return { status: 200, body: { seconds: s, until: iso(until), keep_awake_until: iso(hold) } };
    });
    if (typeof out === 'number') {
      return refuse(env, 429, 'keep_awake_budget_exhausted', `${out} of ${settings.keep_awake_daily_secs} seconds (keep_awake_daily_secs) were used in the last 24 hours`, { seconds: s });
    }
    deps.onChange?.(environmentId);
    return out;
  }

  /**
   * Ends the environment's agent keep-awakes (all, or the given ones): the requesting
   * process ended, the VM was replaced, or scheduling was turned off. keep_awake_until
   * falls back to what still holds (a developer's keep-awake, another process's).
   */
  async function releaseAgentKeepAwakes(trx: Tx, environmentId: string, reason: string, ids?: string[]): Promise<number> {
    const now = clock.nowMs();
    const q = trx<KeepAwakeRow>('keep_awakes').where({ environment_id: environmentId, source: 'agent' }).whereNull('released_at').where('until', '>', now);
    if (ids) q.whereIn('id', ids);
    const rows = await q;
    if (rows.length === 0) return 0;
    await trx('keep_awakes').whereIn('id', rows.map((r) => r.id)).update({ released_at: now, release_reason: reason });
    const env = await lockEnv(trx, environmentId);
    if (!env) return rows.length;
    await trx('environments').where({ id: environmentId }).update({ keep_awake_until: await holdUntil(trx, environmentId, now), updated_at: now });
    await record(trx, env, 'keep_awake_released', 'system', { reason, count: rows.length }, 'environment.agent_keep_awake_released');
    return rows.length;
  }

  /**
   * The control socket refused requests with 429 `rate_limited` (hosts/control-socket.ts
   * calls this at most once per environment a minute, never per request): one refusal event
   * and webhook for the episode.
   */
  async function rateLimited(environmentId: string): Promise<void> {
    const env = await envOf(environmentId);
    if (!env) return;
    await withTx(db, (trx) => record(trx, env, 'agent_request_rejected', 'agent', { reason: 'rate_limited' }, 'environment.agent_request_rejected'));
  }

  async function release(environmentId: string, reason: string, ids?: string[]): Promise<number> {
    return withTx(db, (trx) => releaseAgentKeepAwakes(trx, environmentId, reason, ids));
  }

  /** Agent keep-awakes still holding, with their process (the host watches these). */
  function heldByProcesses(environmentIds: string[]): Promise<KeepAwakeRow[]> {
    if (environmentIds.length === 0) return Promise.resolve([]);
    return db<KeepAwakeRow>('keep_awakes').whereIn('environment_id', environmentIds).where({ source: 'agent' }).whereNull('released_at').where('until', '>', clock.nowMs()).whereNotNull('pid');
  }

  /**
   * Fires due schedules, each exactly once whatever the number of job workers (the move of
   * next_run_at is a conditional update). A firing wakes the environment (desired running,
   * activity, event `schedule_fired`) and then runs the schedule's handler in it.
   */
  async function fireDue(batch = 100): Promise<number> {
    const now = clock.nowMs();
    const due = await db<ScheduleRow>('schedules').whereNotNull('next_run_at').where('next_run_at', '<=', now).orderBy('next_run_at').limit(batch);
    let fired = 0;
    for (const s of due) {
      const env = await withTx(db, async (trx) => {
        let next: number | null = null;
        if (s.cron) next = cronNext(s.cron, s.tz ?? 'UTC', now).next;
        const claimed = await trx('schedules').where({ id: s.id, next_run_at: s.next_run_at }).update({ next_run_at: next, last_fired_at: now, updated_at: now });
        if (claimed !== 1) return null;
        if (!s.cron) await trx('schedules').where({ id: s.id }).delete();
        const env = await lockEnv(trx, s.environment_id);
        if (!env || env.desired_state === 'destroyed') return null;
        const patch: Partial<EnvironmentRow> = { last_active_at: now, updated_at: now };
        if (env.desired_state !== 'running' && !env.limit_exceeded) patch.desired_state = 'running';
        await trx('environments').where({ id: env.id }).update(patch);
        await record(trx, env, 'schedule_fired', 'system', { key: s.schedule_key, scheduled_for: iso(Number(s.next_run_at)), from: env.desired_state, next_run_at: iso(next) }, null);
        return env.limit_exceeded ? null : env;
      });
      if (!env) continue;
      fired++;
      deps.onChange?.(env.id);
      const command = fromJson<string[] | null>(s.command);
      if (command && deps.runHandler) {
        // The handler runs on its own: a build started by a schedule may take minutes.
        void deps.runHandler(env, s.schedule_key, command).then(
          (code) => withTx(db, (trx) => record(trx, env, 'schedule_handler_exited', 'system', { key: s.schedule_key, exit_code: code }, null)),
          (err) => {
            log.warn({ err, environment_id: env.id, key: s.schedule_key }, 'schedule handler failed');
            return withTx(db, (trx) => record(trx, env, 'schedule_handler_exited', 'system', { key: s.schedule_key, exit_code: null, error: (err as { code?: string }).code ?? 'failed' }, null));
          },
        ).catch(() => {});
      }
    }
    return fired;
  }

  return { listSchedules, setSchedule, deleteSchedule, keepAwake, rateLimited, release, releaseAgentKeepAwakes, recordApiKeepAwake, heldByProcesses, fireDue };
}

export type AgentService = ReturnType<typeof createAgentService>;
