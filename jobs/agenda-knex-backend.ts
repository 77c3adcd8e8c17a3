import { createHash, randomUUID } from 'node:crypto';
import {
  computeJobState,
  toJobId,
  type AgendaBackend,
  type JobId,
  type JobParameters,
  type JobRepository,
  type JobRepositoryOptions,
  type JobsOverview,
  type JobsQueryOptions,
  type JobsResult,
  type JobsSort,
  type JobWithState,
  type RemoveJobsOptions,
} from 'agenda';
import type { Knex } from 'knex';
import type { Clock } from '../lib/clock.js';
import { fromJson, isUniqueViolation, toJson, type Db } from '../store/db.js';
import { deleteInBatches, type PruneOptions } from '../store/prune.js';

/**
 * agenda v6 ships backends for MongoDB, PostgreSQL and Redis only; this one stores jobs in
 * `agenda_jobs` (migrations/0002_agenda_jobs.ts) through knex, on MySQL/MariaDB and SQLite.
 *
 * Time frames. The table holds *service* time (lib/clock.ts); agenda computes everything
 * from `new Date()`, i.e. wall time. Every date leaving this file is `stored - offset`,
 * every date entering is `value + offset`. A job due at service time T therefore looks due
 * to agenda at wall time T - offset, and advancing the test clock makes it due at once.
 * With the offset at 0 (production) the two frames are the same.
 *
 * Locking. `getNextJobToRun` picks candidates with a plain SELECT and claims one with a
 * conditional `UPDATE ... WHERE id = ? AND <still lockable>`; the row counts as ours only
 * when the UPDATE matched it. Both engines re-check the WHERE against the latest committed
 * row (InnoDB takes the row lock first; SQLite has one writer), so two workers never hold
 * the same job, whatever their number of processes or pools.
 *
 * Uniqueness. `type: 'single'` jobs and jobs saved with `unique()` carry `unique_key`, a
 * hash of the name (and of the unique object); a UNIQUE index on it makes the upsert
 * atomic. This differs from agenda's MongoDB backend in one way: `unique` is matched as a
 * whole object against what earlier saves passed to `unique()`, not as a query over
 * arbitrary job fields, so a job saved without `unique()` never matches.
 */

export const AGENDA_JOBS_TABLE = 'agenda_jobs';

/** The row as both drivers return it (BIGINTs may arrive as numbers or numeric strings). */
export interface AgendaJobRow {
  id: string;
  name: string;
  priority: number;
  next_run_at: number | string | null;
  type: string;
  locked_at: number | string | null;
  last_run_at: number | string | null;
  last_finished_at: number | string | null;
  failed_at: number | string | null;
  fail_count: number | null;
  fail_reason: string | null;
  repeat_interval: string | null;
  repeat_timezone: string | null;
  repeat_at: string | null;
  start_date: number | string | null;
  end_date: number | string | null;
  skip_days: string | null;
  disabled: number | boolean;
  progress: number | null;
  data: string | null;
  unique_key: string | null;
  last_modified_by: string | null;
  debounce_started_at: number | string | null;
  fork: number | boolean;
}

/** RemoveJobsOptions plus the unique object a job was saved with (see `uniqueKeyOf`). */
export interface KnexRemoveJobsOptions extends RemoveJobsOptions {
  unique?: Record<string, unknown>;
}

type Kind = 'plain' | 'time' | 'json' | 'bool' | 'interval';
type Field = keyof JobParameters;

/** Every persisted JobParameters field and how it is stored. */
const FIELDS: ReadonlyArray<readonly [Field, keyof AgendaJobRow, Kind]> = [
  ['name', 'name', 'plain'],
  ['priority', 'priority', 'plain'],
  ['nextRunAt', 'next_run_at', 'time'],
  ['type', 'type', 'plain'],
  ['lockedAt', 'locked_at', 'time'],
  ['lastRunAt', 'last_run_at', 'time'],
  ['lastFinishedAt', 'last_finished_at', 'time'],
  ['failedAt', 'failed_at', 'time'],
  ['failCount', 'fail_count', 'plain'],
  ['failReason', 'fail_reason', 'plain'],
  ['repeatInterval', 'repeat_interval', 'interval'],
  ['repeatTimezone', 'repeat_timezone', 'plain'],
  ['repeatAt', 'repeat_at', 'plain'],
  ['startDate', 'start_date', 'time'],
  ['endDate', 'end_date', 'time'],
  ['skipDays', 'skip_days', 'json'],
  ['disabled', 'disabled', 'bool'],
  ['progress', 'progress', 'plain'],
  ['data', 'data', 'json'],
  ['lastModifiedBy', 'last_modified_by', 'plain'],
  ['debounceStartedAt', 'debounce_started_at', 'time'],
  ['fork', 'fork', 'bool'],
];

const SORT_COLUMNS: Record<keyof JobsSort, string> = {
  nextRunAt: 'next_run_at',
  lastRunAt: 'last_run_at',
  lastFinishedAt: 'last_finished_at',
  priority: 'priority',
  name: 'name',
  data: 'data',
};

/** How many candidates one lock attempt considers; losing all of them to other workers triggers another round. */
const LOCK_CANDIDATES = 10;
const LOCK_ROUNDS = 3;
const UPSERT_ATTEMPTS = 5;
/** Keeps IN (...) lists well under every engine's bound-parameter limit. */
const ID_CHUNK = 500;

function ms(value: unknown): number | null {
  if (value == null) return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/** Canonical JSON (object keys sorted) so `{a, b}` and `{b, a}` name the same unique job. */
function canonical(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** The unique_key of a job saved with `unique(unique)`. */
export function uniqueKeyOf(name: string, unique: Record<string, unknown>): string {
  return sha256(`unique\0${name}\0${canonical(unique)}`);
}

/** The unique_key of the one `type: 'single'` job of a name (what `agenda.every()` saves). */
export function singleKeyOf(name: string): string {
  return sha256(`single\0${name}`);
}

/** Partial deep match: every field of `expected` equals the same field of `actual`. */
function matchesData(actual: unknown, expected: unknown): boolean {
  if (expected === null || typeof expected !== 'object') return actual === expected;
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matchesData(actual[i], e));
  }
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
  return Object.entries(expected).every(([k, v]) => matchesData((actual as Record<string, unknown>)[k], v));
}

function isDeadlock(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code === 'ER_LOCK_DEADLOCK' || code === 'SQLITE_BUSY';
}

function chunks<T>(items: T[], size = ID_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

interface HeldLock {
  /** next_run_at (service ms) when the lock was taken; null for a job recovered mid-run. */
  dueAtMs: number | null;
}

export class KnexJobRepository implements JobRepository {
  readonly #db: Db;
  readonly #clock: Clock;
  /**
   * Jobs this repository locked and has not released yet. The runner waits on it (runDue,
   * stop), and it keeps this process from re-locking its own running job when an advanced
   * test clock makes that job's lock look expired.
   */
  readonly #held = new Map<string, HeldLock>();
  #paused = false;

  constructor(opts: { db: Db; clock: Clock }) {
    this.#db = opts.db;
    this.#clock = opts.clock;
  }

  private table(): Knex.QueryBuilder<AgendaJobRow> {
    return this.#db<AgendaJobRow>(AGENDA_JOBS_TABLE);
  }

  /**
   * Deliberately does nothing: the migration owns the schema, and agenda calls this from
   * its constructor without catching, so a rejection here would crash the process.
   */
  async connect(): Promise<void> {}

  // ---------------------------------------------------------------- row <-> job

  /** JobParameters fields present on `job` as column values, in service time. */
  private toColumns(job: Partial<JobParameters>, offset: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [field, column, kind] of FIELDS) {
      if (!Object.prototype.hasOwnProperty.call(job, field)) continue;
      const v = (job as Record<string, unknown>)[field];
      switch (kind) {
        case 'time': {
          const t = v == null ? NaN : new Date(v as Date).getTime();
          out[column] = Number.isFinite(t) ? t + offset : null;
          break;
        }
        case 'json':
          out[column] = column === 'data' ? toJson(v) : v == null ? null : toJson(v);
          break;
        case 'bool':
          out[column] = Boolean(v);
          break;
        case 'interval':
          out[column] = v == null || v === '' ? null : String(v);
          break;
        default:
          out[column] = v ?? null;
      }
    }
    return out;
  }

  private toInsertRow(job: Partial<JobParameters>, offset: number, lastModifiedBy: string | null): Record<string, unknown> {
    return {
      priority: 0,
      type: 'normal',
      disabled: false,
      fork: false,
      data: toJson(null),
      ...this.toColumns(job, offset),
      last_modified_by: lastModifiedBy,
    };
  }

  private fromRow<DATA = unknown>(row: AgendaJobRow, offset = this.#clock.offsetMs()): JobParameters<DATA> {
    const time = (v: unknown): Date | undefined => {
      const n = ms(v);
      return n == null ? undefined : new Date(n - offset);
    };
    const interval = row.repeat_interval;
    return {
      _id: toJobId(String(row.id)),
      name: row.name,
      priority: Number(row.priority),
      nextRunAt: time(row.next_run_at) ?? null,
      type: row.type === 'single' ? 'single' : 'normal',
      lockedAt: time(row.locked_at),
      lastRunAt: time(row.last_run_at),
      lastFinishedAt: time(row.last_finished_at),
      failedAt: time(row.failed_at),
      failCount: row.fail_count == null ? undefined : Number(row.fail_count),
      failReason: row.fail_reason ?? undefined,
      // A purely numeric interval was saved from a number (agenda.every(5000, ...)); cron
      // and human intervals always contain a non-digit.
      repeatInterval: interval == null ? undefined : /^\d+$/.test(interval) ? Number(interval) : interval,
      repeatTimezone: row.repeat_timezone ?? undefined,
      repeatAt: row.repeat_at ?? undefined,
      startDate: time(row.start_date),
      endDate: time(row.end_date),
      skipDays: row.skip_days == null ? undefined : fromJson<number[]>(row.skip_days),
      disabled: Boolean(Number(row.disabled)),
      progress: row.progress == null ? undefined : Number(row.progress),
      data: fromJson<DATA>(row.data),
      lastModifiedBy: row.last_modified_by ?? undefined,
      debounceStartedAt: time(row.debounce_started_at),
      fork: Boolean(Number(row.fork)),
    };
  }

  private async getRow(id: string): Promise<AgendaJobRow | undefined> {
    return (await this.table().where('id', id).first()) as AgendaJobRow | undefined;
  }

  // ---------------------------------------------------------------- filters

  /** Applies id/ids and name/names/notNames; false when the options name no job at all. */
  private applyFilter(q: Knex.QueryBuilder, o: KnexRemoveJobsOptions): boolean {
    let any = false;
    if (o.id) {
      q.where('id', String(o.id));
      any = true;
    } else if (o.ids && o.ids.length > 0) {
      q.whereIn('id', o.ids.map(String));
      any = true;
    }
    if (o.name) {
      q.where('name', o.name);
      any = true;
    } else if (o.names && o.names.length > 0) {
      q.whereIn('name', o.names);
      any = true;
    } else if (o.notNames && o.notNames.length > 0) {
      q.whereNotIn('name', o.notNames);
      any = true;
    }
    if (o.unique) {
      if (!o.name) throw new Error('removing by unique needs the job name');
      q.where('unique_key', uniqueKeyOf(o.name, o.unique));
      any = true;
    }
    return any;
  }

  /**
   * Runs `write` on the jobs the options select. A `data` filter is matched in JS (JSON is
   * TEXT on both engines), so the write then targets the matching ids.
   */
  private async writeMatching(o: KnexRemoveJobsOptions, write: (q: Knex.QueryBuilder) => Promise<number>): Promise<number> {
    const base = this.table();
    const filtered = this.applyFilter(base, o);
    if (o.data === undefined) return filtered ? write(base) : 0;
    const rows = (await base.select('id', 'data')) as Array<Pick<AgendaJobRow, 'id' | 'data'>>;
    const ids = rows.filter((r) => matchesData(fromJson(r.data), o.data)).map((r) => r.id);
    let n = 0;
    for (const part of chunks(ids)) n += await write(this.table().whereIn('id', part));
    return n;
  }

  private orderBy(q: Knex.QueryBuilder, sort: JobsSort | undefined): void {
    const parts: string[] = [];
    for (const [key, column] of Object.entries(SORT_COLUMNS) as Array<[keyof JobsSort, string]>) {
      const dir = sort?.[key];
      if (dir === undefined) continue;
      // "NULLS LAST" spelled so that MySQL understands it too.
      parts.push(`${column} IS NULL`, `${column} ${dir === 'asc' ? 'ASC' : 'DESC'}`);
    }
    if (parts.length === 0) parts.push('next_run_at IS NULL', 'next_run_at DESC', 'last_run_at IS NULL', 'last_run_at DESC');
    parts.push('id ASC');
    q.orderByRaw(parts.join(', '));
  }

  // ---------------------------------------------------------------- queries

  async queryJobs(options: JobsQueryOptions = {}): Promise<JobsResult> {
    const { name, names, state, id, ids, search, data, includeDisabled = true, sort, skip = 0, limit = 0 } = options;
    const q = this.table();
    if (name) q.where('name', name);
    else if (names && names.length > 0) q.whereIn('name', names);
    if (id) q.where('id', id);
    else if (ids && ids.length > 0) q.whereIn('id', ids);
    if (search) {
      const pattern = `%${search.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
      q.whereRaw("LOWER(name) LIKE ? ESCAPE '!'", [pattern]);
    }
    if (!includeDisabled) q.where('disabled', false);

    const offset = this.#clock.offsetMs();
    const now = new Date();
    const withState = (row: AgendaJobRow): JobWithState => {
      const job = this.fromRow(row, offset);
      return { ...job, _id: job._id as JobId, state: computeJobState(job, now) };
    };

    // Without filters computed in JS the database can paginate.
    if (!state && data === undefined) {
      const countRow = (await q.clone().count<{ n: number | string }[]>({ n: '*' }))[0];
      this.orderBy(q, sort);
      if (limit > 0) q.limit(limit);
      if (skip > 0) q.offset(skip);
      const rows = (await q) as AgendaJobRow[];
      return { jobs: rows.map(withState), total: Number(countRow?.n ?? 0) };
    }

    this.orderBy(q, sort);
    let jobs = ((await q) as AgendaJobRow[])
      .filter((r) => data === undefined || matchesData(fromJson(r.data), data))
      .map(withState)
      .filter((j) => !state || (state === 'paused' ? j.disabled === true : j.state === state));
    const total = jobs.length;
    if (limit > 0) jobs = jobs.slice(skip, skip + limit);
    else if (skip > 0) jobs = jobs.slice(skip);
    return { jobs, total };
  }

  async getJobsOverview(): Promise<JobsOverview[]> {
    const offset = this.#clock.offsetMs();
    const now = new Date();
    const rows = (await this.table()
      .select('name', 'next_run_at', 'locked_at', 'last_finished_at', 'failed_at', 'repeat_interval', 'disabled')
      .orderBy('name')) as AgendaJobRow[];
    const byName = new Map<string, JobsOverview>();
    for (const row of rows) {
      let o = byName.get(row.name);
      if (!o) {
        o = { name: row.name, total: 0, running: 0, scheduled: 0, queued: 0, completed: 0, failed: 0, repeating: 0, paused: 0 };
        byName.set(row.name, o);
      }
      const time = (v: unknown): Date | undefined => {
        const n = ms(v);
        return n == null ? undefined : new Date(n - offset);
      };
      const job = {
        name: row.name,
        priority: 0,
        type: 'normal',
        data: null,
        nextRunAt: time(row.next_run_at) ?? null,
        lockedAt: time(row.locked_at),
        lastFinishedAt: time(row.last_finished_at),
        failedAt: time(row.failed_at),
        repeatInterval: row.repeat_interval ?? undefined,
      } satisfies JobParameters;
      o.total++;
      o[computeJobState(job, now)]++;
      // As in agenda's own backends: a disabled job counts under its state *and* as paused.
      if (Number(row.disabled)) o.paused++;
    }
    return [...byName.values()];
  }

  async getDistinctJobNames(): Promise<string[]> {
    const rows = (await this.table().distinct('name').orderBy('name')) as Array<{ name: string }>;
    return rows.map((r) => r.name);
  }

  async getJobById(id: string): Promise<JobParameters | null> {
    const row = await this.getRow(String(id));
    return row ? this.fromRow(row) : null;
  }

  async getQueueSize(): Promise<number> {
    const row = (await this.table().where('next_run_at', '<', this.#clock.nowMs()).count<{ n: number | string }[]>({ n: '*' }))[0];
    return Number(row?.n ?? 0);
  }

  // ---------------------------------------------------------------- bulk writes

  async removeJobs(options: KnexRemoveJobsOptions): Promise<number> {
    return this.writeMatching(options, (q) => q.delete());
  }

  async disableJobs(options: KnexRemoveJobsOptions): Promise<number> {
    return this.writeMatching(options, (q) => q.update({ disabled: true }));
  }

  async enableJobs(options: KnexRemoveJobsOptions): Promise<number> {
    return this.writeMatching(options, (q) => q.update({ disabled: false }));
  }

  async purgeAllJobs(): Promise<number> {
    return this.table().delete();
  }

  // ---------------------------------------------------------------- save

  async saveJob<DATA = unknown>(job: JobParameters<DATA>, options: JobRepositoryOptions | undefined): Promise<JobParameters<DATA>> {
    const { _id, unique, uniqueOpts, ...props } = job;
    const offset = this.#clock.offsetMs();
    const lastModifiedBy = options?.lastModifiedBy ?? null;

    if (_id) {
      const id = String(_id);
      const patch = { ...this.toColumns(props, offset), last_modified_by: lastModifiedBy };
      const n = await this.table().where({ id, name: props.name }).update(patch);
      // Removed while the caller held it: agenda expects the job back unchanged.
      if (n === 0) return job;
      const row = await this.getRow(id);
      return row ? this.fromRow<DATA>(row, offset) : job;
    }

    if (props.type === 'single') {
      const nowMs = this.#clock.nowMs();
      const insert = this.toInsertRow(props, offset, lastModifiedBy);
      // A recurring job re-declared at boot asks to run "now"; keep the run it already has
      // instead of firing again on every restart (agenda's backends do the same).
      const protectNextRun = props.nextRunAt != null && new Date(props.nextRunAt).getTime() + offset <= nowMs;
      const row = await this.upsertByKey(singleKeyOf(props.name), insert, () => {
        // Only the fields the caller set, as a MongoDB $set would: re-declaring a recurring
        // job must not re-enable one an operator disabled.
        const patch: Record<string, unknown> = { ...this.toColumns(props, offset), last_modified_by: lastModifiedBy };
        if (protectNextRun) patch.next_run_at = this.#db.raw('COALESCE(next_run_at, ?)', [insert.next_run_at as number]);
        return patch;
      });
      return this.fromRow<DATA>(row, offset);
    }

    if (unique) {
      const nowMs = this.#clock.nowMs();
      const debounce = uniqueOpts?.debounce;
      const insert = this.toInsertRow(props, offset, lastModifiedBy);
      if (debounce) {
        insert.debounce_started_at = nowMs;
        if (debounce.strategy !== 'leading') insert.next_run_at = nowMs + debounce.delay;
      }
      const row = await this.upsertByKey(uniqueKeyOf(props.name, unique), insert, (existing) => {
        if (uniqueOpts?.insertOnly && !debounce) return null;
        const patch: Record<string, unknown> = { ...this.toColumns(props, offset), last_modified_by: lastModifiedBy };
        if (!debounce) return patch;
        const pending = ms(existing.next_run_at) != null;
        if (debounce.strategy === 'leading') {
          // The first call of a window runs; later calls in the window only update data.
          const windowStart = ms(existing.debounce_started_at) ?? nowMs;
          if (pending || nowMs - windowStart < debounce.delay) {
            delete patch.next_run_at;
            patch.debounce_started_at = windowStart;
          } else {
            patch.debounce_started_at = nowMs;
          }
          return patch;
        }
        // Trailing: a finished run closes the window, so the next burst starts a new one.
        const started = pending ? (ms(existing.debounce_started_at) ?? nowMs) : nowMs;
        if (debounce.maxWait != null && nowMs - started >= debounce.maxWait) {
          patch.next_run_at = nowMs;
          patch.debounce_started_at = null;
        } else {
          patch.next_run_at = nowMs + debounce.delay;
          patch.debounce_started_at = started;
        }
        return patch;
      });
      return this.fromRow<DATA>(row, offset);
    }

    const id = randomUUID();
    const insert = { ...this.toInsertRow(props, offset, lastModifiedBy), id };
    await this.table().insert(insert);
    const row = await this.getRow(id);
    return this.fromRow<DATA>(row ?? (insert as unknown as AgendaJobRow), offset);
  }

  /**
   * Insert-or-update on unique_key. The UNIQUE index decides races: a losing INSERT fails
   * with a duplicate-key error and retries as an update of the winner's row.
   * `onExisting` returns the columns to change, or null to leave the row as it is.
   */
  private async upsertByKey(
    key: string,
    insert: Record<string, unknown>,
    onExisting: (existing: AgendaJobRow) => Record<string, unknown> | null,
  ): Promise<AgendaJobRow> {
    for (let attempt = 0; attempt < UPSERT_ATTEMPTS; attempt++) {
      const existing = (await this.table().where('unique_key', key).first()) as AgendaJobRow | undefined;
      if (!existing) {
        const id = randomUUID();
        try {
          await this.table().insert({ ...insert, id, unique_key: key });
        } catch (err) {
          if (isUniqueViolation(err) || isDeadlock(err)) continue;
          throw err;
        }
        return (await this.getRow(id)) ?? ({ ...insert, id, unique_key: key } as unknown as AgendaJobRow);
      }
      const patch = onExisting(existing);
      if (!patch) return existing;
      // unique_key in the WHERE: if the row was removed and re-created meanwhile, try again.
      const n = await this.table().where({ id: existing.id, unique_key: key }).update(patch);
      if (n === 1) return (await this.getRow(existing.id)) ?? existing;
    }
    throw new Error(`agenda_jobs: could not upsert unique job ${key} after ${UPSERT_ATTEMPTS} attempts`);
  }

  async saveJobState(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<void> {
    if (!job._id) throw new Error('Cannot save job state without job ID');
    const id = String(job._id);
    try {
      const offset = this.#clock.offsetMs();
      const cols = this.toColumns(
        {
          lockedAt: job.lockedAt,
          nextRunAt: job.nextRunAt,
          lastRunAt: job.lastRunAt,
          progress: job.progress,
          failReason: job.failReason,
          failCount: job.failCount,
          failedAt: job.failedAt,
          lastFinishedAt: job.lastFinishedAt,
        },
        offset,
      );
      const n = await this.table()
        .where({ id, name: job.name })
        .update({ ...cols, last_modified_by: options?.lastModifiedBy ?? null });
      if (n !== 1) throw new Error(`job ${id} (name: ${job.name}) cannot be updated in the database, maybe it does not exist anymore?`);
    } finally {
      // Released even when the write failed: the job is no longer running here, and its
      // lock (if still in the table) expires like a crashed worker's.
      if (!job.lockedAt) this.#held.delete(id);
    }
  }

  // ---------------------------------------------------------------- locking

  /** WHERE clause of a job that may be locked now: due and free, or locked by a dead worker. */
  private lockable(q: Knex.QueryBuilder, nextScanMs: number, lockDeadlineMs: number): Knex.QueryBuilder {
    return q
      .where('disabled', false)
      .andWhere((w) =>
        w.where((free) => free.whereNull('locked_at').andWhere('next_run_at', '<=', nextScanMs)).orWhere('locked_at', '<=', lockDeadlineMs),
      );
  }

  /**
   * Claims `id` with the conditional UPDATE `where` describes. The claim is recorded in
   * #held *before* the UPDATE so that nobody watching #held and the table (runDue) ever
   * sees the job in neither.
   */
  private async claim(id: string, dueAtMs: number | null, where: (q: Knex.QueryBuilder) => Knex.QueryBuilder, patch: Record<string, unknown>): Promise<AgendaJobRow | undefined> {
    if (this.#held.has(id)) return undefined;
    this.#held.set(id, { dueAtMs });
    let row: AgendaJobRow | undefined;
    try {
      const n = await where(this.table().where('id', id)).update(patch);
      if (n === 1) row = await this.getRow(id);
    } finally {
      if (!row) this.#held.delete(id);
    }
    if (!row) return undefined;
    this.#held.set(id, { dueAtMs: ms(row.next_run_at) });
    if (this.#paused) {
      // The runner stopped while this lock was in flight; nobody will run it here.
      await this.unlockJobs([id]);
      return undefined;
    }
    return row;
  }

  async lockJob(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<JobParameters | undefined> {
    if (!job._id || this.#paused) return undefined;
    const offset = this.#clock.offsetMs();
    const nextRunMs = job.nextRunAt ? new Date(job.nextRunAt).getTime() + offset : null;
    const row = await this.claim(
      String(job._id),
      nextRunMs,
      (q) => {
        q.where('name', job.name).whereNull('locked_at').where('disabled', false);
        return nextRunMs == null ? q.whereNull('next_run_at') : q.where('next_run_at', nextRunMs);
      },
      { locked_at: this.#clock.nowMs(), last_modified_by: options?.lastModifiedBy ?? null },
    );
    return row ? this.fromRow(row, offset) : undefined;
  }

  async getNextJobToRun(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    now: Date | undefined,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    if (this.#paused) return undefined;
    const offset = this.#clock.offsetMs();
    const nextScanMs = nextScanAt.getTime() + offset;
    const lockDeadlineMs = lockDeadline.getTime() + offset;
    const lockMs = now ? now.getTime() + offset : this.#clock.nowMs();
    const patch = { locked_at: lockMs, last_modified_by: options?.lastModifiedBy ?? null };

    for (let round = 0; round < LOCK_ROUNDS; round++) {
      const held = [...this.#held.keys()];
      const q = this.lockable(this.table().select('id', 'next_run_at').where('name', jobName), nextScanMs, lockDeadlineMs);
      // Our own running jobs can look expired after the test clock jumped; never take them twice.
      for (const part of chunks(held)) q.whereNotIn('id', part);
      const candidates = (await q.orderByRaw('next_run_at IS NULL, next_run_at ASC, priority DESC').limit(LOCK_CANDIDATES)) as Array<
        Pick<AgendaJobRow, 'id' | 'next_run_at'>
      >;
      if (candidates.length === 0) return undefined;
      for (const c of candidates) {
        if (this.#paused) return undefined;
        const row = await this.claim(
          String(c.id),
          ms(c.next_run_at),
          (w) => this.lockable(w.where('name', jobName), nextScanMs, lockDeadlineMs),
          patch,
        );
        if (row) return this.fromRow(row, offset);
      }
      // Every candidate went to another worker; look again before reporting "nothing to do".
    }
    return undefined;
  }

  async unlockJob(job: JobParameters): Promise<void> {
    if (!job._id) return;
    const id = String(job._id);
    try {
      // Same guard as agenda's backends: a job mid-run has next_run_at NULL and stays locked.
      await this.table().where('id', id).whereNotNull('next_run_at').update({ locked_at: null });
    } finally {
      this.#held.delete(id);
    }
  }

  async unlockJobs(jobIds: (JobId | string)[]): Promise<void> {
    const ids = jobIds.map(String);
    try {
      for (const part of chunks(ids)) await this.table().whereIn('id', part).update({ locked_at: null });
    } finally {
      for (const id of ids) this.#held.delete(id);
    }
  }

  // ---------------------------------------------------------------- for jobs/runner.ts

  /**
   * Retention: deletes jobs that are over, in batches: nothing left to run (next_run_at
   * NULL, one range of agenda_jobs_next_run_at_idx), not locked (a job mid-run also has
   * next_run_at NULL, but keeps its lock), and finished, successfully or for good, before
   * `beforeMs` (service time). Recurring jobs always have a next run and are never
   * deleted; neither is a disabled job (an operator's doing) nor one that never ran.
   */
  async pruneFinished(beforeMs: number, opts: PruneOptions = {}): Promise<number> {
    return deleteInBatches(
      this.#db,
      AGENDA_JOBS_TABLE,
      (q) => q.whereNull('next_run_at').whereNull('locked_at').where('disabled', false).where('last_finished_at', '<', beforeMs),
      opts,
    );
  }

  /** Stops taking new locks (a lock already in flight is released again). */
  pauseLocking(): void {
    this.#paused = true;
  }

  resumeLocking(): void {
    this.#paused = false;
  }

  /** Jobs locked through this repository and not yet released. */
  heldCount(): number {
    return this.#held.size;
  }

  /** Held jobs that are due (or running) at service time `nowMs`, as opposed to waiting on a timer. */
  busyCount(nowMs: number): number {
    let n = 0;
    for (const h of this.#held.values()) if (h.dueAtMs == null || h.dueAtMs <= nowMs) n++;
    return n;
  }

  /**
   * Re-stamps the locks this process holds with the current service time. After the test
   * clock jumps, those locks would otherwise look expired to other workers on the same
   * database, which would then run the same job a second time.
   */
  async refreshHeldLocks(): Promise<void> {
    const ids = [...this.#held.keys()];
    const nowMs = this.#clock.nowMs();
    for (const part of chunks(ids)) await this.table().whereIn('id', part).whereNotNull('locked_at').update({ locked_at: nowMs });
  }

  /**
   * Names (among `defs`) with a job this process could lock right now: enabled, due by
   * service time, and free or locked longer ago than the definition's lock lifetime.
   */
  async dueJobNames(defs: ReadonlyArray<{ name: string; lockLifetimeMs: number }>): Promise<string[]> {
    if (defs.length === 0) return [];
    const nowMs = this.#clock.nowMs();
    const byLifetime = new Map<number, string[]>();
    for (const d of defs) byLifetime.set(d.lockLifetimeMs, [...(byLifetime.get(d.lockLifetimeMs) ?? []), d.name]);
    const held = [...this.#held.keys()];
    const names = new Set<string>();
    for (const [lifetime, group] of byLifetime) {
      const q = this.lockable(this.table().distinct('name').whereIn('name', group), nowMs, nowMs - lifetime);
      for (const part of chunks(held)) q.whereNotIn('id', part);
      for (const r of (await q) as Array<{ name: string }>) names.add(r.name);
    }
    return [...names];
  }
}

/** agenda's view of our store: storage only, polled (no notification channel of its own). */
export class KnexAgendaBackend implements AgendaBackend {
  readonly name = 'knex (MySQL/SQLite)';
  readonly repository: KnexJobRepository;
  /** The knex pool belongs to the caller; agenda.stop() must not close it. */
  readonly ownsConnection = false;

  constructor(opts: { db: Db; clock: Clock }) {
    this.repository = new KnexJobRepository(opts);
  }

  async connect(): Promise<void> {
    await this.repository.connect();
  }

  async disconnect(): Promise<void> {}
}
