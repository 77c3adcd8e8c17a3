import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync } from 'node:fs';
import type { Config } from '../config/config.js';
import { ServiceClock } from '../lib/clock.js';
import { Keyring } from '../lib/crypto.js';
import type { Logger } from '../lib/log.js';
import { createDb, type Db } from '../store/db.js';
import { migrateLatest } from '../store/migrate.js';
import { createAccountsService, DEFAULT_DEVELOPER_ID } from '../accounts/accounts.service.js';
import { createTemplatesService } from '../environments/templates.service.js';
import { createEnvironmentsService } from '../environments/environments.service.js';
import { createWakeupsService } from '../environments/wakeups.service.js';
import { createSchedulesService } from '../environments/schedules.service.js';
import { createGatewayCache, type GatewayCache } from '../environments/egress.cache.js';
import { createSecretsService, type SecretsService } from '../environments/secrets.service.js';
import { createEgressService, type EgressService } from '../environments/egress.service.js';
import { secretsRouter } from '../api/routes/secrets.js';
import { egressRouter } from '../api/routes/egress.js';
import { mcpRouter } from '../api/routes/mcp.js';
import { createMcpServersService } from '../mcp/mcp-servers.service.js';
import { createApp, type RouteInfo } from '../api/app.js';
import { environmentsRouter } from '../api/routes/environments.js';
import { templatesRouter } from '../api/routes/templates.js';
import { testClockRouter } from '../api/routes/test-clock.js';
import { webhooksRouter } from '../api/routes/webhooks.js';
import { createWebhookEndpointsService } from '../webhooks/endpoints.service.js';
import { createWebhookDeliveryService } from '../webhooks/delivery.service.js';
import { scheduleDeliverWebhooks } from '../jobs/deliver-webhooks.job.js';
import { scheduleRetention } from '../jobs/retention.job.js';
import { createJobRunner } from '../jobs/runner.js';
import { loadMasterKey } from './master-key.js';
import { createApprovalsService, type ApprovalsService } from '../approvals/approvals.service.js';
import { createPoliciesService, type PoliciesService } from '../policies/policies.service.js';
import { policiesRouter } from '../api/routes/policies.js';
import { approvalsRouter, decisionRouter } from '../api/routes/approvals.js';
import { createAuditService, type AuditService } from '../audit/audit.service.js';
import { auditRouter } from '../api/routes/audit.js';
import { gatewayRouter } from '../api/routes/gateway.js';
import { connectionsRouter, oauthCallbackRouter } from '../api/routes/connections.js';
import { createOAuthClientsService } from '../connections/oauth-clients.service.js';
import { createAuthorizer } from '../connections/authorize.js';
import { createCallbackHandler } from '../connections/callback.js';
import { createConnectionsService } from '../connections/connections.service.js';
import { createStandIns } from '../connections/stand-ins.js';
import { createTokenVault } from '../connections/token-vault.js';
import type { Credential } from '../proxy/credentials.js';
import { Agent } from 'undici';
import { createEgressGuard } from '../lib/egress-guard.js';
import { upstreamSecureContext } from '../lib/upstream-trust.js';
import { PROVIDERS, type PlatformApp, type Provider } from '../connections/providers.js';
import { loadOrCreateCa } from '../certs/ca.js';
import { createLeafIssuer } from '../certs/leaf.js';
import { createSniCallback, prepareMitmCaDir } from '../certs/mitm.js';
import { createProxyCredentials } from '../environments/proxy-credentials.js';
import { createUpstream } from '../proxy/upstream.js';
import { canonicalHost } from '../lib/egress-guard.js';
import { createPipeline, type GatewayPorts } from '../proxy/pipeline.js';
import { startGatewayProxy } from '../proxy/gateway-proxy.js';
import type { Category, Scope } from '../policy-engine/categories.js';
import { readFileSync } from 'node:fs';
import { createRuntimeState, type RuntimeState } from '../environments/runtime.service.js';
import { createRuntimeService, type RuntimeService } from '../hosts/runtime.service.js';
import type { HostAgent } from '../hosts/host-agent.js';
import type { Surface } from '../hosts/driver.js';
import { runtimeRouter } from '../api/routes/runtime.js';
import { hostIdFor, startLocalHost } from './local-host.js';
import { createIdleLadder } from '../environments/idle.service.js';
import { createAgentService, type AgentService } from '../environments/agent.service.js';
import { createUsageService } from '../environments/usage.service.js';
import { createAgentVersionsService } from '../environments/agent-versions.service.js';
import { usageRouter } from '../api/routes/usage.js';
import { BROWSER_WEBSOCKETS, browserRouter, browserViewRouter } from '../api/routes/browser.js';
import { createProfilesService } from '../browser/profiles.service.js';
import { createLeasesService } from '../browser/leases.service.js';
import { ChromiumBroker } from '../browser/chromium-broker.js';
import { MAX_CONNECTIONS_PER_LEASE, relayCdp, type Relay } from '../browser/cdp-relay.js';
import { Cgroups } from '../hosts/cgroups.js';
import { relayViewer } from '../browser/viewer.js';
import { hostsStore } from '../hosts/hosts.store.js';
import { createMembersService } from '../accounts/members.service.js';
import { teamMembersRouter } from '../api/routes/team-members.js';
import { openapiRouter } from '../api/routes/openapi.js';
import { consoleRouter } from '../api/console/console.js';
import { createSlackChannelService } from '../approval-channels/slack-channel.service.js';
import { createSlackApi } from '../approval-channels/slack-api.js';
import { createSlackDeliveryService } from '../approval-channels/slack-delivery.service.js';
import { createSlackInteractivityService } from '../approval-channels/slack-interactivity.service.js';
import { approvalChannelsRouter } from '../api/routes/approval-channels.js';
import { slackRouter } from '../api/routes/slack.js';
import { scheduleDeliverSlackCards } from '../jobs/deliver-slack-cards.job.js';
import { WebSocketServer } from 'ws';
import { createHmac } from 'node:crypto';
import { constantTimeEqual } from '../lib/crypto.js';
import { hostToken, remoteHost, startNodeRpc } from '../hosts/rpc.js';
import { createNodesService } from '../hosts/nodes.service.js';
import { environmentsStore } from '../environments/environments.store.js';
import { fromJson } from '../store/db.js';
import { noopMetrics } from '../lib/metrics.js';
import { createPrometheusMetrics } from '../metrics/prometheus.js';
import { metricsRouter } from '../api/routes/metrics.js';
import { createReadiness } from '../lib/readiness.js';
import { healthRouter } from '../api/routes/health.js';
import { pendingMigrations } from '../store/migrate.js';
import { defaultBaseUrl, defaultDatabaseUrl } from '../config/config.js';
import { existsSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { errorHandler, noSuchRoute } from '../api/middleware/errors.js';
import express from 'express';

export interface RunningService {
  apiUrl: string;
  baseUrl: string;
  proxyUrl: string | null;
  db: Db;
  clock: ServiceClock;
  /** Proxy lookups: secretsForEnvironment(id) (placeholder index) and effectiveEgress(id) (host matcher). */
  secrets: SecretsService;
  egress: EgressService;
  /** Their shared snapshot cache; other domains call invalidateEnvironment/invalidateDeveloper after writes. */
  gatewayCache: GatewayCache;
  /** Approval requests are created by the gateway; tests call this directly. */
  approvals: ApprovalsService;
  policies: PoliciesService;
  /** The audit log: the proxy calls commit() once per request, before it finishes the answer; tests record() and flush(). */
  audit: AuditService;
  /** Every route of the management API, read from its routers. */
  routes: RouteInfo[];
  /** The key created because the store had none (first start without GATEWAY_BOOTSTRAP_API_KEY); null otherwise. Never logged. */
  firstStartKey: string | null;
  /** The local environment host (null with GATEWAY_RUNTIME=none or where it could not start). */
  host: HostAgent | null;
  /** The browser broker (tests reach a lease's context through it until the CDP relay lands). */
  browserBroker: ChromiumBroker;
  /** DATA_DIR (environments' disks live under DATA_DIR/environments unless GATEWAY_ENVIRONMENTS_DIR says otherwise). */
  dataDir: string;
  /** Exec and files inside environments. */
  runtime: RuntimeService;
  /** /healthz and /readyz on GATEWAY_HEALTH_PORT (always for `gateway host`); null when only the API port serves them. */
  healthUrl: string | null;
  /** Gateway exchanges under way (held ones included): tests wait on it instead of sleeping. */
  gatewayRequests(): number;
  /** The step a graceful stop under way waits on; null when no stop is under way. */
  stopStep(): string | null;
  /** The graceful stop (SIGTERM); calling it again returns the same promise. */
  close(): Promise<void>;
}

/** Inside every VM: the relay to the gateway listens here (hosts/drivers/process.ts). */
const VM_PROXY = '127.0.0.1:3128';
/** The close code a lease's CDP connection gets while a person holds the browser (4000-4999: the application's). */
const CDP_TAKEN_OVER = 4409;
/** Frames an agent may send its CDP endpoint (issue 23, item 2): past it the connection is closed. */
const CDP_MAX_FRAME = 16 * 1024 * 1024;
const VM_CA_FILE = '/run/service/ca.pem';

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * A request Node's parser refuses before Express sees it (an unknown method, a malformed
 * request line or header, headers over 16 KiB): answered like every other error of the API,
 * JSON `{error, message}` with 400 `invalid_request`, instead of Node's bare 400.
 */
function answerUnparsable(err: Error & { code?: string }, socket: import('node:stream').Duplex): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({
    error: 'invalid_request',
    message: err.code === 'HPE_HEADER_OVERFLOW' ? 'the request headers are too large' : 'the request could not be parsed as HTTP/1.1',
  });
  socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * The default store follows DATA_DIR (issue 25, item 8). Before, it was ./data/gateway.sqlite
 * whatever DATA_DIR said: a deployment that set DATA_DIR elsewhere and kept its store there
 * would now start on an empty one, so it is told where its old store is.
 */
function warnOfLegacyStore(config: Readonly<Config>, log: Logger): void {
  if (config.databaseUrl !== defaultDatabaseUrl(config.dataDir)) return;
  const legacy = resolvePath('data', 'gateway.sqlite');
  if (legacy === resolvePath(config.dataDir, 'gateway.sqlite') || !existsSync(legacy) || existsSync(resolvePath(config.dataDir, 'gateway.sqlite'))) return;
  log.warn({ legacy_store: legacy, store: resolvePath(config.dataDir, 'gateway.sqlite') },
    'the default store is now DATA_DIR/gateway.sqlite; a store exists at ./data/gateway.sqlite: move it there, or set DATABASE_URL=sqlite:./data/gateway.sqlite');
}

/** Deadline of one OAuth token call (exchange, refresh, revoke). */
const OAUTH_TIMEOUT_MS = 10_000;
/** A graceful stop still under way logs the step it waits on this often. */
const STOP_REPORT_MS = 15_000;

/** The composition root: builds every part from the config and starts it in this process. */
/**
 * `opts.api: false` is `gateway host`: the environment host, the gateway proxy its VMs
 * use and the job worker, without the management API (docs/environments.md, Several hosts).
 */
export async function startService(config: Readonly<Config>, log: Logger, opts: { api?: boolean; waitPollMs?: number; metrics?: boolean } = {}): Promise<RunningService> {
  mkdirSync(config.dataDir, { recursive: true });
  warnOfLegacyStore(config, log);
  const keyring = new Keyring([loadMasterKey(config.masterKey, config.dataDir, log)]);
  const clock = new ServiceClock();
  const db = await createDb(config.database);
  const applied = await migrateLatest(db);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');

  const accounts = createAccountsService({ db, clock });
  await accounts.ensureDeveloper();
  if (config.bootstrapApiKey) await accounts.ensureApiKey(DEFAULT_DEVELOPER_ID, config.bootstrapApiKey);
  // A fresh store and no GATEWAY_BOOTSTRAP_API_KEY: a first key, shown once by `gateway start`.
  const firstStartKey = config.bootstrapApiKey ? null : await accounts.firstStartKey();

  const templates = createTemplatesService({ db, clock });
  /** Set with the browser pool below: a destroyed environment's leases end with it. */
  let endLeasesOf: (environmentId: string) => Promise<unknown> = async () => {};
  const proxyCredentials = createProxyCredentials({ db, keyring, now: () => clock.monotonicMs() });
  const environments = createEnvironmentsService({
    db, clock, keyring, templates, log,
    defaultAgentVersion: async (developerId) => (await accounts.getDeveloper(developerId))?.defaultAgentVersion ?? null,
    onDestroyed: (id) => {
      proxyCredentials.evict(id);
      gatewayCache.invalidateEnvironment(id);
      void endLeasesOf(id).catch((err) => log.warn({ err, environment_id: id }, 'the destroyed environment\'s browser leases could not be ended'));
    },
    onChange: () => hostAgent?.notify(),
    onSchedulingOff: async (trx, id) => {
      await agentService.releaseAgentKeepAwakes(trx, id, 'scheduling_disabled');
    },
  });
  let hostAgent: HostAgent | null = null;
  // What the agent does through its control socket (schedules, keep-awake); a fired
  // schedule's handler runs through exec, as the agent user, once the VM is up.
  const agentService: AgentService = createAgentService({
    db, clock, log,
    onChange: () => hostAgent?.notify(),
    runHandler: async (env, _key, command) => (await runtime.exec(env.developer_id, env.id, { command, timeout_secs: 600 })).exit_code,
  });
  let hostRpc: { port: number; close(): Promise<void> } | null = null;
  const hostRpcKey = keyring.deriveSubkey('host-rpc');
  const hostRpcClient = new Agent({ keepAliveTimeout: 10_000 });
  // This process as a node of the deployment (docs/deploy.md): its id is recorded on the
  // approvals its proxy holds; a decision made elsewhere pokes it through its RPC (below).
  const nodes = createNodesService({ db, log, subkey: keyring.deriveSubkey('node-rpc'), dispatcher: hostRpcClient });
  const runtimeState: RuntimeState = createRuntimeState({
    db, clock, onChange: () => hostAgent?.notify(),
    // A VM that is replaced (stopped, failed, destroyed) ends the keep-awakes its processes held.
    onVmGone: async (trx, id) => {
      await agentService.releaseAgentKeepAwakes(trx, id, 'vm_replaced');
    },
  });
  const wakeups = createWakeupsService({ db, clock });
  const schedules = createSchedulesService({ db, clock });
  const gatewayCache = createGatewayCache({ db, now: () => clock.monotonicMs() });
  const secrets = createSecretsService({ db, clock, keyring, cache: gatewayCache });
  // Grants of egress approvals (issue 26, item 3) are read through approvals, created below.
  const egress = createEgressService({ db, clock, cache: gatewayCache, grantsInEffect: (developerId, environmentId) => approvals.grantsInEffect(developerId, environmentId) });
  // Metrics (issue 25, item 2): one port handed to what it counts; GET /metrics serves it.
  // `opts.metrics: false` (the gateway bench's A/B only) wires the no-op port and no route.
  const prom = opts.metrics === false ? null : createPrometheusMetrics({ log });
  const metrics = prom?.metrics ?? noopMetrics;
  const audit = createAuditService({ db, clock, log, metrics });
  // BASE_URL, or the API's own URL once it listens (decision_url, redirect_uri).
  let publicBaseUrl = config.baseUrl ?? '';

  // Connections (issue 11): the developer's OAuth apps, else the platform's; authorization links.
  const platformApps: Partial<Record<Provider, PlatformApp>> = {};
  for (const p of PROVIDERS) {
    const c = config[p];
    if (c.clientId && c.clientSecret) platformApps[p] = { clientId: c.clientId, clientSecret: c.clientSecret };
  }
  const oauthClients = createOAuthClientsService({ db, clock, keyring, baseUrl: () => publicBaseUrl, platformApps });
  const authorizer = createAuthorizer({
    db, clock, keyring, oauthClients,
    endpoints: { google: config.google, slack: config.slack },
  });

  const webhookEndpoints = createWebhookEndpointsService({ db, clock, keyring, allowPrivateDestinations: config.allowPrivateUpstreams });
  // Slack approval cards (issue 27): a card row is written in the transaction of every
  // approval change (onApprovalChange below); delivery is wired with the console's members.
  const slackChannels = createSlackChannelService({ db, clock, keyring });

  // Policies and approvals point at each other through closures: a grant write (approvals)
  // drops the environment's cached policy (policies' decider). decision_url needs the base
  // URL, known once the API listens (set below).
  const approvals = createApprovalsService({
    db, clock, log,
    baseUrl: () => publicBaseUrl,
    signingSecrets: (developerId) => webhookEndpoints.signingSecrets(developerId),
    onGrantsChanged: (developerId, environmentId) => policies.decider.invalidate(developerId, environmentId),
    nodeId: nodes.id,
    onDecidedElsewhere: (approvalId, holder) => nodes.notifyDecided(holder, approvalId),
    waitPollMs: opts.waitPollMs,
    onApprovalChange: (trx, change) => slackChannels.onApprovalChange(trx, change),
  });
  const policies: PoliciesService = createPoliciesService({
    db, clock, environments,
    loadGrants: approvals.grantsInEffect,
    // Policy simulation (issue 26) reads recorded requests through the audit domain.
    policyRecords: audit.policyRecords,
    // The environment's secret of that name, else the developer-level one (from the cache).
    isInfrastructureSecret: async (_developerId, environmentId, name) =>
      (await secrets.secretsForEnvironment(environmentId))?.byName.get(name)?.infrastructure ?? false,
  });

  // Sweep jobs read their work from domain tables, so nothing is lost between a commit and
  // a job being queued. With the test clock they poll every second, so runDue() after an
  // advance does not wait for a slow poll.
  const jobs = createJobRunner({ db, clock, log, metrics, processEveryMs: config.testClock ? 1000 : 5000 });
  jobs.define('fire-wakeups', async () => {
    await wakeups.fireDue();
  }, { retry: false });
  await jobs.start();
  await jobs.every('fire-wakeups', 5000, {});
  // Reads show a pending approval past expires_at as expired at once; this makes the
  // stored status agree and wakes waiters in every process.
  jobs.define('expire-approvals', async () => {
    await approvals.expireDue();
    // The signed-decision replay cache keeps only what could still verify.
    await approvals.pruneUsedSignatures();
  }, { retry: false });
  await jobs.every('expire-approvals', 5000, {});
  // GATEWAY_UPSTREAM_CA_FILE, read once: the proxy's upstreams and webhook delivery both
  // trust it on top of Node's roots.
  const upstreamCa = config.upstreamCaFile ? readFileSync(config.upstreamCaFile, 'utf8') : null;
  // The service's own listening ports, filled in as they bind (upstream.guard.forbidPort):
  // one set for every egress guard of the service (the proxy's upstreams, OAuth, webhooks,
  // Slack), so none of them reaches the service itself on a local address.
  const ownPorts = new Set<number>();
  // OAuth token calls go through the egress guard like every outbound connection (issue 9).
  const oauthHttp = new Agent({
    connect: createEgressGuard({ allowPrivate: config.allowPrivateUpstreams, overrides: config.upstreamOverrides, forbiddenPorts: ownPorts })
      .connector({ timeout: OAUTH_TIMEOUT_MS, secureContext: upstreamSecureContext(upstreamCa) }) as never,
  });
  const providerEndpoints = { google: config.google, slack: config.slack };
  // Connections (issue 11): stand-ins for the gateway, the token vault (refresh), the callback.
  let invalidateStandIns = (): void => {};
  const onConnectionChange = (): void => invalidateStandIns();
  const vault = createTokenVault({ db, clock, keyring, log, http: oauthHttp, oauthClients, endpoints: providerEndpoints, timeoutMs: OAUTH_TIMEOUT_MS, onChange: onConnectionChange });
  const standIns = createStandIns({ db, clock, keyring, accessToken: vault.accessToken });
  invalidateStandIns = () => {
    standIns.invalidate();
    // The effective egress allowlist includes connected connectors' hosts: reload it too.
    gatewayCache.clear();
  };
  // MCP servers (issue 28): a registered server's host is on its environments' allowlist while registered.
  const mcpServers = createMcpServersService({
    db, clock,
    environment: async (developerId, environmentId) => {
      const row = await environmentsStore.get(db, developerId, environmentId);
      return row ? { destroyed: row.desired_state === 'destroyed' } : null;
    },
    onChanged: (developerId, environmentId) => (environmentId === null ? gatewayCache.invalidateDeveloper(developerId) : gatewayCache.invalidateEnvironment(environmentId)),
  });
  gatewayCache.setExtraHosts(async ({ environmentId, developerId }) => [...(await standIns.hostsFor(environmentId)), ...(await mcpServers.hostsFor(developerId, environmentId))]);
  const connections = createConnectionsService({ db, clock, keyring, log, http: oauthHttp, endpoints: providerEndpoints, timeoutMs: OAUTH_TIMEOUT_MS, oauthClients, onChange: onConnectionChange });
  const callback = createCallbackHandler({ db, clock, keyring, log, http: oauthHttp, oauthClients, endpoints: providerEndpoints, timeoutMs: OAUTH_TIMEOUT_MS, onChange: onConnectionChange });
  // Access tokens expiring within 10 minutes are refreshed ahead of use (the gateway also
  // refreshes on demand, within a minute of expiry).
  jobs.define('refresh-connections', async () => {
    await vault.refreshDue();
  }, { retry: false });
  await jobs.every('refresh-connections', 60_000, {});
  // Webhook delivery: at once for events committed in this process (notifier), the sweep
  // job for retries and for events other processes queued.
  const webhookDelivery = createWebhookDeliveryService(
    { db, clock, log, metrics, target: (developerId) => webhookEndpoints.deliveryTarget(developerId) },
    { allowPrivateDestinations: config.allowPrivateUpstreams, timeoutMs: config.webhookTimeoutMs, extraCa: upstreamCa, forbiddenPorts: ownPorts },
  );
  webhookDelivery.start();
  await scheduleDeliverWebhooks(jobs, webhookDelivery);
  // Retention (docs/retention.md): every hour, what a window no longer covers is deleted,
  // by each domain's own service. The audit log only when GATEWAY_AUDIT_RETENTION_DAYS is set.
  await scheduleRetention(jobs, {
    targets: {
      webhooks: (before, o) => webhookDelivery.prune(before, o),
      jobs: (before, o) => jobs.pruneFinished(before, o),
      wakeups: (before, o) => wakeups.prune(before, o),
      audit: (before, o) => audit.prune(before, o),
      authorizationStates: (before, o) => authorizer.prune(before, o),
    },
    windows: config.retention,
    clock,
    log,
  });

  // The test clock's advance: what the VMs did counts first (CPU activity), then every due
  // job runs (the idle ladder, wakeups), then the local host brings its VMs to their new
  // desired states, so the answer to an advance shows where the environments are.
  const runDue = async (): Promise<void> => {
    await hostAgent?.sampleActivity();
    const out = await jobs.runDue({ timeoutMs: 20_000 });
    if (out.timedOut) log.warn({ ran: out.ran }, 'test clock: due jobs still running after 20 s');
    await hostAgent?.tick();
  };

  // The gateway: our CA (key sealed with the master key), one leaf key, SNI contexts.
  const ca = await loadOrCreateCa({ dataDir: config.dataDir, keyring, log });
  const issuer = await createLeafIssuer(ca);
  const upstream = createUpstream({
    forbiddenPorts: ownPorts,
    overrides: config.upstreamOverrides,
    allowPrivate: config.allowPrivateUpstreams,
    extraCa: upstreamCa,
    headersTimeoutMs: config.upstreamTimeoutMs,
  });
  const ports: GatewayPorts = {
    egressAllows: async (id, host, port) => (await egress.effectiveEgress(id.environmentId))?.allows(host, port) ?? false,
    unknownHost: (id, host, tags) => egress.unknownHost(id.developerId, id.environmentId, host, tags),
    credentials: async (id) => {
      const placeholders = (await secrets.secretsForEnvironment(id.environmentId))?.byPlaceholder ?? new Map();
      const stand = await standIns.forEnvironment(id.environmentId);
      // Registered MCP servers (issue 28): from memory when fresh, so an environment without any costs no allocation.
      const mcp = mcpServers.cachedRoutes(id.environmentId) ?? await mcpServers.routesFor(id.developerId, id.environmentId);
      if (stand.length === 0) return mcp.list.length === 0 ? { byToken: placeholders } : { byToken: placeholders, mcp };
      const byToken = new Map<string, Credential>(placeholders);
      for (const c of stand) byToken.set(c.token, c);
      return mcp.list.length === 0 ? { byToken } : { byToken, mcp };
    },
    decide: (id, req) => policies.decider.decide(id.developerId, id.environmentId, { ...req, category: req.category as Category }),
    requestApproval: (id, req) =>
      approvals.requestApproval({ ...req, developerId: id.developerId, environmentId: id.environmentId, category: req.category as Category, max_scope: req.max_scope as Scope }),
    waitForDecision: (approvalId, signal) => approvals.waitForDecision(approvalId, signal),
    consumeGrant: (id, grantId, facts) => approvals.consumeGrant(id.developerId, grantId, facts),
    audit: (entry) => audit.commit(entry),
  };
  // Filled in as the servers bind: the gateway never forwards to the service itself.
  const managementTargets = new Set<string>();
  const pipeline = createPipeline({ ports, upstream, log, managementTargets, metrics, bodyBudget: config.requestBuffer });
  const proxy = await startGatewayProxy({
    host: config.host, port: config.proxyPort, sslCaDir: await prepareMitmCaDir(config.dataDir, ca), sni: createSniCallback(issuer),
    authenticate: proxyCredentials.authenticate, egressAllows: ports.egressAllows, credentials: ports.credentials, pipeline, upstream, audit: ports.audit, log,
    managementTargets,
  });
  // The service's own ports are refused by name here and by address in the egress guard
  // (any loopback or local address: `127.1`, `[::1]`, this machine's interface addresses).
  upstream.guard.forbidPort(proxy.port);
  for (const h of [config.host, 'localhost', '127.0.0.1']) managementTargets.add(`${canonicalHost(h) ?? h}:${proxy.port}`);
  // The address agents use: HOST, unless it is a wildcard bind, then BASE_URL's host.
  const wildcardBind = ['0.0.0.0', '::'].includes(config.host);
  const proxyHost = wildcardBind && config.baseUrl ? new URL(config.baseUrl).hostname : wildcardBind ? '127.0.0.1' : config.host;
  const proxyUrl = `http://${urlHost(proxyHost)}:${proxy.port}`;
  // The node RPC (hosts/rpc.ts), on every process with a proxy, also without a local host:
  // other nodes poke it when they decide an approval it holds; a local host's exec and files
  // join it below. It stops (and the node leaves the table) where hostRpc closes.
  const nodeRpc = await startNodeRpc({ host: config.host, port: config.envHost.rpcPort, hostSubkey: hostRpcKey, node: { token: nodes.token(), onDecided: (id) => approvals.recheck(id) } });
  hostRpc = { port: nodeRpc.port, close: async () => { await nodes.close(); await nodeRpc.close(); } };
  upstream.guard.forbidPort(nodeRpc.port);
  for (const h of [config.host, 'localhost', '127.0.0.1']) managementTargets.add(`${canonicalHost(h) ?? h}:${nodeRpc.port}`);
  const nodeRpcUrl = config.envHost.rpcUrl ?? `http://${urlHost(wildcardBind ? proxyHost : config.host)}:${nodeRpc.port}`;
  await nodes.register(nodeRpcUrl);
  // What a VM's processes start with (issue 12, item 2): the platform's variables (proxy
  // with this environment's credentials, the gateway CA for every TLS stack), then the
  // configuration's, then the secrets' placeholders (never their values).
  const envFor = async (environmentId: string): Promise<Record<string, string>> => {
    const row = await runtimeState.byId(environmentId);
    if (!row) return {};
    const config = await environmentsStore.config(db, environmentId);
    const proxy = `http://${environmentId}:${proxyCredentials.passwordFor(environmentId)}@${VM_PROXY}`;
    const env: Record<string, string> = {
      PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/home/agent', USER: 'agent', LOGNAME: 'agent', LANG: 'C.UTF-8', TERM: 'dumb',
      HTTPS_PROXY: proxy, HTTP_PROXY: proxy, https_proxy: proxy, http_proxy: proxy,
      NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1', NODE_USE_ENV_PROXY: '1',
      SSL_CERT_FILE: VM_CA_FILE, NODE_EXTRA_CA_CERTS: VM_CA_FILE, REQUESTS_CA_BUNDLE: VM_CA_FILE, CURL_CA_BUNDLE: VM_CA_FILE,
      GIT_SSL_CAINFO: VM_CA_FILE, AWS_CA_BUNDLE: VM_CA_FILE, PIP_CERT: VM_CA_FILE,
      SERVICE_ENVIRONMENT_ID: environmentId, SERVICE_END_USER_ID: row.end_user_id,
    };
    if (row.agent_version) env.SERVICE_AGENT_VERSION = row.agent_version;
    Object.assign(env, fromJson<Record<string, string>>(config?.env) ?? {});
    for (const [name, s] of (await secrets.secretsForEnvironment(environmentId))?.byName ?? new Map()) env[name] = s.placeholder;
    return env;
  };
  const surfaceFor = async (environmentId: string): Promise<Surface | null> => {
    const row = await runtimeState.byId(environmentId);
    if (!row || row.desired_state === 'destroyed') return null;
    const config = await environmentsStore.config(db, environmentId);
    const files: Record<string, Buffer> = {};
    for (const [name, f] of Object.entries(fromJson<Record<string, { content: string; encoding?: string }>>(config?.files) ?? {})) {
      files[name] = Buffer.from(f.content, f.encoding === 'base64' ? 'base64' : 'utf8');
    }
    const connections: Record<string, string> = {};
    for (const c of await standIns.listed(environmentId)) connections[c.connector] = c.token;
    return { env: await envFor(environmentId), files, connections, caPem: ca.certPem };
  };
  // A VM's /run/service/browser.sock serves its own leases' CDP endpoints (set up with the browser pool below).
  let vmCdpUpgrade: (environmentId: string, req: import('node:http').IncomingMessage, socket: import('node:stream').Duplex, head: Buffer) => void = (_e, _r, socket) => socket.destroy();
  hostAgent = await startLocalHost({
    config, db, clock, log, runtime: runtimeState, keys: keyring,
    proxy: { host: wildcardBind ? '127.0.0.1' : config.host, port: proxy.port },
    surfaceFor,
    control: {
      connections: (environmentId) => standIns.listed(environmentId),
      listSchedules: (environmentId) => agentService.listSchedules(environmentId),
      setSchedule: (environmentId, key, body) => agentService.setSchedule(environmentId, key, body),
      deleteSchedule: (environmentId, key) => agentService.deleteSchedule(environmentId, key),
      keepAwake: (environmentId, body, peer) => agentService.keepAwake(environmentId, body, peer),
      requestTakeover: (environmentId, body) => leases.requestTakeover(environmentId, body),
      rateLimited: (environmentId) => agentService.rateLimited(environmentId),
    },
    browser: (environmentId) => (req, socket, head) => vmCdpUpgrade(environmentId, req, socket, head),
    keepAwakes: {
      held: (ids) => agentService.heldByProcesses(ids),
      release: (id, reason, ids) => agentService.release(id, reason, ids),
    },
    // Exec and files for API processes elsewhere (hosts/rpc.ts); never a gateway target.
    serve: async (agent) => {
      nodeRpc.serveAgent(agent);
      return nodeRpcUrl;
    },
  });
  const runtime = createRuntimeService({
    db, clock, runtime: runtimeState, envFor, offlineAfterMs: config.hostOfflineMs,
    agents: () => (hostAgent ? new Map([[hostAgent.hostId, hostAgent]]) : new Map()),
    remote: (host) => (host.endpoint ? remoteHost(host.endpoint, hostToken(hostRpcKey, host.id), hostRpcClient) : null),
  });
  // The idle ladder (environments/idle.service.ts): a step moves desired_state; the host follows.
  const idleLadder = createIdleLadder({ db, clock, onChange: () => hostAgent?.notify() });
  jobs.define('idle-ladder', async () => {
    await idleLadder.run();
  }, { retry: false });
  await jobs.every('idle-ladder', 5000, {});
  // Schedules fire (each once, whatever the number of workers) and wake their environment.
  jobs.define('fire-schedules', async () => {
    await agentService.fireDue();
  }, { retry: false });
  await jobs.every('fire-schedules', 5000, {});
  // Usage (environments/usage.service.ts): running time metered every minute; a limit suspends.
  const usage = createUsageService({ db, clock, onChange: () => hostAgent?.notify() });
  jobs.define('meter-usage', async () => {
    await usage.meter();
  }, { retry: false });
  await jobs.every('meter-usage', 60_000, {});
  // Agent versions: a rollout upgrades a batch per run and, once complete, sets the default.
  const agentVersions = createAgentVersionsService({
    db, clock,
    defaultVersion: async (developerId) => (await accounts.getDeveloper(developerId))?.defaultAgentVersion ?? null,
    setDefaultVersion: (developerId, version) => accounts.setDefaultAgentVersion(developerId, version),
  });
  jobs.define('agent-rollouts', async () => {
    await agentVersions.advanceAll();
  }, { retry: false });
  await jobs.every('agent-rollouts', 5000, {});
  jobs.define('hosts-offline', async () => {
    await runtime.sweepOfflineHosts();
  }, { retry: false });
  await jobs.every('hosts-offline', 10_000, {});
  const routers = [environmentsRouter({ environments, wakeups, schedules }), templatesRouter({ templates }), runtimeRouter({ runtime })];
  routers.push(usageRouter({ usage, versions: agentVersions, environments }));
  // The browser pool (issue 14): profiles, leases on the Chromium broker, limits. Each
  // environment's browser is a sandbox of its own (issue 23): its own uid and namespaces,
  // charged to the environment's cgroup, its only way out the gateway as that environment.
  const browserCgroups = new Cgroups(hostIdFor(config), config.envHost.cgroupRoot ?? undefined);
  const broker = new ChromiumBroker({
    executablePath: config.chromiumPath, leafKeyPem: issuer.keyPem, log, pagesPerLease: config.browserPagesPerLease,
    async cgroupFor(environmentId) {
      if (browserCgroups.support.layout === 'none') return [];
      // Not running here (no process in its tree): the environment's directories are made with its limits.
      if (browserCgroups.pids(environmentId).length === 0) {
        const row = await runtimeState.byId(environmentId);
        browserCgroups.create(environmentId, { cpus: Number(row?.cpus ?? 2), memoryMib: Number(row?.memory_mib ?? 4096), pidsMax: 4096 });
      }
      return browserCgroups.procsFiles(environmentId, 'browser');
    },
    cgroupDone(environmentId) {
      browserCgroups.removeExec(environmentId, 'browser');
      if (!hostAgent && browserCgroups.pids(environmentId).length === 0) browserCgroups.remove(environmentId);
    },
    proxyConnection: (environmentId, socket) => proxy.accept(socket, `Basic ${Buffer.from(`${environmentId}:${proxyCredentials.passwordFor(environmentId)}`).toString('base64')}`),
    // Browsers started ahead for first leases (issue 29): in a cgroup tree of their own until an environment claims one.
    poolSize: config.browserPoolSize,
    poolCgroups: browserCgroups.support.layout === 'none' ? null : new Cgroups(`${hostIdFor(config)}-browser-pool`, config.envHost.cgroupRoot ?? undefined),
  });
  // The agent's CDP endpoint per lease: ws(s)://<BASE_URL>/v1/browser/leases/<id>/cdp?token=<HMAC of the id>.
  const cdpKey = keyring.deriveSubkey('browser-cdp');
  const cdpToken = (leaseId: string): string => createHmac('sha256', cdpKey).update(leaseId).digest('base64url');
  const cdpClients = new Map<string, Set<Relay>>();
  const viewers = new Map<string, Set<import('ws').WebSocket>>();
  const endRelays = async (id: string, code: number, reason: string): Promise<void> => {
    const set = cdpClients.get(id);
    cdpClients.delete(id);
    await Promise.all([...(set ?? [])].map((r) => r.close(code, reason)));
  };
  const leases = createLeasesService({
    db, clock, keyring, log, broker,
    cdpUrl: (id) => `${publicBaseUrl.replace(/^http/, 'ws')}/v1/browser/leases/${id}/cdp?token=${cdpToken(id)}`,
    baseUrl: () => publicBaseUrl,
    environmentOnHost: async (environmentId) => {
      const row = await runtimeState.byId(environmentId);
      if (!row?.host_id) return false;
      if (hostAgent?.hostId === row.host_id) return true;
      const host = await hostsStore.get(db, row.host_id);
      return host?.status === 'online';
    },
    onHandback: (id) => {
      for (const ws of viewers.get(id) ?? []) ws.close(1000, 'handed back');
      viewers.delete(id);
    },
    onTakeover: (id) => endRelays(id, CDP_TAKEN_OVER, 'the browser is taken over by a person; connect again after handback'),
    onEnded: (id) => {
      void endRelays(id, 1000, 'the lease ended');
      for (const ws of viewers.get(id) ?? []) ws.close(1000, 'the lease ended');
      viewers.delete(id);
    },
    limits: config.browserLimits,
  });
  endLeasesOf = (environmentId) => leases.endForEnvironment(environmentId);
  // The gauges that are state in the store, each read through its own domain (cached by the adapter).
  prom?.readStateFrom({
    environmentsByState: () => environmentsStore.countByState(db),
    browserLeasesByState: () => leases.countByState(),
    webhookQueueDepth: () => webhookDelivery.queueDepth(),
    host: async () => {
      if (!hostAgent) return null;
      const [row, held] = await Promise.all([hostsStore.get(db, hostAgent.hostId), runtimeState.heldOn(db, hostAgent.hostId)]);
      if (!row) return null;
      const MiB = 1024 * 1024;
      return {
        capacity: { cpus: Number(row.cpus), memory_bytes: Number(row.memory_mib) * MiB },
        allocated: { cpus: held.cpus, memory_bytes: held.memoryMib * MiB },
      };
    },
  });
  const profiles = createProfilesService({ db, clock, inUse: (id) => leases.profileInUse(id) });
  jobs.define('reclaim-leases', async () => {
    await leases.reclaimDue();
  }, { retry: false });
  await jobs.every('reclaim-leases', 5000, {});
  routers.push(browserRouter({
    profiles,
    leases,
    limits: { per_developer: config.browserLimits.perDeveloper, per_end_user: config.browserLimits.perEndUser, lease_secs: 900, save_deadline_secs: 60 },
  }));
  routers.push(gatewayRouter({ environments, passwordFor: proxyCredentials.passwordFor, proxyUrl, caCertPem: ca.certPem }));
  routers.push(secretsRouter({ secrets }), egressRouter({ egress }), mcpRouter({ mcp: mcpServers }));
  routers.push(webhooksRouter({ endpoints: webhookEndpoints, deliveries: webhookDelivery }));
  // Mounted always so the OpenAPI document lists it; without GATEWAY_TEST_CLOCK=1 it answers 404 no such route.
  routers.push(testClockRouter({ enabled: config.testClock, clock, runDue, beforeAdvance: async () => void (await hostAgent?.sampleActivity()) }));
  routers.push(policiesRouter({ policies }), approvalsRouter({ approvals }));
  routers.push(auditRouter({ audit }));
  routers.push(connectionsRouter({
    oauthClients, authorizer, connections,
    standInTokens: async (developerId, environmentId) => {
      await environments.get(developerId, environmentId); // 404 for a missing or foreign environment
      return standIns.listed(environmentId);
    },
  }));
  // The console (issue 15): team members and their sessions; pages under /console.
  const members = createMembersService({ db, clock });
  routers.push(teamMembersRouter({ members, baseUrl: () => publicBaseUrl }));
  const endUserOf = async (developerId: string, environmentId: string): Promise<string | null> => (await environments.get(developerId, environmentId).catch((err) => {
    if ((err as { status?: number }).status === 404) return null;
    throw err;
  }))?.end_user_id ?? null;
  const consoleRoutes = consoleRouter({
    members, approvals, audit, nowMs: () => clock.nowMs(),
    endUserOf,
    secure: () => publicBaseUrl.startsWith('https:') });
  // Slack approval cards (issue 27; docs/slack-approvals.md): posted and updated from the
  // slack_cards outbox (at once after this process's commits, by the sweep job otherwise),
  // every call through the egress guard; presses come to the public interactivity route.
  const slackApi = createSlackApi({ allowPrivateDestinations: config.allowPrivateUpstreams, overrides: config.upstreamOverrides, extraCa: upstreamCa, timeoutMs: config.webhookTimeoutMs, forbiddenPorts: ownPorts });
  const slackDelivery = createSlackDeliveryService({
    db, clock, log, api: slackApi,
    target: (developerId) => slackChannels.target(developerId),
    approval: (id) => approvals.cardById(id),
    endUserOf,
    memberName: (developerId, memberId) => members.nameOf(developerId, memberId),
  });
  const slackInteractivity = createSlackInteractivityService({
    db, clock, log, api: slackApi,
    target: (developerId) => slackChannels.target(developerId),
    approval: (id) => approvals.cardById(id),
    decide: (id, caller, body) => approvals.decide(id, caller, body),
    memberBySlackUser: (developerId, slackUserId) => members.bySlackUser(developerId, slackUserId),
  });
  slackDelivery.start();
  await scheduleDeliverSlackCards(jobs, { sweep: () => slackDelivery.sweep(), pruneUsedSignatures: () => slackInteractivity.pruneUsedSignatures() });
  routers.push(approvalChannelsRouter({ slack: slackChannels }));
  // Readiness (issue 25, item 1): the store answers, its migrations are this code's, the
  // proxy listens, and a node with a host is registered and heartbeating.
  const readiness = createReadiness({
    store: async () => {
      await db.raw('select 1');
      return true;
    },
    migrations: async () => (await pendingMigrations(db)).length === 0,
    proxy: () => proxy.listening(),
    ...(hostAgent ? { host: () => hostAgent!.heartbeatAgeMs() < 3 * hostAgent!.heartbeatMs } : {}),
  }, {
    onChange: (name, state, err) => (state === 'ok' ? log.info({ check: name }, 'readiness check ok again') : log.warn({ check: name, err }, 'readiness check failing')),
  });
  const rootRouters: import('express').Router[] = [healthRouter({ readiness })];
  if (prom) rootRouters.push(metricsRouter({ accounts, scrape: prom.scrape }));
  const app = createApp({ log, accounts, routers, consoleRouter: consoleRoutes, rootRouters, publicRouters: [decisionRouter({ approvals, accounts }), slackRouter({ interactivity: slackInteractivity }), oauthCallbackRouter({ callback }), browserViewRouter({ leases }), openapiRouter({ baseUrl: () => publicBaseUrl })], websockets: BROWSER_WEBSOCKETS });

  const apiServer = opts.api === false ? null : createServer(app);
  apiServer?.on('clientError', answerUnparsable);
  // WebSocket upgrades: a lease's CDP relay (the token in the URL is its credential). A frame
  // over 16 MiB closes the connection (issue 23, item 2).
  const wss = new WebSocketServer({ noServer: true, maxPayload: CDP_MAX_FRAME, perMessageDeflate: false });
  /** Files of the environment's disk for a file input (issue 23, item 2): read as the agent, copied into the lease's uploads. */
  const uploadFiles = async (leaseId: string, environmentId: string, paths: string[]): Promise<string[]> => {
    if (paths.length > 10) throw new Error('at most 10 files at once');
    const env = await runtimeState.byId(environmentId);
    const found = broker.browserOf(leaseId);
    if (!env || !found) throw new Error('the lease has no browser');
    const files: Array<{ name: string; data: Buffer }> = [];
    for (const p of paths) {
      // Only the environment's own disk; the path is the agent's and means a file there.
      if (typeof p !== 'string' || !p.startsWith('/home/agent/')) throw new Error(`files are taken from the environment's disk (/home/agent/...), never a host path: ${String(p).slice(0, 200)}`);
      const r = await runtime.readFile(env.developer_id, environmentId, p).catch((err: Error) => {
        throw new Error(`${p}: ${err.message}`);
      });
      files.push({ name: r.path, data: Buffer.from(r.content, 'base64') });
    }
    return found.browser.stageUploads(leaseId, files);
  };
  /** A lease's CDP endpoint; `environmentId`: through that VM's browser.sock, its own leases only. */
  const cdpUpgrade = async (req: import('node:http').IncomingMessage, socket: import('node:stream').Duplex, head: Buffer, environmentId: string | null): Promise<void> => {
    const refuse = (status: number, text: string): void => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const m = /^\/v1\/browser\/leases\/(bls_[0-9a-f]{24})\/cdp(?:\?(.*))?$/.exec(req.url ?? '');
    if (!m) return refuse(404, 'Not Found');
    const id = m[1]!;
    const token = new URLSearchParams(m[2] ?? '').get('token') ?? '';
    if (!constantTimeEqual(token, cdpToken(id))) return refuse(401, 'Unauthorized');
    const lease = await leases.activeRow(id).catch(() => null);
    if (lease && environmentId && lease.environment_id !== environmentId) return refuse(404, 'Not Found');
    const found = broker.browserOf(id);
    if (!lease || !found) return refuse(409, 'Conflict');
    // Counted in the same turn as the relay is added below (ws's handleUpgrade calls back at once).
    if ((cdpClients.get(id)?.size ?? 0) >= MAX_CONNECTIONS_PER_LEASE) return refuse(429, 'Too Many Requests');
    wss.handleUpgrade(req, socket, head, (ws) => {
      // While a person holds the browser the agent is refused, with the reason (issue 23, item 3).
      if (lease.taken_over || leases.isTakenOver(id)) return ws.close(CDP_TAKEN_OVER, 'the browser is taken over by a person; connect again after handback');
      let set = cdpClients.get(id);
      if (!set) cdpClients.set(id, (set = new Set()));
      const relay = relayCdp(ws, found.browser, found.contextId, {
        takenOver: () => leases.isTakenOver(id),
        uploadFiles: (paths) => uploadFiles(id, lease.environment_id, paths),
      });
      set.add(relay);
      ws.on('close', () => set!.delete(relay));
      // A release that began while this upgrade was on its way ended the lease's relays
      // before this one was in the set: asked again now that it is, one of the two closes it.
      void leases.activeRow(id).then((row) => (row ? undefined : relay.close(1000, 'the lease has ended')), () => relay.close(1011, 'the lease could not be checked'));
    });
  };
  vmCdpUpgrade = (environmentId, req, socket, head) => {
    void cdpUpgrade(req, socket, head, environmentId).catch(() => socket.destroy());
  };
  apiServer?.on('upgrade', (req, socket, head) => {
    void (async () => {
      const refuse = (status: number, text: string): void => {
        socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      };
      const view = /^\/v1\/browser\/view\/([A-Za-z0-9_-]{20,100})\/ws$/.exec(req.url ?? '');
      if (view) {
        // Establishing the viewer consumes the token (service.md, Viewer rules).
        if (!broker.up()) return refuse(503, 'Service Unavailable');
        const ok = await leases.consumeView(view[1]!).catch(() => null);
        const found = ok ? broker.browserOf(ok.leaseId) : null;
        const page = ok && found ? found.browser.page(ok.leaseId) : null;
        if (!ok || !found || !page) return refuse(404, 'Not Found');
        wss.handleUpgrade(req, socket, head, (ws) => {
          let set = viewers.get(ok.leaseId);
          if (!set) viewers.set(ok.leaseId, (set = new Set()));
          set.add(ws);
          ws.on('close', () => set!.delete(ws));
          relayViewer(ws, found.browser, page.targetId, () => void leases.handback(null, ok.leaseId).catch(() => {})).catch(() => ws.close());
        });
        return;
      }
      await cdpUpgrade(req, socket, head, null);
    })();
  });
  const apiPort = apiServer ? await listen(apiServer, config.host, config.apiPort) : config.apiPort;
  const apiUrl = apiServer ? `http://${urlHost(config.host)}:${apiPort}` : '';
  // BASE_URL, else the API's address (loopback for a wildcard bind: a link must be usable).
  const baseUrl = defaultBaseUrl(config, apiPort);
  publicBaseUrl = baseUrl;
  const base = new URL(baseUrl);
  if (apiPort) upstream.guard.forbidPort(apiPort);
  for (const [h, p] of [[config.host, apiPort], ['localhost', apiPort], ['127.0.0.1', apiPort], [base.hostname, Number(base.port) || (base.protocol === 'https:' ? 443 : 80)]] as const) {
    managementTargets.add(`${canonicalHost(h) ?? h.toLowerCase()}:${p}`);
  }
  // API requests under way, for a graceful stop (event streams do not hold it up).
  const apiInFlight = new Set<import('node:http').ServerResponse>();
  apiServer?.on('request', (_req, res: import('node:http').ServerResponse) => {
    apiInFlight.add(res);
    res.once('close', () => apiInFlight.delete(res));
  });
  // /healthz and /readyz on a port of their own: `gateway host` has no API port (8082 unless
  // GATEWAY_HEALTH_PORT says otherwise); `gateway start` also serves them there when it is set.
  const healthPort = config.healthPort ?? (apiServer ? null : 8082);
  let healthServer: Server | null = null;
  let healthUrl: string | null = null;
  if (healthPort !== null) {
    const h = express();
    h.disable('x-powered-by');
    h.set('etag', false);
    h.use((_req, res, next) => {
      res.setHeader('Cache-Control', 'no-store');
      next();
    });
    h.use(healthRouter({ readiness }));
    // A `gateway host` has a proxy too: its metrics are served here (same API key).
    if (prom) h.use(metricsRouter({ accounts, scrape: prom.scrape }));
    h.use(noSuchRoute);
    h.use(errorHandler(log));
    healthServer = createServer(h);
    const p = await listen(healthServer, config.host, healthPort);
    healthUrl = `http://${urlHost(config.host)}:${p}`;
    upstream.guard.forbidPort(p);
    for (const host of [config.host, 'localhost', '127.0.0.1']) managementTargets.add(`${canonicalHost(host) ?? host}:${p}`);
  }
  let closing: Promise<void> | null = null;
  /** The step a graceful stop is waiting on (null before the stop and after it). */
  let stopStep: string | null = null;

  return {
    apiUrl,
    baseUrl,
    proxyUrl,
    db,
    clock,
    secrets,
    egress,
    gatewayCache,
    approvals,
    policies,
    audit,
    routes: app.locals.routes as RouteInfo[],
    firstStartKey,
    host: hostAgent,
    dataDir: config.dataDir,
    browserBroker: broker,
    runtime,
    healthUrl,
    gatewayRequests: () => pipeline.active(),
    stopStep: () => currentStopStep(),
    close() {
      closing ??= stopGracefully();
      return closing;
    },
  };

  /**
   * SIGTERM (issue 25, item 7; docs/operations.md, Stopping a node): stop accepting, answer
   * held requests 503 `gateway_unavailable` with Retry-After (their approvals stay
   * decidable), let forwarded requests and API calls under way finish within
   * GATEWAY_SHUTDOWN_GRACE_SECS, then stop the host's reconcile (nothing is written about its
   * environments: they come back when it starts again), the jobs, and flush the audit batch.
   */
  async function stopGracefully(): Promise<void> {
    const startedAt = performance.now();
    // A stop that hangs says where, every STOP_REPORT_MS, instead of hanging silently.
    const report = setInterval(() => {
      log.warn({ step: currentStopStep(), waited_s: Math.round((performance.now() - startedAt) / 1000) }, 'stopping: still waiting');
    }, STOP_REPORT_MS);
    report.unref();
    try {
      await stopSteps();
    } finally {
      clearInterval(report);
      stopStep = null;
    }
  }

  async function step(name: string, fn: () => unknown): Promise<void> {
    stopStep = name;
    await fn();
  }

  /** The step, with the host agent's own while it closes. */
  function currentStopStep(): string | null {
    return stopStep === 'host agent' && hostAgent ? `host agent: ${hostAgent.closeStep() ?? 'closing'}` : stopStep;
  }

  async function stopSteps(): Promise<void> {
    const deadline = performance.now() + config.shutdownGraceMs;
    stopStep = 'stop accepting';
    // Listening stops at once; the close callback comes once the last connection is gone.
    const apiClosed = apiServer ? new Promise<void>((resolve) => apiServer.close(() => resolve())) : Promise.resolve();
    apiServer?.closeIdleConnections();
    proxy.stopAccepting();
    // Upgraded connections (CDP relays, viewers) hold the server open: they end first.
    for (const set of cdpClients.values()) for (const r of set) void r.close(1001, 'the service is stopping');
    for (const set of viewers.values()) for (const ws of set) ws.terminate();
    wss.close();
    stopStep = 'gateway requests';
    const drained = await pipeline.drain(config.shutdownGraceMs);
    if (drained.unfinished > 0) log.warn({ unfinished: drained.unfinished }, 'stopping: gateway requests still under way after the grace period are cut');
    const streaming = (res: import('node:http').ServerResponse) => String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
    stopStep = 'api requests';
    while ([...apiInFlight].some((r) => !streaming(r)) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    apiServer?.closeAllConnections();
    await apiClosed;
    if (healthServer) {
      const hs = healthServer;
      await step('health server', () => new Promise<void>((resolve) => {
        hs.close(() => resolve());
        hs.closeAllConnections();
      }));
    }
    await step('browser broker', () => broker.shutdown());
    await step('host rpc', () => hostRpc?.close());
    // The host's reconcile stops; nothing is written about its environments (the process
    // sandbox's end with this process; they start again with the host).
    await step('host agent', () => hostAgent?.close());
    await step('host rpc client', () => hostRpcClient.close());
    await step('proxy', () => proxy.close());
    await step('upstream', () => upstream.close());
    await step('oauth http', () => oauthHttp.close());
    await step('webhook delivery', () => webhookDelivery.close());
    await step('slack delivery', () => slackDelivery.close());
    await step('slack api', () => slackApi.close());
    await step('jobs', () => jobs.stop());
    approvals.close();
    // After the API and proxy stop taking requests: write what the audit queue holds.
    await step('audit', () => audit.close());
    await step('database', () => db.destroy());
  }
}
