/**
 * The one registry of error codes: each code the API or the gateway can answer with,
 * its HTTP status, and a one-line meaning that docs/errors.md repeats (a test keeps
 * the two in step). Code is thrown as ServiceError(code, message); anything else that
 * escapes becomes a bare 500 `internal_error`, logged with its cause.
 */
export const ERROR_CODES = {
  // Conventions (decisions.md)
  invalid_request: { status: 400, meaning: 'A value of the right shape breaks a rule (range, length, format, cross-field), or the JSON body or query string cannot be parsed' },
  unauthorized: { status: 401, meaning: 'Missing, malformed, unknown or revoked API key' },
  not_found: { status: 404, meaning: 'No such resource (missing or another developer\'s), or no such route' },
  unsupported_media_type: { status: 415, meaning: 'A request with a body lacks Content-Type: application/json' },
  invalid_body: { status: 422, meaning: 'The body\'s shape is wrong: a missing field, a wrong type, a value outside an enum, an unknown field, or a batch of 0 or more than 200 items' },
  internal_error: { status: 500, meaning: 'Internal error; details only in the server log' },
  // Approvals
  invalid_decision: { status: 400, meaning: 'The decision body is not a valid decision' },
  missing_scope: { status: 400, meaning: 'approve without a scope, or a task or session scope with an empty id' },
  invalid_scope: { status: 400, meaning: 'task_id or session_id does not match the request\'s own, or `until` is not in the future' },
  scope_too_wide: { status: 403, meaning: 'The scope is wider than the request\'s max_scope' },
  already_decided: { status: 409, meaning: 'The approval request was already decided or has expired' },
  invalid_signature: { status: 401, meaning: 'Signed callback with a missing or wrong signature' },
  // Environments
  environment_exists: { status: 409, meaning: 'The end user already has a non-destroyed environment; carries environment_id' },
  idempotency_key_reused: { status: 409, meaning: 'The Idempotency-Key was used for a different end user; carries environment_id' },
  invalid_state_transition: { status: 409, meaning: 'The move is not allowed from the environment\'s desired state (suspend on stopped or destroyed, resume or wake on destroyed)' },
  environment_failed: { status: 409, meaning: 'exec or file call on a failed environment' },
  environment_destroyed: { status: 409, meaning: 'The environment is destroyed (config, idle, wakeups, browser lease)' },
  limit_exceeded: { status: 409, meaning: 'resume, wake or exec after a usage limit suspended the environment' },
  template_not_ready: { status: 409, meaning: 'The template version is not ready' },
  template_exists: { status: 409, meaning: 'A template with that name and version already exists' },
  rollout_in_progress: { status: 409, meaning: 'An agent version rollout is already running for this developer' },
  wakeup_limit_reached: { status: 429, meaning: 'More than 100 pending wakeups' },
  environment_not_placed: { status: 503, meaning: 'Not placed on a host within 15 seconds' },
  environment_not_running: { status: 503, meaning: 'Not up within 90 seconds' },
  host_unavailable: { status: 503, meaning: 'Host offline' },
  guest_unavailable: { status: 503, meaning: 'VM cannot be reached or disconnected midway' },
  exec_failed: { status: 503, meaning: 'Process could not be started in the VM' },
  exec_timeout: { status: 503, meaning: 'A synchronous exec did not finish within its timeout' },
  file_operation_failed: { status: 503, meaning: 'A file operation hit an unexpected error' },
  // Console
  member_exists: { status: 409, meaning: 'A team member with this email already exists for the developer' },
  // Connections
  no_oauth_client: { status: 409, meaning: 'Authorize without a registered app or platform test app' },
  // Browser
  profile_exists: { status: 409, meaning: 'Browser profile name not unique per end user' },
  profile_in_use: { status: 409, meaning: 'Deleting a profile used by a pending, active or releasing lease' },
  profile_locked: { status: 409, meaning: 'A second write lease on a profile' },
  lease_not_active: { status: 409, meaning: 'renew, takeover, handback or release in a state that forbids it' },
  not_taken_over: { status: 409, meaning: 'handback on a lease not taken over' },
  lease_limit_reached: { status: 429, meaning: 'Browser lease concurrency limit (a count, not a rate)' },
  // The agent's control socket (docs/environments.md lists its own refusals)
  rate_limited: { status: 429, meaning: 'Too many requests from one environment\'s control socket (10 a second, 20 at once); Retry-After says when to try again' },
  // Gateway (what the agent gets from the proxy, with header X-Gateway-Error)
  proxy_auth_required: { status: 407, meaning: 'Proxy request without valid environment proxy credentials' },
  egress_denied: { status: 403, meaning: 'Host not on the effective egress allowlist, or a private address' },
  secret_host_not_allowed: { status: 403, meaning: 'A secret placeholder sent to a host (or a port) outside its allowed_hosts' },
  secret_location_not_allowed: { status: 403, meaning: 'A placeholder or stand-in token outside the places its credential may be swapped into (the Authorization header, or the secret\'s inject list)' },
  credential_minting_not_allowed: { status: 403, meaning: 'A credential sent to an endpoint that mints new credentials, and the secret does not allow_minting' },
  cleartext_not_allowed: { status: 403, meaning: 'Cleartext in a tunnel to port 443, or a credential in a cleartext request' },
  invalid_task_header: { status: 400, meaning: 'X-Service-Task-Id or X-Service-Session-Id longer than 255 characters or with control characters' },
  host_mismatch: { status: 421, meaning: 'The Host header or absolute URL names another host than the tunnel or proxy target' },
  policy_denied: { status: 403, meaning: 'A deny rule, or no rule for a read or write' },
  approval_denied: { status: 403, meaning: 'The approval request for this request was denied' },
  approval_expired: { status: 403, meaning: 'Nobody decided the approval request in time' },
  connection_revoked: { status: 401, meaning: 'Stand-in token of a revoked connection' },
  connection_error: { status: 401, meaning: 'Stand-in token of a connection whose refresh the provider rejected' },
  payload_too_large: { status: 413, meaning: 'A held or scanned request body is larger than the gateway buffers' },
  upstream_unreachable: { status: 502, meaning: 'The upstream could not be reached' },
  upstream_timeout: { status: 504, meaning: 'The upstream did not answer in time' },
  gateway_unavailable: { status: 503, meaning: 'The store or the audit log cannot take the request; the gateway fails closed' },
} as const satisfies Record<string, { status: number; meaning: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export class ServiceError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ServiceError';
    this.status = ERROR_CODES[code].status;
  }

  toBody(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

export function serviceError(code: ErrorCode, message: string, extra?: Record<string, unknown>): ServiceError {
  return new ServiceError(code, message, extra);
}

export const notFound = (): ServiceError => new ServiceError('not_found', 'no such resource');
