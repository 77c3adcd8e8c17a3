import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Agenda, InMemoryNotificationChannel, exponential, toJobId, type BackoffStrategy, type Job } from 'agenda';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import { noopMetrics, type Metrics } from '../lib/metrics.js';
import type { Db } from '../store/db.js';
import type { PruneOptions } from '../store/prune.js';
import { KnexAgendaBackend, type KnexJobRepository } from './agenda-knex-backend.js';

/**
 * One agenda instance over our own store (jobs/agenda-knex-backend.ts), behind a small
 * typed facade. Every time a caller passes or gets back is *service* time (lib/clock.ts).
 *
 * Several runners (processes) may share one database: a job runs on exactly one of them.
 * A worker that dies mid-job leaves its lock behind; another worker takes the job again
 * once the lock is older than the definition's lock lifetime (10 minutes by default), so
 * long jobs call `ctx.touch()` to keep theirs.
 */

/** Exponential retry after a handler throws: delayMs, delayMs*factor, ... capped at maxDelayMs. */
export interface RetryPolicy {
  /** Retries after the first attempt (so at most retries + 1 runs). */
  retries: number;
  delayMs: number;
  factor?: number;
  maxDelayMs?: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({ retries: 5, delayMs: 5_000, factor: 2, maxDelayMs: 10 * 60_000 });
export const DEFAULT_LOCK_LIFETIME_MS = 10 * 60_000;
export const DEFAULT_PROCESS_EVERY_MS = 5_000;

export interface DefineOptions {
  /** DEFAULT_RETRY when omitted; false: a failure is final; a function: agenda's BackoffStrategy. */
  retry?: RetryPolicy | BackoffStrategy | false;
  /** Jobs of this name running at once in this process (agenda's default: 5). */
  concurrency?: number;
  /** How long a lock is honoured without ctx.touch() before another worker may take the job. */
  lockLifetimeMs?: number;
  /** Higher runs first among jobs due at the same time. */
  priority?: number;
  /** Delete a one-off job's row once it succeeded (default: keep it as history). */
  removeOnComplete?: boolean;
}

export interface JobContext {
  id: string;
  name: string;
  /** 1 on the first run, 2 on the first retry, ... */
  attempt: number;
  /** Extends the lock (long jobs must call it well within the lock lifetime). */
  touch(progress?: number): Promise<void>;
}

export type JobHandler<D> = (data: D, ctx: JobContext) => Promise<void> | void;

export interface ScheduleOptions {
  /**
   * Names one logical job: while a job of this name with this key exists (pending, running
   * or finished), scheduling it again returns that job unchanged. A finished job is kept
   * only for the job retention window (GATEWAY_JOB_RETENTION_DAYS, docs/retention.md);
   * after that the key is free again.
   */
  uniqueKey?: string;
  /** With uniqueKey: move the existing job to the new time and data instead (re-arms a finished one). */
  replace?: boolean;
  priority?: number;
}

export interface EveryOptions {
  timezone?: string;
  /** Wait one interval before the first run instead of running now. */
  skipImmediate?: boolean;
}

export interface ScheduledJob {
  id: string;
  name: string;
  /** Service time of the next run; null once it has nothing left to run. */
  runAtMs: number | null;
}

export type CancelFilter = { id: string } | { name: string; uniqueKey?: string };

export interface RunDueResult {
  /** Job runs that finished (successfully or not) while runDue waited. */
  ran: number;
  timedOut: boolean;
}

export interface JobRunnerOptions {
  db: Db;
  clock: Clock;
  log: Logger;
  /** How often the database is polled for due jobs (default 5 s). */
  processEveryMs?: number;
  lockLifetimeMs?: number;
  /** Jobs running at once in this process, all names together (agenda's default: 20). */
  maxConcurrency?: number;
  /** Recorded as last_modified_by; defaults to host:pid:random. */
  name?: string;
  /** Counts each run by job name and outcome (gateway_jobs_total, issue 25, item 2). */
  metrics?: Metrics;
}

export type JobMap = Record<string, unknown>;

export interface JobRunner<J extends JobMap = Record<string, any>> {
  define<K extends keyof J & string>(name: K, handler: JobHandler<J[K]>, opts?: DefineOptions): void;
  /** Runs `name` once at service time runAtMs (in the past: as soon as possible). */
  schedule<K extends keyof J & string>(name: K, runAtMs: number, data: J[K], opts?: ScheduleOptions): Promise<ScheduledJob>;
  /**
   * Runs `name` repeatedly; an interval in ms, a human interval ('5 minutes') or a cron
   * expression. One such job exists per name: calling it again (each boot) updates it.
   */
  every<K extends keyof J & string>(name: K, interval: number | string, data: J[K], opts?: EveryOptions): Promise<ScheduledJob>;
  /** Removes matching jobs (a running one finishes, but is not run again); returns how many. */
  cancel(filter: CancelFilter): Promise<number>;
  start(): Promise<void>;
  /** Stops taking jobs, releases the ones not started, and waits for running ones (up to timeoutMs, default 30 s). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
  /**
   * Looks for due jobs now and resolves once no job due by clock.nowMs() is left free to
   * run and none of ours is running (the test clock calls this after advancing). A job a
   * handler schedules for "now" is waited for too. Only names defined here count.
   */
  runDue(opts?: { timeoutMs?: number }): Promise<RunDueResult>;
  /**
   * Retention: deletes jobs that finished (successfully, or failed with no retry left)
   * before service time `beforeMs`, in batches; returns how many. Pending, running,
   * recurring and disabled jobs stay.
   */
  pruneFinished(beforeMs: number, opts?: PruneOptions): Promise<number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function toBackoff(retry: DefineOptions['retry']): BackoffStrategy | undefined {
  if (retry === false) return undefined;
  if (typeof retry === 'function') return retry;
  const p = retry ?? DEFAULT_RETRY;
  return exponential({ delay: p.delayMs, factor: p.factor ?? 2, maxRetries: p.retries, maxDelay: p.maxDelayMs ?? Infinity });
}

export function createJobRunner<J extends JobMap = Record<string, any>>(opts: JobRunnerOptions): JobRunner<J> {
  const { db, clock, log } = opts;
  const metrics = opts.metrics ?? noopMetrics;
  const defaultLockLifetimeMs = opts.lockLifetimeMs ?? DEFAULT_LOCK_LIFETIME_MS;
  const backend = new KnexAgendaBackend({ db, clock });
  const repo: KnexJobRepository = backend.repository;
  // In-process only. It lets runDue() make agenda fill its queue right away, and makes a
  // job saved through this runner start at once instead of at the next poll.
  const channel = new InMemoryNotificationChannel();
  const agenda = new Agenda({
    backend,
    notificationChannel: channel,
    name: opts.name ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    processEvery: opts.processEveryMs ?? DEFAULT_PROCESS_EVERY_MS,
    defaultLockLifetime: defaultLockLifetimeMs,
    ...(opts.maxConcurrency ? { maxConcurrency: opts.maxConcurrency } : {}),
  });
  const lifetimes = new Map<string, number>();
  let started = false;

  agenda.on('error', (err: Error) => log.error({ err }, 'job runner error'));
  agenda.on('fail', (err: Error, job: Job) =>
    log.warn({ err, job: job.attrs.name, job_id: String(job.attrs._id), fail_count: job.attrs.failCount }, 'job failed'),
  );
  agenda.on('retry exhausted', (err: Error, job: Job) =>
    log.error({ err, job: job.attrs.name, job_id: String(job.attrs._id), fail_count: job.attrs.failCount }, 'job failed for good, no retries left'),
  );

  const toScheduled = (job: Job<unknown>): ScheduledJob => ({
    id: String(job.attrs._id),
    name: job.attrs.name,
    runAtMs: job.attrs.nextRunAt ? job.attrs.nextRunAt.getTime() + clock.offsetMs() : null,
  });

  const kick = (names: string[]) => {
    if (channel.state !== 'connected') return;
    for (const name of names) {
      channel
        .publish({ jobId: toJobId('run-due'), jobName: name, nextRunAt: null, priority: 0, timestamp: new Date() })
        .catch((err: unknown) => log.error({ err, job: name }, 'could not wake the job runner'));
    }
  };

  return {
    define(name, handler, o = {}) {
      const lockLifetimeMs = o.lockLifetimeMs ?? defaultLockLifetimeMs;
      lifetimes.set(name, lockLifetimeMs);
      // One parameter on purpose: agenda treats a two-parameter processor as callback style.
      const processor = async (job: Job<J[typeof name]>) => {
        const ctx: JobContext = {
          id: String(job.attrs._id),
          name,
          attempt: (job.attrs.failCount ?? 0) + 1,
          touch: (progress?: number) => job.touch(progress),
        };
        try {
          await handler(job.attrs.data, ctx);
        } catch (err) {
          metrics.jobDone(name, 'failure');
          throw err;
        }
        metrics.jobDone(name, 'success');
      };
      agenda.define(name, processor, {
        lockLifetime: lockLifetimeMs,
        backoff: toBackoff(o.retry),
        ...(o.concurrency ? { concurrency: o.concurrency } : {}),
        ...(o.priority !== undefined ? { priority: o.priority } : {}),
        ...(o.removeOnComplete !== undefined ? { removeOnComplete: o.removeOnComplete } : {}),
      });
    },

    async schedule(name, runAtMs, data, o = {}) {
      if (!Number.isFinite(runAtMs)) throw new RangeError(`schedule(${name}): runAtMs must be a finite number`);
      const job = agenda.create(name, data);
      job.schedule(new Date(runAtMs - clock.offsetMs()));
      if (o.priority !== undefined) job.priority(o.priority);
      if (o.uniqueKey !== undefined) job.unique({ key: o.uniqueKey }, { insertOnly: !o.replace });
      await job.save();
      return toScheduled(job);
    },

    async every(name, interval, data, o = {}) {
      const job = await agenda.every(interval, name, data, { timezone: o.timezone, skipImmediate: o.skipImmediate });
      return toScheduled(job as Job<unknown>);
    },

    async cancel(filter) {
      await agenda.ready;
      if ('id' in filter) return repo.removeJobs({ id: filter.id });
      if (!filter.name) throw new Error('cancel needs an id or a job name');
      return repo.removeJobs(filter.uniqueKey !== undefined ? { name: filter.name, unique: { key: filter.uniqueKey } } : { name: filter.name });
    },

    async start() {
      if (started) return;
      repo.resumeLocking();
      await agenda.start();
      started = true;
    },

    async stop({ timeoutMs = 30_000 } = {}) {
      if (!started) return;
      started = false;
      repo.pauseLocking();
      // agenda.stop() releases jobs locked but not started; running ones carry on and
      // release their lock when they finish (drain() would leave the former locked).
      await agenda.stop(false);
      const deadline = Date.now() + timeoutMs;
      while (repo.heldCount() > 0 && Date.now() < deadline) await sleep(10);
      if (repo.heldCount() > 0) {
        log.warn({ running: repo.heldCount() }, 'job runner stopped with jobs still running; their locks expire on their own');
      }
    },

    pruneFinished(beforeMs, o) {
      return repo.pruneFinished(beforeMs, o);
    },

    async runDue({ timeoutMs = 10_000 } = {}) {
      if (!started) throw new Error('runDue: the job runner is not started');
      let ran = 0;
      const onComplete = () => {
        ran++;
      };
      agenda.on('complete', onComplete);
      try {
        await repo.refreshHeldLocks();
        const defs = [...lifetimes].map(([name, lockLifetimeMs]) => ({ name, lockLifetimeMs }));
        const deadline = Date.now() + timeoutMs;
        let lastKick = -Infinity;
        for (;;) {
          // stop() was called meanwhile: nothing here will run what is left.
          if (!started) return { ran, timedOut: false };
          // Table first, then our own locks: a job moves from "free" to "held" with the
          // held entry written before the UPDATE, so this order cannot miss one in between.
          const due = await repo.dueJobNames(defs);
          const busy = repo.busyCount(clock.nowMs());
          if (due.length === 0 && busy === 0) return { ran, timedOut: false };
          if (Date.now() >= deadline) {
            log.warn({ due, running: busy }, 'runDue timed out with jobs still due or running');
            return { ran, timedOut: true };
          }
          if (due.length > 0 && Date.now() - lastKick >= 50) {
            kick(due);
            lastKick = Date.now();
          }
          await sleep(10);
        }
      } finally {
        agenda.off('complete', onComplete);
      }
    },
  };
}
