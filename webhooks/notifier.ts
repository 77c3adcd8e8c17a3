import { EventEmitter } from 'node:events';

/**
 * In-process signal "an event was queued and its transaction committed", so this
 * process's delivery worker makes the first attempt at once instead of at the next sweep
 * (the latency target: p50 < 200 ms from creation to first attempt).
 *
 * It is only a hint. The outbox row is the truth: a worker in another process learns of
 * the event from its periodic sweep (jobs/deliver-webhooks.job.ts), and a lost signal
 * costs latency, never an event. Process-wide on purpose: enqueueEvent only has the
 * caller's transaction, and a worker told about an event of another database (several
 * services in one test process) just finds nothing due.
 */
const signal = new EventEmitter();
signal.setMaxListeners(0);

export interface EnqueuedNotice {
  eventId: string;
  developerId: string;
}

export function announceEnqueued(notice: EnqueuedNotice): void {
  signal.emit('enqueued', notice);
}

/** Returns the unsubscribe function. */
export function onEnqueued(listener: (notice: EnqueuedNotice) => void): () => void {
  signal.on('enqueued', listener);
  return () => signal.off('enqueued', listener);
}
