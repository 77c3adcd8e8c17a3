import type { JobRunner } from './runner.js';

export const DELIVER_SLACK_CARDS_JOB = 'deliver-slack-cards';
export const DELIVER_SLACK_CARDS_EVERY_MS = 5_000;
/** As deliver-webhooks: another process takes over soon after a crashed sweeper; claims are atomic anyway. */
export const DELIVER_SLACK_CARDS_LOCK_MS = 30_000;

/**
 * The periodic sweep of Slack cards (approval-channels/slack-delivery.service.ts): brings
 * due cards up to date (retries, and changes other processes committed) and waits for those
 * calls, so the test clock's runDue performs them before the advance returns. It also
 * forgets interactivity signatures too old to verify again. Changes this process commits
 * do not wait for it: the worker is told at commit.
 */
export async function scheduleDeliverSlackCards(
  jobs: JobRunner,
  slack: { sweep(): Promise<void>; pruneUsedSignatures(): Promise<number> },
  everyMs = DELIVER_SLACK_CARDS_EVERY_MS,
): Promise<void> {
  jobs.define(DELIVER_SLACK_CARDS_JOB, async () => {
    await slack.sweep();
    await slack.pruneUsedSignatures();
  }, { retry: false, lockLifetimeMs: DELIVER_SLACK_CARDS_LOCK_MS });
  await jobs.every(DELIVER_SLACK_CARDS_JOB, everyMs, {});
}
