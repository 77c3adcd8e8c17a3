import Joi from 'joi';
import { parseDatabaseUrl, type DbTarget } from '../store/db.js';

/**
 * The operating contract (decisions.md): defaults, then process.env, validated once at
 * boot and frozen. A bad value stops start-up with a message naming the variable.
 */
export interface Config {
  databaseUrl: string;
  database: DbTarget;
  dataDir: string;
  host: string;
  apiPort: number;
  proxyPort: number;
  /** Null when BASE_URL is unset: it is then derived from HOST and the bound API port. */
  baseUrl: string | null;
  masterKey: Buffer | null;
  bootstrapApiKey: string | null;
  upstreamCaFile: string | null;
  upstreamOverrides: Readonly<Record<string, { host: string; port: number }>>;
  allowPrivateUpstreams: boolean;
  testClock: boolean;
  /** GATEWAY_WEBHOOK_TIMEOUT_MS: deadline of one webhook delivery attempt (decisions.md: 10 s). */
  webhookTimeoutMs: number;
  /** GATEWAY_UPSTREAM_TIMEOUT_MS: how long the gateway waits for an upstream's answer to start (then 504 upstream_timeout). */
  upstreamTimeoutMs: number;
  /** Retention (docs/retention.md), in days. */
  retention: {
    /** GATEWAY_WEBHOOK_RETENTION_DAYS: webhook events that are over, with their delivery attempts (default 30). */
    webhookDays: number;
    /** GATEWAY_JOB_RETENTION_DAYS: finished jobs, fired or cancelled wakeups (default 7). */
    jobDays: number;
    /** GATEWAY_AUDIT_RETENTION_DAYS: the audit log's oldest entries; null (unset): kept forever. */
    auditDays: number | null;
  };
  runtime: 'process' | 'qemu' | 'none';
  /** The local environment host (issue 12; docs/environments.md). */
  envHost: {
    /** GATEWAY_RUNTIME_INSECURE: start the host even where the machine cannot isolate (said loudly). */
    insecure: boolean;
    /** GATEWAY_HOST_ID: stable id of this host (default: generated once into DATA_DIR/host-id). */
    id: string | null;
    /** GATEWAY_HOST_CPUS / GATEWAY_HOST_MEMORY_MIB: capacity offered to placement (defaults in docs). */
    cpus: number | null;
    memoryMib: number | null;
    /** GATEWAY_ENVIRONMENTS_DIR: data disks and /run/service trees (default DATA_DIR/environments). */
    environmentsDir: string | null;
    /** GATEWAY_CGROUP_ROOT: where the cgroup trees are mounted (default /sys/fs/cgroup). */
    cgroupRoot: string | null;
    /** GATEWAY_DISK_PREALLOCATE: environments' data disk images take their whole size at creation (default true; false: sparse, the host may overcommit). */
    preallocateDisks: boolean;
    /** GATEWAY_SANDBOX_POOL: process sandboxes kept started ahead for environments' first starts (default 1; 0: none). */
    sandboxPool: number;
    /** GATEWAY_CGROUP_FAVOR_DYNMODS: remount cgroup2 with favordynmods at the host's start (default true; hosts/cgroups.ts). */
    favorDynmods: boolean;
    /** GATEWAY_QEMU_IMAGE_DIR: where the qemu runtime builds and keeps guest images (default DATA_DIR/vm-image). */
    qemuImageDir: string | null;
    /** GATEWAY_HOST_RPC_PORT: where the host serves exec and files to other processes (0: any free port). */
    rpcPort: number;
    /** GATEWAY_HOST_RPC_URL: the address other processes use for it (default http://HOST:port). */
    rpcUrl: string | null;
  };
  google: { clientId: string | null; clientSecret: string | null; authUrl: string; tokenUrl: string; revokeUrl: string };
  slack: { clientId: string | null; clientSecret: string | null; authUrl: string; tokenUrl: string; revokeUrl: string };
  chromiumPath: string;
  /** Browser lease concurrency (service.md, Browser limits): GATEWAY_BROWSER_LEASES_PER_DEVELOPER / _PER_END_USER. */
  browserLimits: { perDeveloper: number; perEndUser: number };
  /** GATEWAY_BROWSER_PAGES_PER_LEASE: pages (tabs, popups) one lease may have open at once (issue 23). */
  browserPagesPerLease: number;
  /** GATEWAY_BROWSER_POOL_SIZE: sandboxed browsers started ahead for environments' first leases, from a host's first lease on (issue 29; ~125 MiB of its own each; 0: none). */
  browserPoolSize: number;
  /**
   * GATEWAY_HEALTH_PORT: /healthz and /readyz on a port of their own (issue 25). `gateway host`
   * (no API port) serves them there, 8082 when unset; `gateway start` serves them on the API
   * port, and also here when it is set. 0 picks a free port.
   */
  healthPort: number | null;
  /**
   * GATEWAY_REQUEST_BUFFER_MIB (default 64) and GATEWAY_REQUEST_BUFFER_TOTAL_MIB (default 512):
   * bytes of request bodies the gateway keeps in memory at once for one environment and for
   * all (held for approval, scanned, decoded); past either, a body to hold is refused 413
   * (proxy/body-budget.ts).
   */
  requestBuffer: { perEnvironmentBytes: number; totalBytes: number };
  /** GATEWAY_SHUTDOWN_GRACE_SECS (default 30): how long SIGTERM lets requests under way finish. */
  shutdownGraceMs: number;
  /** GATEWAY_HOST_HEARTBEAT_SECS (default 5): how often an environment host writes its heartbeat to the store. */
  hostHeartbeatMs: number;
  /**
   * GATEWAY_HOST_OFFLINE_SECS (default 30; more than the heartbeat): a host silent this long is
   * offline for every node (its environments answer 503 host_unavailable, docs/deploy.md).
   */
  hostOfflineMs: number;
  logLevel: string;
}

/** The default store: DATA_DIR/gateway.sqlite (`./data/gateway.sqlite` with DATA_DIR unset, as before). */
export function defaultDatabaseUrl(dataDir: string): string {
  const dir = dataDir.replace(/\/+$/, '') || '/';
  return `sqlite:${dir === '/' ? '' : dir}/gateway.sqlite`;
}

/**
 * The public base URL when BASE_URL is unset: the API's address, with a wildcard bind
 * (0.0.0.0, ::) replaced by loopback, which is what a link printed on this machine can use.
 * `port` is the bound port when known (API_PORT=0 picks one at start).
 */
export function defaultBaseUrl(config: Pick<Config, 'baseUrl' | 'host' | 'apiPort'>, port: number = config.apiPort): string {
  if (config.baseUrl) return config.baseUrl;
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

const port = Joi.number().integer().min(0).max(65535);
const httpUrl = Joi.string().uri({ scheme: ['http', 'https'] });
/** A retention window: whole days, at least one, at most 100 years. */
const days = Joi.number().integer().min(1).max(36_500);
const bool = Joi.boolean().truthy('1', 'yes', 'on').falsy('0', 'no', 'off', '');

const schema = Joi.object({
  // Default: sqlite:<DATA_DIR>/gateway.sqlite (set below), so DATA_DIR alone moves all state.
  DATABASE_URL: Joi.string(),
  DATA_DIR: Joi.string().min(1).default('./data'),
  HOST: Joi.string().min(1).default('127.0.0.1'),
  API_PORT: port.default(8080),
  PROXY_PORT: port.default(8081),
  BASE_URL: httpUrl.allow(''),
  GATEWAY_MASTER_KEY: Joi.string().allow(''),
  GATEWAY_BOOTSTRAP_API_KEY: Joi.string().allow('').pattern(/^sk_[0-9a-f]{40}$/).messages({
    'string.pattern.base': 'must look like sk_<40 lowercase hex>',
  }),
  GATEWAY_UPSTREAM_CA_FILE: Joi.string().allow(''),
  GATEWAY_UPSTREAM_OVERRIDES: Joi.string().allow(''),
  GATEWAY_ALLOW_PRIVATE_UPSTREAMS: bool.default(false),
  GATEWAY_TEST_CLOCK: bool.default(false),
  GATEWAY_WEBHOOK_TIMEOUT_MS: Joi.number().integer().min(100).max(60_000).default(10_000),
  GATEWAY_UPSTREAM_TIMEOUT_MS: Joi.number().integer().min(100).max(600_000).default(60_000),
  GATEWAY_WEBHOOK_RETENTION_DAYS: days.default(30),
  GATEWAY_JOB_RETENTION_DAYS: days.default(7),
  GATEWAY_AUDIT_RETENTION_DAYS: days,
  GATEWAY_RUNTIME: Joi.string().valid('process', 'qemu', 'none').default('process'),
  GOOGLE_CLIENT_ID: Joi.string().allow(''),
  GOOGLE_CLIENT_SECRET: Joi.string().allow(''),
  SLACK_CLIENT_ID: Joi.string().allow(''),
  SLACK_CLIENT_SECRET: Joi.string().allow(''),
  GOOGLE_AUTH_URL: httpUrl.default('https://accounts.google.com/o/oauth2/v2/auth'),
  GOOGLE_TOKEN_URL: httpUrl.default('https://oauth2.googleapis.com/token'),
  GOOGLE_REVOKE_URL: httpUrl.default('https://oauth2.googleapis.com/revoke'),
  SLACK_AUTH_URL: httpUrl.default('https://slack.com/oauth/v2/authorize'),
  SLACK_TOKEN_URL: httpUrl.default('https://slack.com/api/oauth.v2.access'),
  SLACK_REVOKE_URL: httpUrl.default('https://slack.com/api/auth.revoke'),
  GATEWAY_RUNTIME_INSECURE: bool.default(false),
  GATEWAY_HOST_ID: Joi.string().pattern(/^host_[0-9a-z_-]{1,34}$/).messages({ 'string.pattern.base': 'must look like host_<up to 34 of a-z 0-9 _ ->' }),
  GATEWAY_HOST_CPUS: Joi.number().integer().min(1).max(100_000),
  GATEWAY_HOST_MEMORY_MIB: Joi.number().integer().min(256).max(1_000_000_000),
  GATEWAY_ENVIRONMENTS_DIR: Joi.string().min(1),
  GATEWAY_QEMU_IMAGE_DIR: Joi.string().min(1),
  GATEWAY_HOST_RPC_PORT: port.default(0),
  GATEWAY_CGROUP_ROOT: Joi.string().min(1),
  GATEWAY_DISK_PREALLOCATE: bool.default(true),
  GATEWAY_SANDBOX_POOL: Joi.number().integer().min(0).max(64).default(1),
  GATEWAY_CGROUP_FAVOR_DYNMODS: bool.default(true),
  GATEWAY_HOST_RPC_URL: httpUrl.allow(''),
  CHROMIUM_PATH: Joi.string().min(1).default('/usr/bin/chromium'),
  GATEWAY_BROWSER_LEASES_PER_DEVELOPER: Joi.number().integer().min(0).max(1_000_000).default(50),
  GATEWAY_BROWSER_LEASES_PER_END_USER: Joi.number().integer().min(0).max(1_000_000).default(5),
  GATEWAY_BROWSER_PAGES_PER_LEASE: Joi.number().integer().min(1).max(1000).default(10),
  GATEWAY_BROWSER_POOL_SIZE: Joi.number().integer().min(0).max(64).default(2),
  GATEWAY_HEALTH_PORT: port,
  GATEWAY_REQUEST_BUFFER_MIB: Joi.number().integer().min(1).max(1_048_576).default(64),
  GATEWAY_REQUEST_BUFFER_TOTAL_MIB: Joi.number().integer().min(Joi.ref('GATEWAY_REQUEST_BUFFER_MIB')).max(1_048_576).default(512),
  GATEWAY_SHUTDOWN_GRACE_SECS: Joi.number().integer().min(0).max(3600).default(30),
  GATEWAY_HOST_HEARTBEAT_SECS: Joi.number().integer().min(1).max(300).default(5),
  GATEWAY_HOST_OFFLINE_SECS: Joi.number().integer().max(3600).greater(Joi.ref('GATEWAY_HOST_HEARTBEAT_SECS')).default(30),
  LOG_LEVEL: Joi.string().valid('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent').default('info'),
}).unknown(true);

function parseOverrides(raw: string): Record<string, { host: string; port: number }> {
  const out: Record<string, { host: string; port: number }> = {};
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^([A-Za-z0-9.*-]+)=(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(item);
    if (!m || Number(m[3]) > 65535) {
      throw new ConfigError('GATEWAY_UPSTREAM_OVERRIDES', `"${item}" is not host=ip:port`);
    }
    out[m[1]!.toLowerCase()] = { host: m[2]!.replace(/^\[|\]$/g, ''), port: Number(m[3]) };
  }
  return out;
}

function nonEmpty(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  // An empty variable counts as unset (VAR= in a shell or a compose file means "default").
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const { value, error } = schema.validate(present, { abortEarly: true, convert: true });
  if (error) {
    const d = error.details[0]!;
    throw new ConfigError(String(d.path[0]), d.message.replace(/^"[^"]+" /, ''));
  }
  value.DATABASE_URL ??= defaultDatabaseUrl(value.DATA_DIR);
  const database = parseDatabaseUrl(value.DATABASE_URL);
  if (!database) {
    throw new ConfigError('DATABASE_URL', 'must be sqlite:<path> or mysql://user:pass@host:port/db');
  }
  let masterKey: Buffer | null = null;
  if (nonEmpty(value.GATEWAY_MASTER_KEY)) {
    const raw = value.GATEWAY_MASTER_KEY as string;
    masterKey = /^[A-Za-z0-9+/_-]+={0,2}$/.test(raw) ? Buffer.from(raw, 'base64') : Buffer.alloc(0);
    if (masterKey.length !== 32) throw new ConfigError('GATEWAY_MASTER_KEY', 'must be base64 of exactly 32 bytes');
  }
  const cfg: Config = {
    databaseUrl: value.DATABASE_URL,
    database,
    dataDir: value.DATA_DIR,
    host: value.HOST,
    apiPort: value.API_PORT,
    proxyPort: value.PROXY_PORT,
    baseUrl: nonEmpty(value.BASE_URL)?.replace(/\/+$/, '') ?? null,
    masterKey,
    bootstrapApiKey: nonEmpty(value.GATEWAY_BOOTSTRAP_API_KEY),
    upstreamCaFile: nonEmpty(value.GATEWAY_UPSTREAM_CA_FILE),
    upstreamOverrides: Object.freeze(parseOverrides(value.GATEWAY_UPSTREAM_OVERRIDES ?? '')),
    allowPrivateUpstreams: value.GATEWAY_ALLOW_PRIVATE_UPSTREAMS,
    testClock: value.GATEWAY_TEST_CLOCK,
    webhookTimeoutMs: value.GATEWAY_WEBHOOK_TIMEOUT_MS,
    upstreamTimeoutMs: value.GATEWAY_UPSTREAM_TIMEOUT_MS,
    retention: Object.freeze({
      webhookDays: value.GATEWAY_WEBHOOK_RETENTION_DAYS,
      jobDays: value.GATEWAY_JOB_RETENTION_DAYS,
      auditDays: value.GATEWAY_AUDIT_RETENTION_DAYS ?? null,
    }),
    runtime: value.GATEWAY_RUNTIME,
    envHost: Object.freeze({
      insecure: value.GATEWAY_RUNTIME_INSECURE,
      id: nonEmpty(value.GATEWAY_HOST_ID),
      cpus: value.GATEWAY_HOST_CPUS ?? null,
      memoryMib: value.GATEWAY_HOST_MEMORY_MIB ?? null,
      environmentsDir: nonEmpty(value.GATEWAY_ENVIRONMENTS_DIR),
      qemuImageDir: nonEmpty(value.GATEWAY_QEMU_IMAGE_DIR),
      rpcPort: value.GATEWAY_HOST_RPC_PORT,
      cgroupRoot: nonEmpty(value.GATEWAY_CGROUP_ROOT),
      preallocateDisks: value.GATEWAY_DISK_PREALLOCATE,
      sandboxPool: value.GATEWAY_SANDBOX_POOL,
      favorDynmods: value.GATEWAY_CGROUP_FAVOR_DYNMODS,
      rpcUrl: nonEmpty(value.GATEWAY_HOST_RPC_URL)?.replace(/\/+$/, '') ?? null,
    }),
    google: {
      clientId: nonEmpty(value.GOOGLE_CLIENT_ID),
      clientSecret: nonEmpty(value.GOOGLE_CLIENT_SECRET),
      authUrl: value.GOOGLE_AUTH_URL,
      tokenUrl: value.GOOGLE_TOKEN_URL,
      revokeUrl: value.GOOGLE_REVOKE_URL,
    },
    slack: {
      clientId: nonEmpty(value.SLACK_CLIENT_ID),
      clientSecret: nonEmpty(value.SLACK_CLIENT_SECRET),
      authUrl: value.SLACK_AUTH_URL,
      tokenUrl: value.SLACK_TOKEN_URL,
      revokeUrl: value.SLACK_REVOKE_URL,
    },
    chromiumPath: value.CHROMIUM_PATH,
    browserLimits: Object.freeze({ perDeveloper: value.GATEWAY_BROWSER_LEASES_PER_DEVELOPER, perEndUser: value.GATEWAY_BROWSER_LEASES_PER_END_USER }),
    browserPagesPerLease: value.GATEWAY_BROWSER_PAGES_PER_LEASE,
    browserPoolSize: value.GATEWAY_BROWSER_POOL_SIZE,
    healthPort: value.GATEWAY_HEALTH_PORT ?? null,
    requestBuffer: Object.freeze({ perEnvironmentBytes: value.GATEWAY_REQUEST_BUFFER_MIB * 1024 * 1024, totalBytes: value.GATEWAY_REQUEST_BUFFER_TOTAL_MIB * 1024 * 1024 }),
    shutdownGraceMs: value.GATEWAY_SHUTDOWN_GRACE_SECS * 1000,
    hostHeartbeatMs: value.GATEWAY_HOST_HEARTBEAT_SECS * 1000,
    hostOfflineMs: value.GATEWAY_HOST_OFFLINE_SECS * 1000,
    logLevel: value.LOG_LEVEL,
  };
  return Object.freeze(cfg);
}
