import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { PruneOptions } from '../store/prune.js';
import type { JobContext, JobRunner } from './runner.js';

export const RETENTION_JOB = 'retention';
export const RETENTION_EVERY_MS = 60 * 60_000;
const DAY_MS = 24 * 60 * 60_000;

/** Deletes what a window no longer covers (rows older than beforeMs, service time); returns how many. */
export type Pruner = (beforeMs: number, opts: PruneOptions) => Promise<number>;

/**
 * What the retention job prunes, each through its domain's own service (docs/retention.md).
 * The job decides only *when* and *with which cutoff*; each domain decides *what* is over.
 */
export interface RetentionTargets {
  /** Webhook events that are over (delivered, failed, cancelled) and their delivery attempts. */
  webhooks: Pruner;
  /** Finished jobs of the job runner (agenda_jobs). */
  jobs: Pruner;
  /** Fired or cancelled wakeups. */
  wakeups: Pruner;
  /** The audit log's oldest entries, a verified prefix only (audit/audit.service.ts prune). */
  audit: Pruner;
  /**
   * Used or expired OAuth authorization states (the `state` of an authorize/callback
   * round trip). The hook for connections/, which comes with a later issue: there is no
   * such table yet. Its service plugs its pruner in here (bin/service.ts), on the job
   * window; nothing else changes.
   */
  authorizationStates?: Pruner;
}

/** Windows in days (config.retention); audit null: the audit log is kept forever. */
export interface RetentionWindows {
  webhookDays: number;
  jobDays: number;
  auditDays: number | null;
}

export type RetentionCounts = Partial<Record<keyof RetentionTargets, number>>;

/**
 * One retention run: every target with its own cutoff, one after the other (a backlog
 * is deleted in batches of 1,000 rows; `onBatch` runs between batches). One target
 * failing does not stop the others; the run then throws at the end, so the job records
 * the failure, and the next run (an hour later) tries again.
 */
export async function runRetention(
  targets: RetentionTargets,
  windows: RetentionWindows,
  deps: { clock: Clock; log: Logger; onBatch?: () => Promise<void> | void },
): Promise<RetentionCounts> {
  const now = deps.clock.nowMs();
  const plan: Array<[keyof RetentionTargets, Pruner | undefined, number | null]> = [
    ['webhooks', targets.webhooks, windows.webhookDays],
    ['jobs', targets.jobs, windows.jobDays],
    ['wakeups', targets.wakeups, windows.jobDays],
    ['authorizationStates', targets.authorizationStates, windows.jobDays],
    // Unset: the audit log is kept forever, and its tables are not touched at all.
    ['audit', targets.audit, windows.auditDays],
  ];
  const counts: RetentionCounts = {};
  const failed: string[] = [];
  for (const [name, prune, days] of plan) {
    if (!prune || days === null) continue;
    try {
      counts[name] = await prune(now - days * DAY_MS, { onBatch: deps.onBatch });
    } catch (err) {
      failed.push(name);
      deps.log.error({ err, target: name }, 'retention: pruning failed; the next run tries again');
    }
  }
  if (Object.values(counts).some((n) => n > 0)) deps.log.info({ pruned: counts }, 'retention: pruned');
  if (failed.length > 0) throw new Error(`retention: pruning failed for ${failed.join(', ')}`);
  return counts;
}

/**
 * Registers the retention job on the runner, every hour. One worker at a time runs it
 * (agenda's lock); a run that takes long keeps its lock fresh between batches.
 */
export async function scheduleRetention(
  jobs: JobRunner,
  deps: { targets: RetentionTargets; windows: RetentionWindows; clock: Clock; log: Logger },
  everyMs = RETENTION_EVERY_MS,
): Promise<void> {
  jobs.define(
    RETENTION_JOB,
    async (_data: unknown, ctx: JobContext) => {
      await runRetention(deps.targets, deps.windows, { clock: deps.clock, log: deps.log, onBatch: () => ctx.touch() });
    },
    { retry: false },
  );
  await jobs.every(RETENTION_JOB, everyMs, {});
}
