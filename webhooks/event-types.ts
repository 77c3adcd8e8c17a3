/**
 * Every webhook event type of service.md (Events → Webhooks) with its `data`: the spec's
 * fields for `approval.requested`, decisions.md ("Webhook data for the types the spec
 * leaves open") for the rest.
 *
 * Each event is queued with enqueueEvent (webhooks/outbox.ts) inside the transaction that
 * makes the change it reports. Where that change lives today:
 *
 * | type | cause | status |
 * |---|---|---|
 * | approval.requested | approvals/approvals.service.ts requestApproval | queued in the approval's transaction |
 * | connection.created / connection.revoked / connection.error | connections/ (OAuth callback, DELETE /v1/connections/{id}, token refresh) | queued in the connection's transaction |
 * | browser.takeover_requested | browser/ (control socket POST /browser/takeover) | cause not built yet |
 * | environment.agent_schedule_set / _deleted, agent_keep_awake / _released, agent_request_rejected | environments/agent.service.ts, called by the control socket (hosts/control-socket.ts); also recorded as environment events with source `agent` | queued in the action's transaction |
 *
 * Nothing is faked in the meantime: an event is only ever queued by its real cause.
 */
export interface ApprovalRequestedData {
  approval_id: string;
  env_id: string;
  connector: string;
  category: string;
  summary: string;
  max_scope: string;
  /** Integer Unix seconds (not RFC 3339). */
  expires_at: number;
  /** `{base_url}/v1/approvals/<approval_id>/decision`, absolute. */
  decision_url: string;
}

export interface ConnectionCreatedData {
  connection_id: string;
  end_user_id: string;
  provider: string;
  account: string | null;
  connectors: string[];
  /** Id of the connection this one replaced, or null. */
  replaced: string | null;
}

export interface ConnectionChangedData {
  connection_id: string;
  end_user_id: string;
  provider: string;
  reason: string | null;
}

export interface BrowserTakeoverRequestedData {
  lease_id: string;
  environment_id: string;
  reason: string | null;
}

export interface EnvironmentAgentData {
  environment_id: string;
  key?: string;
  cron?: string;
  tz?: string;
  at?: string;
  seconds?: number;
  reason?: string;
}

export interface WebhookEventData {
  'approval.requested': ApprovalRequestedData;
  'connection.created': ConnectionCreatedData;
  'connection.revoked': ConnectionChangedData;
  'connection.error': ConnectionChangedData;
  'browser.takeover_requested': BrowserTakeoverRequestedData;
  'environment.agent_schedule_set': EnvironmentAgentData;
  'environment.agent_schedule_deleted': EnvironmentAgentData;
  'environment.agent_keep_awake': EnvironmentAgentData;
  'environment.agent_keep_awake_released': EnvironmentAgentData;
  'environment.agent_request_rejected': EnvironmentAgentData;
}

export type WebhookEventType = keyof WebhookEventData;

export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = Object.freeze([
  'approval.requested',
  'connection.created',
  'connection.revoked',
  'connection.error',
  'browser.takeover_requested',
  'environment.agent_schedule_set',
  'environment.agent_schedule_deleted',
  'environment.agent_keep_awake',
  'environment.agent_keep_awake_released',
  'environment.agent_request_rejected',
] satisfies WebhookEventType[]);
