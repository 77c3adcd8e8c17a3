import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { claimLoop } from '../lib/claim-loop.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/log.js';
import { noopMetrics, type Metrics } from '../lib/metrics.js';
import { withTx, type Db } from '../store/db.js';
import type { PruneOptions } from '../store/prune.js';
import { deliveriesStore, type DeliveryRow, type DeliveryStatus } from './deliveries.store.js';
import type { DeliveryTarget } from './endpoints.service.js';
import { eventsStore, type ClaimedEventRow } from './events.store.js';
import { onEnqueued } from './notifier.js';
import { nextAttemptAt } from './retry.js';
import { createWebhookSender, type SendResult, type WebhookSender } from './sender.js';
import { signatureHeader } from './signing.js';

/** decisions.md: 10 s per attempt. */
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;
/** Attempts running at once in one worker, all developers together. */
export const DEFAULT_MAX_IN_FLIGHT = 64;
/** Attempts running at once in one worker for one developer. */
export const DEFAULT_MAX_PER_DEVELOPER = 8;
/** A lease outlives the attempt's deadline by this much (the outcome write, a slow store). */
const LEASE_MARGIN_MS = 30_000;
/** MySQL deadlock / lock wait timeout, SQLite busy: the transaction can simply run again. */
function isConflict(err: unknown): boolean {
  const e = err as { code?: string; errno?: number } | null;
  return e?.errno === 1213 || e?.errno === 1205 || e?.code === 'ER_LOCK_DEADLOCK' || e?.code === 'ER_LOCK_WAIT_TIMEOUT' || e?.code === 'SQLITE_BUSY';
}

async function retryOnConflict<T>(fn: () => Promise<T>, tries = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= tries || !isConflict(err)) throw err;
      await new Promise((r) => setTimeout(r, 10 * i));
    }
  }
}

/** The candidates read per claim pass, as a multiple of the free slots. */
const CANDIDATE_FACTOR = 2;
/** Retries due within this are woken by a timer in this process; later ones by the sweep. */
const MAX_LOCAL_WAKE_MS = 10 * 60_000;

export interface DeliveryOptions {
  allowPrivateDestinations: boolean;
  timeoutMs?: number;
  /** How long a claim holds an event; default timeoutMs + 30 s. */
  leaseMs?: number;
  maxInFlight?: number;
  maxPerDeveloper?: number;
  /** GATEWAY_UPSTREAM_CA_FILE's PEM: trusted for endpoints' TLS on top of Node's roots, as the proxy does. */
  extraCa?: string | null;
  /** Injected for tests (the sender's DNS resolver, an alternative sender). */
  sender?: WebhookSender;
  resolve?: Parameters<typeof createWebhookSender>[0]['resolve'];
  /** The service's own ports (lib/egress-guard.ts). */
  forbiddenPorts?: Set<number>;
}

export interface DeliveryDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  /** The endpoint's current URL and signing secrets, read at send time; null when removed. */
  target: (developerId: string) => Promise<DeliveryTarget | null>;
  /** Counts attempts by outcome (gateway_webhook_deliveries_total, issue 25, item 2). */
  metrics?: Metrics;
}

/** One attempt, as GET /v1/webhook-deliveries shows it. */
export interface WebhookDelivery {
  id: string;
  event_id: string;
  event_type: string | null;
  url: string | null;
  attempted_at: string;
  status: DeliveryStatus;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  next_attempt_at: string | null;
}

export interface DeliveryStats {
  inFlight: number;
  attempts: number;
  delivered: number;
}

/**
 * The webhook delivery worker (service.md Delivery; decisions.md Webhook endpoint settings).
 *
 * Work comes from the outbox (webhook_events), never from memory, so nothing is lost
 * between a commit and an attempt:
 * - a claim is one conditional UPDATE that leases due events (`locked_until`,
 *   `lock_token`); several workers, in one process or many on one MySQL, never both
 *   take an event, and an event whose worker died is taken again once its lease passes
 *   (at least once: a receiver may see an event twice, with the same Service-Event-Id);
 * - it runs when this process commits an event (webhooks/notifier.ts, for latency), when
 *   a slot frees up while more is due, when a known retry falls due, and on the periodic
 *   sweep (jobs/deliver-webhooks.job.ts), which is what finds events other processes
 *   queued and what the test clock's runDue drives.
 *
 * Fairness: at most maxPerDeveloper attempts of one developer and maxInFlight in all run at
 * once; a claim skips developers at their cap, so a developer whose endpoint hangs until
 * the timeout holds its own slots only and every other developer's events keep flowing.
 *
 * Each attempt POSTs the stored body bytes to the endpoint's current URL, signed at send
 * time with every secret in force. 2xx: delivered. Anything else (non-2xx, a redirect,
 * the timeout, a transport error, a private destination): retried on the schedule of
 * webhooks/retry.ts, then `failed`. Every attempt is one webhook_deliveries row. The
 * endpoint gone at send time: the event is cancelled without an attempt.
 */
export function createWebhookDeliveryService(deps: DeliveryDeps, opts: DeliveryOptions) {
  const { db, clock, log } = deps;
  const metrics = deps.metrics ?? noopMetrics;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  const leaseMs = opts.leaseMs ?? timeoutMs + LEASE_MARGIN_MS;
  const maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  const maxPerDeveloper = Math.min(opts.maxPerDeveloper ?? DEFAULT_MAX_PER_DEVELOPER, maxInFlight);
  const sender = opts.sender ?? createWebhookSender({ allowPrivateDestinations: opts.allowPrivateDestinations, timeoutMs, extraCa: opts.extraCa, resolve: opts.resolve, forbiddenPorts: opts.forbiddenPorts });

  const inFlight = new Map<string, Promise<void>>();
  const perDeveloper = new Map<string, number>();
  const shutdown = new AbortController();
  // One listener per attempt in flight (the sender's), up to maxInFlight.
  setMaxListeners(0, shutdown.signal);
  const stats: DeliveryStats = { inFlight: 0, attempts: 0, delivered: 0 };
  let started = false;
  let closed = false;
  let unsubscribe: (() => void) | null = null;
  /** The last pass left due work behind (caps reached): a freed slot should claim again. */
  let backlog = false;

  const developersAtCap = (): string[] => [...perDeveloper].filter(([, n]) => n >= maxPerDeveloper).map(([d]) => d);

  function take(developerId: string): void {
    perDeveloper.set(developerId, (perDeveloper.get(developerId) ?? 0) + 1);
  }
  function release(developerId: string): void {
    const n = (perDeveloper.get(developerId) ?? 1) - 1;
    if (n <= 0) perDeveloper.delete(developerId);
    else perDeveloper.set(developerId, n);
  }

  /** Claims what is due and fits the caps, and starts those attempts; loops while more fits. */
  async function claimAndStart(): Promise<void> {
    let raced = 0;
    for (;;) {
      if (closed) return;
      const free = maxInFlight - inFlight.size;
      if (free <= 0) {
        backlog = true;
        return;
      }
      const now = clock.nowMs();
      const skip = developersAtCap();
      const limit = free * CANDIDATE_FACTOR;
      const candidates = await eventsStore.dueCandidates(db, now, limit, skip);
      if (candidates.length === 0) {
        // Developers skipped at their cap may still have due events: look again when a slot frees.
        backlog = skip.length > 0;
        return;
      }
      const counts = new Map(perDeveloper);
      const chosen: string[] = [];
      for (const c of candidates) {
        if (chosen.length >= free) break;
        const n = counts.get(c.developer_id) ?? 0;
        if (n >= maxPerDeveloper) continue;
        counts.set(c.developer_id, n + 1);
        chosen.push(c.id);
      }
      const token = randomBytes(16).toString('hex');
      const claimed = await retryOnConflict(() => eventsStore.claim(db, chosen, now, now + leaseMs, token));
      if (claimed.length > 0) await startAll(claimed, token);
      // Other workers took what we chose: look again (their rows are leased now), but do not
      // spin if that keeps happening; the next trigger or sweep comes soon enough.
      if (claimed.length === 0) {
        if (++raced >= 5) {
          backlog = true;
          return;
        }
        continue;
      }
      raced = 0;
      // Fewer candidates than asked for and all of them taken: nothing more is due now,
      // except for the developers this round skipped. (Judged by this round's skip list,
      // not by who is at the cap now: a slot that freed during the round must not hide
      // the skipped developer's due events.)
      if (candidates.length < limit && chosen.length === candidates.length) {
        backlog = skip.length > 0;
        return;
      }
    }
  }

  /** Reads each developer's endpoint once (at send time) and starts the attempts. */
  async function startAll(rows: ClaimedEventRow[], token: string): Promise<void> {
    for (const r of rows) take(r.developer_id);
    const byDeveloper = new Map<string, ClaimedEventRow[]>();
    for (const r of rows) {
      const list = byDeveloper.get(r.developer_id);
      if (list) list.push(r);
      else byDeveloper.set(r.developer_id, [r]);
    }
    // Reserve the slots before the reads, so a concurrent pass cannot overfill them.
    const placeholders = new Map<string, () => void>();
    for (const r of rows) {
      let settle!: () => void;
      inFlight.set(r.id, new Promise<void>((res) => (settle = res)));
      placeholders.set(r.id, settle);
    }
    stats.inFlight = inFlight.size;
    await Promise.all(
      [...byDeveloper].map(async ([developerId, events]) => {
        let target: DeliveryTarget | null = null;
        let lookupFailed = false;
        try {
          target = await deps.target(developerId);
        } catch (err) {
          lookupFailed = true;
          log.error({ err, developer_id: developerId }, 'webhooks: could not read the endpoint; the lease will expire and the events be retried');
        }
        for (const row of events) {
          // The developer's slot is for the request to their endpoint: it frees as soon as
          // the answer is in, not after the outcome is written (that is ours to wait for).
          let slotHeld = true;
          const freeSlot = () => {
            if (!slotHeld) return;
            slotHeld = false;
            release(row.developer_id);
            slotFreed();
          };
          const run = lookupFailed
            ? Promise.resolve()
            : target
              ? attempt(row, token, target, freeSlot)
              : cancel(row, token);
          const settle = placeholders.get(row.id)!;
          const tracked = run
            .catch((err: unknown) => log.error({ err, event_id: row.id }, 'webhooks: attempt bookkeeping failed; the lease will expire and the event be retried'))
            .finally(() => {
              inFlight.delete(row.id);
              freeSlot();
              stats.inFlight = inFlight.size;
              settle();
              slotFreed();
            });
          inFlight.set(row.id, tracked);
        }
      }),
    );
  }

  async function cancel(row: ClaimedEventRow, token: string): Promise<void> {
    if ((await eventsStore.cancelClaimed(db, row.id, token)) > 0) metrics.webhookDelivery('cancelled');
  }

  async function attempt(row: ClaimedEventRow, token: string, target: DeliveryTarget, freeSlot: () => void): Promise<void> {
    // Claimed just as this worker stops: hand it back for another worker (or the restart).
    if (shutdown.signal.aborted) {
      await eventsStore.releaseClaim(db, row.id, token);
      return;
    }
    const attemptedAt = clock.nowMs();
    // Wall-clock seconds: receivers check `t` against their own clock (the same as service
    // time except under an advanced test clock).
    const t = Math.floor(Date.now() / 1000);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'service-signature': signatureHeader(target.secrets, t, row.body),
      'service-event-id': row.id,
      'user-agent': 'agent-gateway-webhooks/1',
    };
    let result: SendResult;
    try {
      result = await sender.send(target.url, headers, row.body, shutdown.signal);
    } catch (err) {
      log.error({ err, event_id: row.id }, 'webhooks: sender threw');
      result = { ok: false, statusCode: null, error: 'connection_error', durationMs: 0 };
    }
    freeSlot();
    stats.attempts++;
    const finishedAt = clock.nowMs();
    const attempts = row.attempts + 1;
    const next = result.ok ? null : nextAttemptAt(row.created_at, attempts, finishedAt);
    metrics.webhookDelivery(result.ok ? 'delivered' : next === null ? 'failed' : 'retry');
    const delivery: DeliveryRow = {
      id: newId('dlv'),
      event_id: row.id,
      developer_id: row.developer_id,
      url: target.url.slice(0, 2048),
      attempted_at: attemptedAt,
      status: result.ok ? 'succeeded' : 'failed',
      status_code: result.statusCode,
      error: result.error,
      duration_ms: result.durationMs,
      next_attempt_at: next,
    };
    const lost = await retryOnConflict(() => withTx(db, async (trx) => {
      const n = await eventsStore.finish(trx, row.id, token, {
        status: result.ok ? 'delivered' : next === null ? 'failed' : 'pending',
        attempts,
        next_attempt_at: next,
        last_attempt_at: attemptedAt,
        delivered_at: result.ok ? finishedAt : null,
      });
      // The lease moved on (it expired and another worker took the event, or the endpoint
      // was removed): the attempt still happened, but this worker schedules nothing.
      if (n === 0) delivery.next_attempt_at = null;
      await deliveriesStore.insert(trx, delivery);
      return n;
    }));
    if (lost === 0) {
      const now = await eventsStore.get(db, row.id);
      log.warn({ event_id: row.id, status: now?.status, mine: token, holder: now?.lock_token ?? null, locked_until: now?.locked_until }, 'webhooks: the lease on this event moved on during the attempt; its outcome was logged but not applied');
    }
    if (result.ok) stats.delivered++;
    if (delivery.next_attempt_at !== null) loop.wakeAt(delivery.next_attempt_at);
  }

  /**
   * A slot freed: claim again if the last pass left work behind, or if a pass is running
   * (its skip list and free count may predate this slot; one more round settles it).
   */
  function slotFreed(): void {
    if (!closed && (backlog || loop.running)) void pump();
  }

  // A retry due within MAX_LOCAL_WAKE_MS gets a timer of this process's (the sweep covers the
  // rest); a pass that failed is tried again a second later.
  const loop = claimLoop({
    pass: claimAndStart,
    onError: (err) => log.error({ err }, 'webhooks: claiming due events failed; trying again in a second'),
    retryAfterErrorMs: 1_000,
    clock,
    maxLocalWakeMs: MAX_LOCAL_WAKE_MS,
  });
  const pump = loop.pump;

  function toDelivery(r: DeliveryRow & { event_type: string | null }): WebhookDelivery {
    return {
      id: r.id,
      event_id: r.event_id,
      event_type: r.event_type,
      url: r.url,
      attempted_at: iso(r.attempted_at)!,
      status: r.status,
      status_code: r.status_code,
      error: r.error,
      duration_ms: r.duration_ms,
      next_attempt_at: iso(r.next_attempt_at),
    };
  }

  return {
    /** Starts listening for this process's commits and takes whatever is already due. */
    start(): void {
      if (started || closed) return;
      started = true;
      loop.start();
      unsubscribe = onEnqueued(() => {
        void pump();
      });
      void pump();
    },

    /**
     * The periodic sweep: claims everything due (up to the caps) and waits for the attempts
     * running in this worker, so the test clock's runDue returns with them done.
     */
    async sweep(): Promise<void> {
      await pump();
      await Promise.allSettled([...inFlight.values()]);
    },

    /** Nudges the worker (what the notifier does); mainly for tests and benchmarks. */
    nudge(): Promise<void> {
      return pump();
    },

    stats(): Readonly<DeliveryStats> {
      return { ...stats };
    },

    /** Events waiting for delivery, due or not, in every process (gateway_webhook_queue_depth). */
    queueDepth(): Promise<number> {
      return eventsStore.countPending(db);
    },

    /**
     * Retention (GATEWAY_WEBHOOK_RETENTION_DAYS): deletes events that are over (delivered,
     * failed, cancelled) and were created before `beforeMs`, each batch's delivery
     * attempts first (the list never shows an attempt without its event). Pending events
     * stay. Returns the events deleted.
     */
    async prune(beforeMs: number, o: PruneOptions = {}): Promise<number> {
      return eventsStore.pruneFinished(db, beforeMs, {
        ...o,
        beforeDelete: async (ids) => {
          await deliveriesStore.deleteForEvents(db, ids, { batchSize: o.batchSize });
        },
      });
    },

    /** GET /v1/webhook-deliveries: the developer's attempts, newest first. */
    async list(developerId: string, q: { eventId?: string; status?: DeliveryStatus; limit: number; after: string | null }): Promise<WebhookDelivery[]> {
      const rows = await deliveriesStore.list(db, developerId, q);
      return rows.map(toDelivery);
    },

    /**
     * Stops claiming, aborts the attempts in flight (each is recorded as a failed attempt,
     * error `shutdown`, and retried on the schedule) and waits for their records. Call it
     * before the store closes.
     */
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      unsubscribe?.();
      const stopped = loop.stop();
      shutdown.abort(new Error('webhook delivery stopped'));
      await stopped;
      await Promise.allSettled([...inFlight.values()]);
      await sender.close();
    },
  };
}

export type WebhookDeliveryService = ReturnType<typeof createWebhookDeliveryService>;
