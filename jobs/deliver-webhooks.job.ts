import type { JobRunner } from './runner.js';

export const DELIVER_WEBHOOKS_JOB = 'deliver-webhooks';
export const DELIVER_WEBHOOKS_EVERY_MS = 5_000;
/**
 * How long another process waits before it runs the sweep itself when the process that
 * holds the job's lock died (a crash mid-sweep). Short on purpose: with agenda's default
 * (10 minutes) one crashed worker would stall every other process's retries that long. A
 * sweep takes at most about one attempt deadline (10 s); if one ever outlives this and a
 * second sweep starts, nothing breaks: claims are atomic.
 */
export const DELIVER_WEBHOOKS_LOCK_MS = 30_000;

/**
 * The periodic sweep of webhook delivery: takes every due outbox event (retries, and
 * events other processes queued) and waits for those attempts, so the test clock's runDue
 * performs a retry that an advance made due before the advance returns. Events this
 * process commits do not wait for it: the delivery worker is told at commit.
 */
export async function scheduleDeliverWebhooks(jobs: JobRunner, delivery: { sweep(): Promise<void> }, everyMs = DELIVER_WEBHOOKS_EVERY_MS): Promise<void> {
  jobs.define(DELIVER_WEBHOOKS_JOB, () => delivery.sweep(), { retry: false, lockLifetimeMs: DELIVER_WEBHOOKS_LOCK_MS });
  await jobs.every(DELIVER_WEBHOOKS_JOB, everyMs, {});
}
