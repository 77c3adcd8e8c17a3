/**
 * The retry schedule of webhook delivery (decisions.md, Webhook endpoint settings): after a
 * failed attempt, wait 5 s, 5 min, 30 min, 2 h, 5 h, 10 h; then one last attempt when the
 * event is 24 hours old (service.md Limits: retry window 24 hours); then the event is
 * `failed`. Pure: times are service-time ms, passed in.
 */
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export const RETRY_DELAYS_MS: readonly number[] = Object.freeze([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR]);
export const RETRY_WINDOW_MS = 24 * HOUR;

/**
 * When to try again after a failed attempt, or null when that attempt was the last one.
 *
 * `attemptsDone` counts the attempts made so far, the one that just failed included;
 * `failedAtMs` is when it failed. The delay after the n-th failure is RETRY_DELAYS_MS[n-1];
 * after the ladder, and whenever a delay would land past the window, the next attempt is
 * the last one, at createdAt + 24 h. An attempt made at or after that moment is final.
 */
export function nextAttemptAt(createdAtMs: number, attemptsDone: number, failedAtMs: number): number | null {
  const last = createdAtMs + RETRY_WINDOW_MS;
  if (failedAtMs >= last) return null;
  const delay = RETRY_DELAYS_MS[attemptsDone - 1];
  if (delay === undefined) return last;
  return Math.min(failedAtMs + delay, last);
}
