/**
 * The metrics port (issue 25, item 2; ARCHITECTURE.md "metrics are one `Metrics` port passed
 * in from `bin/`"). Domains and adapters call these narrow methods and never see the
 * metrics library; `metrics/prometheus.ts` implements them with prom-client and serves
 * `GET /metrics`. Every name and every label value lives in this file.
 *
 * PURE: no imports. Label values come from the fixed sets below only, never from a request
 * (no ids, hosts, paths or tokens): a value outside its set is counted as `other`, so a bug
 * cannot turn a label into an unbounded (or secret-bearing) series.
 */

/** The metric families, exactly as Prometheus sees them (docs/operations.md, Metrics). */
export const METRIC_NAMES = Object.freeze({
  requests: 'gateway_requests_total',
  requestOverhead: 'gateway_request_overhead_seconds',
  held: 'gateway_held_requests',
  approvalWait: 'gateway_approval_wait_seconds',
  auditCommit: 'gateway_audit_commit_seconds',
  webhookDeliveries: 'gateway_webhook_deliveries_total',
  webhookQueueDepth: 'gateway_webhook_queue_depth',
  environments: 'gateway_environments',
  hostCapacity: 'gateway_host_capacity',
  hostAllocated: 'gateway_host_allocated',
  browserLeases: 'gateway_browser_leases',
  jobs: 'gateway_jobs_total',
});

/** The policy verdict an audit entry records. */
export const DECISION_LABELS = ['allow', 'deny', 'ask'] as const;
/**
 * The policy categories (policy-engine/categories.ts CATEGORIES; lib/ may not import it, a
 * unit test keeps the two equal) and `none` for a request that used no credential.
 */
export const CATEGORY_LABELS = ['read', 'write', 'send', 'delete', 'pay', 'change_permission', 'none'] as const;
export const CREDENTIAL_LABELS = ['secret', 'connection', 'none'] as const;
/**
 * One webhook attempt: `delivered` (2xx), `retry` (failed, another attempt is scheduled),
 * `failed` (failed, the retry window is over), `cancelled` (the endpoint was removed: no attempt).
 */
export const WEBHOOK_OUTCOMES = ['delivered', 'retry', 'failed', 'cancelled'] as const;
export const JOB_OUTCOMES = ['success', 'failure'] as const;
/**
 * Environments by actual state. `destroyed` is not counted: it only ever grows, and counting
 * it would make every scrape read the whole history.
 */
export const ENVIRONMENT_STATES = ['pending', 'running', 'suspended', 'stopped', 'failed'] as const;
/** Live browser leases by state (`released` and `expired` are history, not counted). */
export const LEASE_STATES = ['pending', 'active', 'releasing'] as const;
/** What a host offers placement: its CPUs and its memory in bytes. */
export const HOST_RESOURCES = ['cpus', 'memory_bytes'] as const;

export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number];
export type JobOutcome = (typeof JOB_OUTCOMES)[number];

/** What the code being measured calls. Every method is cheap and never throws. */
export interface Metrics {
  /**
   * One request through the gateway pipeline, once its audit entry is written (or failed):
   * its verdict, category (null: no credential), credential kind, and the time the gateway
   * itself added, upstream time and time held for approval excluded.
   */
  requestDone(decision: string, category: string | null | undefined, credential: string, overheadSeconds: number): void;
  /** A request starts waiting for a human's decision. */
  holdStarted(): void;
  /** It stops waiting: `waitSeconds` until the decision or expiry, null when it ended without one (the agent left). */
  holdEnded(waitSeconds: number | null): void;
  /** An audit entry the proxy waits on was committed, `seconds` after it was handed over. */
  auditCommitted(seconds: number): void;
  webhookDelivery(outcome: WebhookOutcome): void;
  /** One run of a job; `job` is its defined name (a fixed set in bin/service.ts). */
  jobDone(job: string, outcome: JobOutcome): void;
}

/** Counts nothing: the default of every dependency, and the bench's "metrics off" variant. */
export const noopMetrics: Metrics = Object.freeze({
  requestDone() {},
  holdStarted() {},
  holdEnded() {},
  auditCommitted() {},
  webhookDelivery() {},
  jobDone() {},
});

/**
 * State read from the store at scrape time, each through its own domain's service or store
 * (bin/service.ts wires them); the metrics adapter caches the answers for a moment so
 * scraping cannot load the store. A count missing from a record is 0.
 */
export interface StateSources {
  environmentsByState(): Promise<Partial<Record<string, number>>>;
  browserLeasesByState(): Promise<Partial<Record<string, number>>>;
  /** Webhook events waiting for delivery (pending, due or not). */
  webhookQueueDepth(): Promise<number>;
  /** This process's environment host: what it offers and what its environments hold; null when it runs none. */
  host(): Promise<{ capacity: HostResources; allocated: HostResources } | null>;
}

export interface HostResources {
  cpus: number;
  memory_bytes: number;
}

/** `value` when it is one of `allowed`, else `other` (see the file comment). */
export function labelOf(value: string | null | undefined, allowed: readonly string[], dflt = 'none'): string {
  if (value === null || value === undefined) return dflt;
  return allowed.includes(value) ? value : 'other';
}
