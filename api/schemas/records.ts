import Joi from 'joi';
import { CATEGORIES, EFFECTS, SCOPES } from '../../policy-engine/index.js';
import { AGENT_SETTINGS_DEFAULTS } from '../../environments/rules.js';

/**
 * The records the API answers with, once (issue 25, item 3): the OpenAPI document's
 * `components.schemas` are generated from these (`meta({component})` names each), and
 * test/integration/openapi-records.test.ts validates real answers of the running service
 * against them, so the document cannot drift from what the service sends. Every field
 * listed is required (the service always sends it, null when empty) unless `optional`
 * names it; an unlisted field fails the test.
 */

function record(name: string, keys: Record<string, Joi.Schema>, optional: readonly string[] = []): Joi.ObjectSchema {
  const out: Record<string, Joi.Schema> = {};
  for (const [k, v] of Object.entries(keys)) out[k] = optional.includes(k) ? v : v.required();
  return Joi.object(out).meta({ component: name });
}

/** RFC 3339 UTC with milliseconds. */
const ts = Joi.string().isoDate();
const tsOrNull = ts.allow(null);
const str = Joi.string().allow('');
const strOrNull = str.allow(null);
const int = Joi.number().integer();
const strings = Joi.array().items(Joi.string());

export const errorRecord = record('Error', {
  error: Joi.string().description('A stable code of docs/errors.md'),
  message: Joi.string().description('For people; may change'),
  environment_id: Joi.string().description('With environment_exists and idempotency_key_reused'),
}, ['environment_id']).description('Every error: {error, message}, plus environment_id where docs/errors.md says so');

export const environmentRecord = record('Environment', {
  id: Joi.string(),
  end_user_id: Joi.string(),
  agent_version: strOrNull,
  desired_state: Joi.string().valid('running', 'suspended', 'stopped', 'destroyed'),
  state: Joi.string().description('What the host reports: pending, starting, running, suspended, stopped, failed, destroyed, ...'),
  last_active_at: tsOrNull,
  idle: Joi.object({
    suspend_after_secs: int.required(),
    stop_after_secs: int.required(),
    keep_awake_until: tsOrNull.required(),
    next_step: Joi.string().valid('suspend', 'stop', null).required(),
    next_step_at: tsOrNull.required(),
  }),
  resources: Joi.object({ cpus: int.required(), memory_mib: int.required(), base_memory_mib: int.required(), disk_gib: int.required() }),
  template: strOrNull,
  host_id: strOrNull,
  failure_reason: strOrNull,
  limit_exceeded: Joi.boolean(),
  created_at: tsOrNull,
  updated_at: tsOrNull,
});

export const configurationRecord = record('Configuration', {
  env: Joi.object().pattern(/.*/, str),
  files: Joi.object().pattern(/.*/, Joi.object({ content: str.required(), encoding: Joi.string().valid('utf8', 'base64').required() })),
});

export const eventRecord = record('EnvironmentEvent', {
  id: int,
  environment_id: Joi.string(),
  kind: Joi.string(),
  source: Joi.string().valid('api', 'agent', 'system', 'host'),
  data: Joi.object().unknown(true),
  created_at: tsOrNull,
});

export const wakeupRecord = record('Wakeup', {
  id: Joi.string(), environment_id: Joi.string(), at: tsOrNull, reason: strOrNull,
  status: Joi.string().valid('pending', 'fired', 'cancelled'), created_at: tsOrNull,
});

export const scheduleRecord = record('Schedule', {
  id: Joi.string(), key: Joi.string(), cron: strOrNull, tz: strOrNull, at: tsOrNull, source: Joi.string(), next_run_at: tsOrNull, created_at: tsOrNull,
});

export const agentSettingsRecord = record('AgentSettings', Object.fromEntries(
  Object.entries(AGENT_SETTINGS_DEFAULTS).map(([k, v]) => [k, typeof v === 'boolean' ? Joi.boolean() : int]),
));

export const templateRecord = record('Template', {
  id: Joi.string(), name: Joi.string(), version: Joi.string(), ref: Joi.string(),
  status: Joi.string().valid('building', 'ready', 'failed'), created_at: tsOrNull, updated_at: tsOrNull,
});

export const execResultRecord = record('ExecResult', {
  exit_code: int.allow(null).description('128 + the signal number for a killed command'),
  stdout: str, stderr: str, duration_ms: int, stdout_truncated: Joi.boolean(), stderr_truncated: Joi.boolean(),
});

export const fileWrittenRecord = record('FileWritten', { path: Joi.string(), size: int });
export const fileReadRecord = record('FileContent', { path: Joi.string(), content: str.description('base64'), encoding: Joi.string().valid('base64'), size: int });

export const hostRecord = record('Host', {
  id: Joi.string(), name: Joi.string(), driver: Joi.string(), status: Joi.string(),
  draining: Joi.boolean().description('Placement puts nothing new here; what runs keeps running (`gateway hosts drain`)'),
  capacity: Joi.object({ cpus: int.required(), memory_mib: int.required() }),
  capabilities: Joi.any().description('The host\'s measured isolation'),
  last_heartbeat_at: ts,
});

export const usageRecord = record('Usage', {
  period: Joi.string(), period_start: tsOrNull, period_end: tsOrNull, running_seconds: Joi.number(),
  limit: Joi.object({ running_seconds: Joi.number().required() }).allow(null), limit_exceeded: Joi.boolean(),
});

export const agentVersionRecord = record('AgentVersionDefault', { default_version: strOrNull });

export const rolloutRecord = record('Rollout', {
  id: Joi.string(), version: Joi.string(), status: Joi.string().valid('running', 'completed'),
  upgraded: int, remaining: int, created_at: tsOrNull, completed_at: tsOrNull,
});

export const memberRecord = record('TeamMember', { id: Joi.string(), email: Joi.string(), name: Joi.string(), slack_user_id: strOrNull.description('Slack user id: presses of Slack approval cards by this user decide as this member'), created_at: tsOrNull });
export const createdMemberRecord = record('CreatedTeamMember', {
  id: Joi.string(), email: Joi.string(), name: Joi.string(), slack_user_id: strOrNull, created_at: tsOrNull,
  sign_in_url: Joi.string().description('One-time sign-in link of the console, shown once, valid 24 hours'),
});

export const secretRecord = record('Secret', {
  name: Joi.string(),
  placeholder: Joi.string().description('What the agent sends in place of the value; the gateway swaps it'),
  allowed_hosts: strings,
  infrastructure: Joi.boolean(),
  inject: strings,
  allow_minting: Joi.boolean().valid(true),
  created_at: tsOrNull,
}, ['inject', 'allow_minting']).description('A secret as the API shows it: never its value');

export const environmentEgressRecord = record('EnvironmentEgress', {
  allow: strings.allow(null), source: Joi.string().valid('environment', 'developer', 'none'), effective: strings,
  unknown_hosts: Joi.string().valid('deny', 'ask').description('A host off effective: refused (deny) or held for approval (ask)'),
});
export const developerEgressRecord = record('DeveloperEgress', { allow: strings });

export const gatewayAccessRecord = record('GatewayAccess', {
  proxy_url: Joi.string().description('http://<environment id>:<password>@host:port'),
  ca_cert_pem: Joi.string(),
});

export const webhookEndpointRecord = record('WebhookEndpoint', {
  url: Joi.string(),
  secret: Joi.string().description('Only in the answer to the PUT that created the endpoint: the signing secret, shown once'),
  secret_prefix: Joi.string(),
  previous_secret_expires_at: tsOrNull,
}, ['secret']);
export const webhookRotationRecord = record('WebhookSecretRotation', {
  secret: Joi.string().description('The new signing secret, shown once'),
  previous_secret_expires_at: ts.description('The old secret keeps signing until then (24 hours)'),
});

export const slackChannelRecord = record('SlackApprovalChannel', {
  type: Joi.string().valid('slack'), channel_id: Joi.string(), api_base_url: Joi.string(), created_at: ts, updated_at: ts,
}).description('The Slack approval channel (docs/slack-approvals.md): never the bot token or the signing secret');

export const webhookDeliveryRecord = record('WebhookDelivery', {
  id: Joi.string(), event_id: Joi.string(), event_type: strOrNull, url: strOrNull, attempted_at: ts,
  status: Joi.string().valid('succeeded', 'failed'), status_code: int.allow(null), error: strOrNull, duration_ms: int, next_attempt_at: tsOrNull,
});

export const policyConditionsRecord = record('PolicyConditions', {
  amount_over: Joi.object({ currency: Joi.string().required(), minor_units: int.min(0).required() }).description('The decoded amount in this currency is greater'),
  recipients_outside: strings.min(1).max(100).description('Some recipient is outside these domains (subdomains included)'),
  channels_outside: strings.min(1).max(100).description('The Slack channel is not one of these'),
  count_over: Joi.object({
    max: int.min(0).required(),
    per: Joi.string().valid('hour', 'day').required(),
    scope: Joi.string().valid('environment', 'end_user').description('Omitted: environment'),
  }).description('max requests of the rule\'s connector and category were already forwarded in the rolling window'),
}, ['amount_over', 'recipients_outside', 'channels_outside', 'count_over']);

export const policyRuleRecord = record('PolicyRule', {
  connector: Joi.string().min(1).max(100).description('Omitted: every connector (gmail, calendar, slack, secret:<NAME>, ...)'),
  category: Joi.string().valid(...CATEGORIES).description('Omitted: every category'),
  effect: Joi.string().valid(...EFFECTS),
  max_scope: Joi.string().valid(...SCOPES).description('Only on ask rules; omitted: permanent'),
  when: policyConditionsRecord.description('Conditions (issue 26): the rule matches only when every one holds; what cannot be read takes the riskier reading'),
  tool: Joi.string().description('An MCP tool (issue 28): the rule matches only requests calling exactly this tool'),
}, ['connector', 'category', 'max_scope', 'when', 'tool']);

export const policyRecord = record('Policy', {
  rules: Joi.array().items(policyRuleRecord),
  source: Joi.string().valid('environment', 'developer', 'default'),
});

export const grantRecord = record('Grant', {
  id: Joi.string(), environment_id: Joi.string(), connector: Joi.string(), category: Joi.string(),
  scope: Joi.string().valid('task', 'session', 'time_limited', 'permanent'),
  task_id: strOrNull, session_id: strOrNull, expires_at: tsOrNull, approval_id: Joi.string(), created_at: ts,
  // Spending mandates (issue 26, item 2): the decision's limits as given, and what was spent.
  limits: Joi.object({
    per_request_minor_units: int, total_minor_units: int, currency: Joi.string(), max_uses: int, recipients_within: strings,
  }).allow(null).description('The decision\'s limits (currency lower-cased), or null: a grant without limits'),
  used: Joi.object({ minor_units: int.required(), uses: int.required() })
    .description('Spent by requests under the grant, the approved one first; counted only on a grant with limits'),
  tool: Joi.string().description('Only on a grant of an MCP tool call (issue 28): it covers calls of this tool only (a batch\'s tools joined with ,)'),
}, ['tool']);

export const policyCheckRecord = record('PolicyCheck', {
  decision: Joi.string().valid('allow', 'ask', 'deny'),
  reason: Joi.string(),
  matched_rules: Joi.array().items(int),
  max_scope: Joi.string().valid(...SCOPES).description('Only when decision is ask'),
  grant: grantRecord.allow(null),
  source: Joi.string().valid('environment', 'developer', 'default'),
}, ['max_scope']);

export const policySimulationRecord = record('PolicySimulation', {
  evaluated: int.description('Recorded requests evaluated (those that reached the policy: a connector and a category)'),
  changed: int.description('Of those, how many the draft would decide differently'),
  transitions: Joi.object().pattern(/^(allow|ask|deny)->(allow|ask|deny)$/, int).description('"<was>-><would_be>" → how many; changed pairs only'),
  examples: Joi.array().items(record('PolicySimulationExample', {
    audit_id: Joi.string(), method: Joi.string(), host: Joi.string(), path: str, connector: Joi.string(), category: Joi.string(),
    was: Joi.string().valid('allow', 'ask', 'deny'), would_be: Joi.string().valid('allow', 'ask', 'deny'), matched_rules: Joi.array().items(int),
  })).max(50).description('At most 50 changed requests, newest first'),
});

export const approvalRecord = record('Approval', {
  id: Joi.string(), environment_id: Joi.string(), connector: Joi.string(), category: Joi.string(), summary: str,
  task_id: strOrNull, session_id: strOrNull, max_scope: Joi.string().valid(...SCOPES),
  status: Joi.string().valid('pending', 'approved', 'denied', 'expired'),
  scope: strOrNull, decided_via: Joi.string().valid('signature', 'api_key', 'console', 'slack', null),
  decided_at: tsOrNull, expires_at: ts, created_at: ts, grant_id: strOrNull,
  tool: Joi.string().description('Only on an MCP tool call (issue 28): the tool it calls (a batch\'s tools joined with ,)'),
}, ['tool']);

export const auditEntryRecord = record('AuditEntry', {
  id: Joi.string(), created_at: tsOrNull, environment_id: strOrNull, method: Joi.string(), host: Joi.string(), path: str,
  connector: strOrNull, category: strOrNull, credential: Joi.string().valid('connection', 'secret', 'none'),
  decision: Joi.string().valid('allow', 'deny', 'ask'), reason: strOrNull, matched_rules: Joi.any(),
  approval_id: strOrNull, grant_id: strOrNull, status: int, upstream_status: int.allow(null),
  bytes_in: int, bytes_out: int, duration_ms: Joi.number(), redacted: Joi.boolean().valid(true),
  // Issue 26: what the policy read from the request, bounded and scrubbed (docs/audit.md); present only when recorded.
  facts: Joi.object({
    amount: Joi.object({ currency: Joi.string().required(), minor_units: int.required() }).allow(null),
    recipients: Joi.array().items(Joi.string().allow('')).allow(null).description('At most 50; recipients_total says how many there were when more'),
    recipients_total: int,
    channel: strOrNull,
  }).allow(null).description('Present only when the request\'s facts were recorded; null when the stored value does not parse'),
  tool: Joi.string().description('Only on a request that called an MCP tool (issue 28)'),
  prev_hash: Joi.string(), hash: Joi.string(),
}, ['redacted', 'facts', 'tool']);

export const auditVerifyRecord = record('AuditVerify', {
  ok: Joi.boolean(), checked: int, first_broken_id: strOrNull, checked_from: strOrNull,
});

export const oauthClientRecord = record('OAuthClient', {
  provider: Joi.string(), client_id: strOrNull, platform_app_available: Joi.boolean(), redirect_uri: Joi.string(),
});
export const authorizationLinkRecord = record('AuthorizationLink', { url: Joi.string(), expires_at: ts });
export const connectionRecord = record('Connection', {
  id: Joi.string(), provider: Joi.string(), end_user_id: Joi.string(), account: strOrNull, connectors: strings,
  status: Joi.string().valid('active', 'error', 'revoked'), created_at: tsOrNull, revoked_at: tsOrNull,
});
export const standInTokenRecord = record('StandInToken', { connector: Joi.string(), connection_id: Joi.string(), token: Joi.string() });

export const profileRecord = record('BrowserProfile', {
  id: Joi.string(), end_user_id: Joi.string(), name: Joi.string(), version: int, created_at: tsOrNull, updated_at: tsOrNull,
});
export const leaseRecord = record('BrowserLease', {
  id: Joi.string(), environment_id: Joi.string(), profile_id: strOrNull,
  mode: Joi.string().valid('read', 'write', 'clean'), state: Joi.string().valid('pending', 'active', 'releasing', 'released', 'expired'),
  expires_at: tsOrNull, save_outcome: Joi.string().valid('saved', 'discarded', null), taken_over: Joi.boolean(),
  cdp_url: strOrNull.description('For chromium.connectOverCDP, while active'), vm_cdp_url: strOrNull, created_at: tsOrNull,
});
export const takeoverRecord = record('BrowserTakeover', { view_url: Joi.string(), expires_at: tsOrNull });
export const browserLimitsRecord = record('BrowserLimits', { per_developer: int, per_end_user: int, lease_secs: int, save_deadline_secs: int });

export const testClockRecord = record('TestClock', { now: ts });

/** `{data: [...], next}`: pass `next` as `after` for the next page. */
export function pageOf(item: Joi.Schema, name: string): Joi.ObjectSchema {
  return record(name, { data: Joi.array().items(item), next: Joi.string().allow(null) }).description('A page: pass next as after');
}

/** `{data: [...]}`: a list without paging. */
export function listOf(item: Joi.Schema, name: string, extra: Record<string, Joi.Schema> = {}): Joi.ObjectSchema {
  return record(name, { data: Joi.array().items(item), ...extra });
}

export const environmentPage = pageOf(environmentRecord, 'EnvironmentPage');
export const eventPage = record('EnvironmentEventPage', { data: Joi.array().items(eventRecord), next: int.allow(null) })
  .description('Events ascending by id; next is the last id when the page is full');
export const wakeupPage = pageOf(wakeupRecord, 'WakeupPage');
export const schedulePage = pageOf(scheduleRecord, 'SchedulePage');
export const templatePage = pageOf(templateRecord, 'TemplatePage');
export const approvalPage = pageOf(approvalRecord, 'ApprovalPage');
export const grantPage = pageOf(grantRecord, 'GrantPage');
export const auditPage = pageOf(auditEntryRecord, 'AuditEntryPage');
export const deliveryPage = pageOf(webhookDeliveryRecord, 'WebhookDeliveryPage');
export const profilePage = pageOf(profileRecord, 'BrowserProfilePage');
export const leasePage = pageOf(leaseRecord, 'BrowserLeasePage');

export const batchResultRecord = record('EnvironmentBatchResult', {
  data: Joi.array().items(Joi.alternatives().try(
    Joi.object({ environment: environmentRecord.required() }),
    errorRecord,
  )),
}).description('One result per item, in request order: {environment} or an error');

export const secretList = listOf(secretRecord, 'SecretList');
/** An MCP server registration (issue 28, docs/mcp.md). */
export const mcpServerRecord = record('McpServer', {
  name: Joi.string(),
  url: Joi.string().description('The server\'s Streamable HTTP endpoint'),
  secret: strOrNull.description('The secret swapped in as its bearer token, or null'),
  tools: Joi.object().pattern(/.*/, Joi.string().valid(...CATEGORIES)),
  default_category: Joi.string().valid(...CATEGORIES).allow(null),
  connector: Joi.string().description('The policy connector of its requests: mcp:<name>'),
  created_at: tsOrNull, updated_at: tsOrNull,
});
export const mcpServerList = listOf(mcpServerRecord, 'McpServerList');
export const hostList = listOf(hostRecord, 'HostList');
export const rolloutList = listOf(rolloutRecord, 'RolloutList');
export const memberList = listOf(memberRecord, 'TeamMemberList');
export const oauthClientList = listOf(oauthClientRecord, 'OAuthClientList');
export const standInTokenList = listOf(standInTokenRecord, 'StandInTokenList');
export const connectionList = listOf(connectionRecord, 'ConnectionList', { has_more: Joi.boolean().required() });

/** GET /healthz. */
export const healthRecord = record('Health', { status: Joi.string().valid('ok') });
/** GET /readyz: names and states only. */
export const readinessRecord = record('Readiness', {
  status: Joi.string().valid('ready', 'not_ready'),
  checks: Joi.object().pattern(/.*/, Joi.string().valid('ok', 'failing')),
});
