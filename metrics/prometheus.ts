import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  CATEGORY_LABELS, CREDENTIAL_LABELS, DECISION_LABELS, ENVIRONMENT_STATES, HOST_RESOURCES, JOB_OUTCOMES, LEASE_STATES, METRIC_NAMES,
  WEBHOOK_OUTCOMES, labelOf, type JobOutcome, type Metrics, type StateSources, type WebhookOutcome,
} from '../lib/metrics.js';
import type { Logger } from '../lib/log.js';

/**
 * The Metrics port (lib/metrics.ts) on prom-client, and what `GET /metrics` serves
 * (issue 25, item 2). The only module that imports prom-client (a unit test checks).
 *
 * - Counters and histograms are updated as things happen, by the code that sees them
 *   through the port. The request counter's label objects are made once per combination
 *   and reused, so counting a request allocates nothing of ours.
 * - Gauges that are state in the store (environments, leases, the webhook queue, this
 *   host) are read at scrape time through the StateSources bin/ wires, at most once per
 *   `stateCacheMs` whatever the number of scrapers (one read in flight at a time); a failed
 *   read keeps the last values (logged) and the scrape still answers.
 * - Every gauge label value is set on every read, zeros included, so series never appear
 *   or disappear with the state.
 * - Node's and the process's default metrics (prom-client collectDefaultMetrics) are
 *   collected once per process into a registry of their own, shared by every service
 *   started in it (tests start many: each call would add its own GC observer).
 */
export interface PrometheusMetrics {
  metrics: Metrics;
  /** Where the store-backed gauges are read from (set once the domains exist). */
  readStateFrom(sources: StateSources): void;
  /** The exposition: Prometheus text format and its Content-Type. */
  scrape(): Promise<{ contentType: string; body: string }>;
}

export interface PrometheusOptions {
  log?: Logger;
  /** How long store-backed gauges are reused before the next scrape reads them again (default 1 s). */
  stateCacheMs?: number;
  /** Include Node's and the process's default metrics (default true). */
  defaultMetrics?: boolean;
  /** Monotonic ms (tests). */
  now?: () => number;
}

/** Time the gateway adds to a request: tenths of a millisecond to a second. */
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** A human deciding: seconds to the 10-minute default expiry and beyond. */
const APPROVAL_BUCKETS = [0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600];
/** One group commit: a fraction of a millisecond (SQLite) to the 5 s commit deadline. */
const AUDIT_BUCKETS = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

let processDefaults: Registry | null = null;
function defaultRegistry(): Registry {
  if (!processDefaults) {
    processDefaults = new Registry();
    collectDefaultMetrics({ register: processDefaults });
  }
  return processDefaults;
}

type RequestLabels = { decision: string; category: string; credential: string };

export function createPrometheusMetrics(opts: PrometheusOptions = {}): PrometheusMetrics {
  const registry = new Registry();
  const registers = [registry];
  const defaults = opts.defaultMetrics === false ? null : defaultRegistry();
  const now = opts.now ?? (() => performance.now());
  const stateCacheMs = opts.stateCacheMs ?? 1000;

  const requests = new Counter({
    name: METRIC_NAMES.requests, registers, labelNames: ['decision', 'category', 'credential'] as const,
    help: 'Requests through the gateway pipeline, by policy decision, action category (none: no credential) and credential kind',
  });
  const overhead = new Histogram({
    name: METRIC_NAMES.requestOverhead, registers, buckets: OVERHEAD_BUCKETS,
    help: 'Time the gateway adds to a request (its stages and the audit commit): upstream time and time held for approval excluded',
  });
  const held = new Gauge({ name: METRIC_NAMES.held, registers, help: 'Requests held open in this process, waiting for a human decision' });
  const approvalWait = new Histogram({
    name: METRIC_NAMES.approvalWait, registers, buckets: APPROVAL_BUCKETS,
    help: 'How long a held request waited, from its hold to the decision or expiry',
  });
  const auditCommit = new Histogram({
    name: METRIC_NAMES.auditCommit, registers, buckets: AUDIT_BUCKETS,
    help: 'Time from handing an audit entry to the writer until it is committed (what an answer waits for)',
  });
  const webhookDeliveries = new Counter({
    name: METRIC_NAMES.webhookDeliveries, registers, labelNames: ['outcome'] as const,
    help: 'Webhook delivery attempts by outcome (delivered, retry, failed: retries over, cancelled: endpoint removed)',
  });
  const webhookQueue = new Gauge({ name: METRIC_NAMES.webhookQueueDepth, registers, help: 'Webhook events waiting for delivery (all processes; read from the store)' });
  const environments = new Gauge({
    name: METRIC_NAMES.environments, registers, labelNames: ['state'] as const,
    help: 'Environments by actual state, destroyed ones not counted (all hosts; read from the store)',
  });
  const hostCapacity = new Gauge({
    name: METRIC_NAMES.hostCapacity, registers, labelNames: ['resource'] as const,
    help: 'What this process\'s environment host offers placement (0 when it runs none)',
  });
  const hostAllocated = new Gauge({
    name: METRIC_NAMES.hostAllocated, registers, labelNames: ['resource'] as const,
    help: 'What the environments placed on this process\'s host hold of it',
  });
  const leases = new Gauge({
    name: METRIC_NAMES.browserLeases, registers, labelNames: ['state'] as const,
    help: 'Live browser leases by state (all processes; read from the store)',
  });
  const jobs = new Counter({
    name: METRIC_NAMES.jobs, registers, labelNames: ['job', 'outcome'] as const,
    help: 'Job runs in this process by job name and outcome',
  });

  for (const o of WEBHOOK_OUTCOMES) webhookDeliveries.inc({ outcome: o }, 0);
  for (const s of ENVIRONMENT_STATES) environments.set({ state: s }, 0);
  for (const s of LEASE_STATES) leases.set({ state: s }, 0);
  for (const r of HOST_RESOURCES) {
    hostCapacity.set({ resource: r }, 0);
    hostAllocated.set({ resource: r }, 0);
  }
  held.set(0);

  // decision → category → credential → the label object, made on first use.
  const labelCache = new Map<string, Map<string, Map<string, RequestLabels>>>();
  function requestLabels(decision: string, category: string | null | undefined, credential: string): RequestLabels {
    let byCategory = labelCache.get(decision);
    if (!byCategory) {
      const d = labelOf(decision, DECISION_LABELS);
      if (d !== decision) return { decision: d, category: labelOf(category, CATEGORY_LABELS), credential: labelOf(credential, CREDENTIAL_LABELS) };
      labelCache.set(decision, (byCategory = new Map()));
    }
    const c = category ?? 'none';
    let byCredential = byCategory.get(c);
    if (!byCredential) {
      if (labelOf(c, CATEGORY_LABELS) !== c) return { decision, category: 'other', credential: labelOf(credential, CREDENTIAL_LABELS) };
      byCategory.set(c, (byCredential = new Map()));
    }
    let labels = byCredential.get(credential);
    if (!labels) {
      if (labelOf(credential, CREDENTIAL_LABELS) !== credential) return { decision, category: c, credential: 'other' };
      byCredential.set(credential, (labels = Object.freeze({ decision, category: c, credential })));
    }
    return labels;
  }
  const jobSeen = new Set<string>();

  const metrics: Metrics = {
    requestDone(decision, category, credential, overheadSeconds) {
      requests.inc(requestLabels(decision, category, credential));
      if (overheadSeconds >= 0 && Number.isFinite(overheadSeconds)) overhead.observe(overheadSeconds);
    },
    holdStarted() {
      held.inc();
    },
    holdEnded(waitSeconds) {
      held.dec();
      if (waitSeconds !== null && waitSeconds >= 0 && Number.isFinite(waitSeconds)) approvalWait.observe(waitSeconds);
    },
    auditCommitted(seconds) {
      if (seconds >= 0 && Number.isFinite(seconds)) auditCommit.observe(seconds);
    },
    webhookDelivery(outcome: WebhookOutcome) {
      webhookDeliveries.inc({ outcome: labelOf(outcome, WEBHOOK_OUTCOMES) });
    },
    jobDone(job: string, outcome: JobOutcome) {
      // Job names are the ones bin/ defines (a fixed set); both outcomes of a job exist from its first run.
      if (!jobSeen.has(job)) {
        jobSeen.add(job);
        for (const o of JOB_OUTCOMES) jobs.inc({ job, outcome: o }, 0);
      }
      jobs.inc({ job, outcome: labelOf(outcome, JOB_OUTCOMES) });
    },
  };

  let sources: StateSources | null = null;
  let readAt = -Infinity;
  let reading: Promise<void> | null = null;

  async function readState(s: StateSources): Promise<void> {
    const [envs, leaseCounts, depth, host] = await Promise.all([
      s.environmentsByState(), s.browserLeasesByState(), s.webhookQueueDepth(), s.host(),
    ]);
    for (const st of ENVIRONMENT_STATES) environments.set({ state: st }, Number(envs[st] ?? 0));
    for (const st of LEASE_STATES) leases.set({ state: st }, Number(leaseCounts[st] ?? 0));
    webhookQueue.set(Number(depth));
    for (const r of HOST_RESOURCES) {
      hostCapacity.set({ resource: r }, Number(host?.capacity[r] ?? 0));
      hostAllocated.set({ resource: r }, Number(host?.allocated[r] ?? 0));
    }
  }

  /** Reads the store-backed gauges when the last read is older than stateCacheMs; one read at a time. */
  function refresh(): Promise<void> {
    if (!sources) return Promise.resolve();
    if (reading) return reading;
    if (now() - readAt < stateCacheMs) return Promise.resolve();
    const s = sources;
    reading = readState(s)
      .catch((err: unknown) => {
        opts.log?.warn({ err_code: (err as { code?: string }).code ?? 'unknown' }, 'metrics: store-backed gauges could not be read; the last values are served');
      })
      .finally(() => {
        // A failed read waits its turn too: a store that is down is not asked on every scrape.
        readAt = now();
        reading = null;
      });
    return reading;
  }

  return {
    metrics,
    readStateFrom(s) {
      sources = s;
      readAt = -Infinity;
    },
    async scrape() {
      await refresh();
      const own = await registry.metrics();
      const body = defaults ? `${await defaults.metrics()}\n${own}` : own;
      return { contentType: registry.contentType, body };
    },
  };
}
