/**
 * Endpoints that mint a new credential (issue 9, hole 1). A secret the gateway swaps into
 * such a request (a refresh token, a client secret, an API key) would buy the agent a real
 * credential the gateway never sees; from then on nothing stands between the agent and
 * that API. The gateway refuses swaps into these requests (403
 * `credential_minting_not_allowed`) unless the secret opts in with `allow_minting`.
 *
 * PURE. Host and path are normalised exactly as the classifier does (case, port, trailing
 * dot, percent-encoding, `//`, dot segments), so `/API/oauth%2Ev2.access` still matches.
 * The table and why each row is here: docs/classification.md "Credential-minting endpoints".
 */
import { normalizeHost, pathSegments } from './http.js';

export interface MintingRow {
  readonly rule: string;
  /** An exact host, or `*.suffix` for every subdomain. */
  readonly host: string;
  /** `POST`, or `any` (Slack runs its Web API methods for any verb). */
  readonly methods: 'POST' | 'any';
  /** Lower-cased segments; `*` one segment, a trailing `**` any number. */
  readonly path: readonly string[];
}

export const CREDENTIAL_MINTING_ROWS: readonly MintingRow[] = [
  // Google OAuth 2.0 token endpoints (refresh token / code / JWT bearer → access token).
  { rule: 'google.oauth2.token', host: 'oauth2.googleapis.com', methods: 'POST', path: ['token'] },
  { rule: 'google.accounts.token', host: 'accounts.google.com', methods: 'POST', path: ['o', 'oauth2', 'token'] },
  { rule: 'google.accounts.token.v2', host: 'accounts.google.com', methods: 'POST', path: ['o', 'oauth2', 'v2', 'token'] },
  { rule: 'google.www.oauth2.token', host: 'www.googleapis.com', methods: 'POST', path: ['oauth2', '*', 'token'] },
  // Service-account impersonation and token exchange.
  { rule: 'google.iamcredentials', host: 'iamcredentials.googleapis.com', methods: 'POST', path: ['v1', 'projects', '*', 'serviceaccounts', '**'] },
  { rule: 'google.sts.token', host: 'sts.googleapis.com', methods: 'POST', path: ['v1', 'token'] },
  { rule: 'google.sts.token.beta', host: 'sts.googleapis.com', methods: 'POST', path: ['v1beta', 'token'] },
  // Slack: token exchange, rotation, and methods that hand out a connection secret.
  { rule: 'slack.oauth.v2.access', host: 'slack.com', methods: 'any', path: ['api', 'oauth.v2.access'] },
  { rule: 'slack.oauth.access', host: 'slack.com', methods: 'any', path: ['api', 'oauth.access'] },
  { rule: 'slack.oauth.v2.exchange', host: 'slack.com', methods: 'any', path: ['api', 'oauth.v2.exchange'] },
  { rule: 'slack.oauth.v2.user.access', host: 'slack.com', methods: 'any', path: ['api', 'oauth.v2.user.access'] },
  { rule: 'slack.openid.connect.token', host: 'slack.com', methods: 'any', path: ['api', 'openid.connect.token'] },
  { rule: 'slack.tooling.tokens.rotate', host: 'slack.com', methods: 'any', path: ['api', 'tooling.tokens.rotate'] },
  { rule: 'slack.apps.connections.open', host: 'slack.com', methods: 'any', path: ['api', 'apps.connections.open'] },
  { rule: 'slack.rtm.connect', host: 'slack.com', methods: 'any', path: ['api', 'rtm.connect'] },
  // Stripe: keys, sessions and links that act on the account.
  { rule: 'stripe.ephemeral_keys', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'ephemeral_keys'] },
  { rule: 'stripe.account_links', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'account_links'] },
  { rule: 'stripe.account_sessions', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'account_sessions'] },
  { rule: 'stripe.accounts.login_links', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'accounts', '*', 'login_links'] },
  { rule: 'stripe.customer_sessions', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'customer_sessions'] },
  { rule: 'stripe.terminal.connection_tokens', host: 'api.stripe.com', methods: 'POST', path: ['v1', 'terminal', 'connection_tokens'] },
  { rule: 'stripe.apps.secrets.find', host: 'api.stripe.com', methods: 'any', path: ['v1', 'apps', 'secrets', 'find'] },
  { rule: 'stripe.connect.oauth.token', host: 'connect.stripe.com', methods: 'POST', path: ['oauth', 'token'] },
  // GitHub: installation tokens, token reset/scoping, OAuth exchange.
  { rule: 'github.app.installations.access_tokens', host: 'api.github.com', methods: 'POST', path: ['app', 'installations', '*', 'access_tokens'] },
  { rule: 'github.applications.token', host: 'api.github.com', methods: 'any', path: ['applications', '*', 'token', '**'] },
  { rule: 'github.login.oauth.access_token', host: 'github.com', methods: 'POST', path: ['login', 'oauth', 'access_token'] },
  // Microsoft identity platform.
  { rule: 'microsoft.oauth2.token', host: 'login.microsoftonline.com', methods: 'POST', path: ['*', 'oauth2', '**'] },
];

/** Any host: the conventional OAuth 2.0 token paths (RFC 6749 leaves the path open; these are what servers use). */
function genericTokenPath(lower: readonly string[]): boolean {
  const n = lower.length;
  if (n < 2 || lower[n - 1] !== 'token') return false;
  // .../oauth/token, .../oauth2/token, .../oauth2/v2.0/token, .../o/oauth2/token, .../oauth2/v1/token
  const prev = lower[n - 2]!;
  if (prev === 'oauth' || prev === 'oauth2') return true;
  return n >= 3 && (lower[n - 3] === 'oauth2' || lower[n - 3] === 'oauth') && /^v\d+(\.\d+)?$/.test(prev);
}

function hostMatches(pattern: string, host: string): boolean {
  return pattern.startsWith('*.') ? host.endsWith(pattern.slice(1)) : host === pattern;
}

function pathMatches(lower: readonly string[], pattern: readonly string[]): boolean {
  const rest = pattern[pattern.length - 1] === '**';
  const fixed = rest ? pattern.length - 1 : pattern.length;
  if (rest ? lower.length < fixed : lower.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) if (pattern[i] !== '*' && pattern[i] !== lower[i]) return false;
  return true;
}

/**
 * The row name when this request asks a known endpoint to mint a new credential, else null.
 * `path` is origin-form, with or without a query.
 */
export function credentialMintingRule(req: { method: string; host: string; path: string }): string | null {
  const host = normalizeHost(req.host);
  const method = req.method.trim().toUpperCase();
  const q = req.path.search(/[?#]/);
  const lower = pathSegments(q < 0 ? req.path : req.path.slice(0, q)).map((s) => s.toLowerCase());
  for (const row of CREDENTIAL_MINTING_ROWS) {
    if (row.methods === 'POST' && method !== 'POST') continue;
    if (hostMatches(row.host, host) && pathMatches(lower, row.path)) return row.rule;
  }
  if (method === 'POST' && genericTokenPath(lower)) return 'generic.oauth.token';
  return null;
}
