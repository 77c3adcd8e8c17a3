/**
 * Endpoints that mint a new credential (issue 9, "Credential-minting endpoints"). A secret
 * the gateway swaps into such a request (a refresh token, a client secret, an API key, a
 * service-account token) buys whoever sent it a *new real credential* in the answer: an
 * access token, a session URL, an installation token, a key. The gateway never sees that
 * credential, so from then on no policy, approval or audit stands between the agent and
 * the API. The proxy therefore refuses to swap a secret into a request this table names,
 * unless the secret opts in (`allow_minting: true`, for a secret whose purpose is minting).
 *
 * PURE. Host and path are normalised exactly as the classifier does (http.ts:
 * normalizeHost, pathSegments: case, port, trailing dot, percent-encoding, `//`, dot
 * segments), so `/API/oauth.v2.access` and `/api/oauth%2Ev2.access` match. Because this
 * check guards hosts we know little about (the generic row matches any host), the path
 * is also read a second, looser way, and a match in either reading counts: percent-
 * decoding repeated (double encoding), `%2F` and `\` as separators, `;params` cut off a
 * segment, trailing dots and spaces dropped, Unicode case folded (`ſ` as `s`). Each of
 * those is how some server (IIS, Tomcat, WHATWG URL) reads a path.
 *
 * The table and why each row is in it: docs/classification.md "Credential-minting endpoints".
 * The proxy calls credentialMintingRule() after it has found the credentials of a request
 * and refuses (403 credential_minting_not_allowed) when a row matches and a secret lacks
 * allow_minting.
 */
import { READ_METHODS, normalizeHost, pathSegments } from './http.js';

/**
 * A path pattern over lowercased segments:
 *  - a literal segment (`token`, `oauth.v2.access`, `keys:upload`);
 *  - `*`: exactly one segment;
 *  - `**`: any number of segments (zero or more), anywhere in the pattern;
 *  - `*:verb`: one segment ending in `:verb` (Google's custom methods, `name:signJwt`).
 */
export type MintingPathPattern = readonly string[];

export interface MintingRow {
  readonly rule: string;
  /** An exact host; `*.example.com` for example.com and every subdomain; `*` for any host. */
  readonly host: string;
  /**
   * `any`: every method (Slack runs its Web API methods for any verb; token endpoints
   * that take GET). `write`: every method but GET, HEAD, OPTIONS. Or a list (uppercase).
   */
  readonly methods: 'any' | 'write' | readonly string[];
  /** Alternatives: the row matches when any pattern matches. */
  readonly path: readonly MintingPathPattern[];
}

const SLACK_MINTING_METHODS = [
  'oauth.access', // code → token (classic apps)
  'oauth.v2.access', // code or refresh token → token
  'oauth.v2.exchange', // legacy token → rotating token
  'oauth.v2.user.access', // code → user token
  'oauth.token', // workspace apps (retired; kept: the name says what it does)
  'openid.connect.token', // Sign in with Slack: code or refresh token → tokens
  'tooling.tokens.rotate', // refresh token → new app configuration token
  'apps.connections.open', // app-level token → Socket Mode WebSocket URL (a bearer URL)
  'rtm.connect', // RTM WebSocket URL (a bearer URL)
  'rtm.start',
  'apps.manifest.create', // answers with the new app's client secret, signing secret, verification token
  'apps.auth.external.get', // answers with a stored third-party OAuth access token
];

const slackRows = (host: string): MintingRow[] =>
  SLACK_MINTING_METHODS.map((m) => ({ rule: `slack.${m}`, host, methods: 'any', path: [['api', m]] }));

/** Segments between an `oauth`-like segment and `token` in the generic row. */
function genericTokenPaths(): MintingPathPattern[] {
  const out: MintingPathPattern[] = [];
  for (const x of ['oauth', 'oauth2']) {
    out.push(['**', x, 'token'], ['**', x, '*', 'token'], ['**', x, '*', '*', 'token'], ['**', x, 'access_token']);
  }
  out.push(['**', 'openid-connect', 'token'], ['**', 'connect', 'token'], ['**', 'o', 'token']);
  return out;
}

/**
 * Specific rows first; the first matching row names the result. Rule names of the first
 * version of this table are kept.
 */
export const CREDENTIAL_MINTING_ROWS: readonly MintingRow[] = [
  // Google OAuth 2.0: refresh token, code, JWT assertion or client credentials → access
  // token; the device flow's start. `*.googleapis.com` covers oauth2.googleapis.com and
  // its mTLS twin oauth2.mtls.googleapis.com; no Google API has a bare `/token` path. Any
  // method: a GET carrying a swapped secret there is nothing legitimate either.
  { rule: 'google.oauth2.token', host: '*.googleapis.com', methods: 'any', path: [['token'], ['device', 'code']] },
  { rule: 'google.www.oauth2.token', host: '*.googleapis.com', methods: 'any', path: [['oauth2', '*', 'token']] },
  { rule: 'google.accounts.token', host: 'accounts.google.com', methods: 'any', path: [['o', 'oauth2', 'token'], ['o', 'oauth2', 'device', 'code']] },
  { rule: 'google.accounts.token.v2', host: 'accounts.google.com', methods: 'any', path: [['o', 'oauth2', 'v2', 'token']] },
  // IAM Service Account Credentials API: every one of its methods (generateAccessToken,
  // generateIdToken, signJwt, signBlob) mints a credential for a service account.
  { rule: 'google.iamcredentials', host: 'iamcredentials.googleapis.com', methods: 'any', path: [['**']] },
  { rule: 'google.sts.token', host: 'sts.googleapis.com', methods: 'any', path: [['v1', 'token'], ['v1', 'oauthtoken']] },
  { rule: 'google.sts.token.beta', host: 'sts.googleapis.com', methods: 'any', path: [['v1beta', 'token']] },
  // IAM: a new service-account key, an uploaded public key (the agent holds the private
  // half), and the older signBlob/signJwt on iam.googleapis.com.
  {
    rule: 'google.iam.serviceAccounts.keys',
    host: 'iam.googleapis.com',
    methods: ['POST'],
    path: [['v1', 'projects', '*', 'serviceaccounts', '*', 'keys'], ['v1', 'projects', '*', 'serviceaccounts', '*', 'keys:upload']],
  },
  { rule: 'google.iam.serviceAccounts.sign', host: 'iam.googleapis.com', methods: ['POST'], path: [['v1', 'projects', '*', 'serviceaccounts', '*:signblob'], ['v1', 'projects', '*', 'serviceaccounts', '*:signjwt']] },
  // API Keys API: a new key, or the string of an existing one.
  { rule: 'google.apikeys.create', host: 'apikeys.googleapis.com', methods: ['POST'], path: [['v2', 'projects', '*', 'locations', '*', 'keys']] },
  { rule: 'google.apikeys.getKeyString', host: 'apikeys.googleapis.com', methods: 'any', path: [['v2', 'projects', '*', 'locations', '*', 'keys', '*:getkeystring']] },
  // Firebase Auth: refresh token → ID token.
  { rule: 'google.securetoken', host: 'securetoken.googleapis.com', methods: 'any', path: [['v1', 'token']] },

  // Slack Web API (any verb; method names compare case-insensitively), on slack.com, every
  // workspace subdomain (Slack serves /api/ there too), and GovSlack.
  ...slackRows('*.slack.com'),
  ...slackRows('*.slack-gov.com'),

  // Stripe: keys, sessions and links that act on the account or a customer, a stored
  // secret read back, and Connect OAuth.
  ...(
    [
      ['stripe.ephemeral_keys', ['v1', 'ephemeral_keys']],
      ['stripe.account_links', ['v1', 'account_links']],
      ['stripe.account_sessions', ['v1', 'account_sessions']],
      ['stripe.accounts.login_links', ['v1', 'accounts', '*', 'login_links']],
      ['stripe.customer_sessions', ['v1', 'customer_sessions']],
      ['stripe.terminal.connection_tokens', ['v1', 'terminal', 'connection_tokens']],
      ['stripe.billing_portal.sessions', ['v1', 'billing_portal', 'sessions']], // a URL that is signed in as the customer
      ['stripe.v2.account_links', ['v2', 'core', 'account_links']],
      ['stripe.v2.meter_event_session', ['v2', 'billing', 'meter_event_session']], // a token for the meter event stream
    ] as const
  ).map(([rule, path]): MintingRow => ({ rule, host: 'api.stripe.com', methods: ['POST'], path: [path] })),
  { rule: 'stripe.apps.secrets.find', host: 'api.stripe.com', methods: 'any', path: [['v1', 'apps', 'secrets', 'find']] }, // answers with a stored secret
  { rule: 'stripe.connect.oauth.token', host: 'connect.stripe.com', methods: 'any', path: [['oauth', 'token']] },

  // GitHub.
  { rule: 'github.app.installations.access_tokens', host: 'api.github.com', methods: ['POST'], path: [['app', 'installations', '*', 'access_tokens']] },
  // PATCH resets a token (the new one is in the answer); POST .../scoped mints a narrower
  // one. POST .../token only checks the token sent, DELETE revokes: neither mints.
  { rule: 'github.applications.token', host: 'api.github.com', methods: ['PATCH'], path: [['applications', '*', 'token']] },
  { rule: 'github.applications.token', host: 'api.github.com', methods: ['POST'], path: [['applications', '*', 'token', 'scoped']] },
  { rule: 'github.app_manifests.conversions', host: 'api.github.com', methods: ['POST'], path: [['app-manifests', '*', 'conversions']] }, // the new app's secrets and key
  // Self-hosted runner tokens: a registered runner receives the workflows' secrets.
  {
    rule: 'github.actions.runners.token',
    host: 'api.github.com',
    methods: ['POST'],
    path: [['**', 'actions', 'runners', 'registration-token'], ['**', 'actions', 'runners', 'remove-token'], ['**', 'actions', 'runners', 'generate-jitconfig']],
  },
  // An SSH key the agent supplies (it holds the private half): the user's, or a deploy key.
  { rule: 'github.keys', host: 'api.github.com', methods: ['POST'], path: [['user', 'keys'], ['repos', '*', '*', 'keys']] },
  { rule: 'github.login.oauth.access_token', host: 'github.com', methods: 'any', path: [['login', 'oauth', 'access_token'], ['login', 'device', 'code']] },

  // Microsoft identity platform (every /{tenant}/oauth2/... path: token, devicecode, v1 and
  // v2.0), the legacy login.windows.net alias, Microsoft accounts, and Graph actions that
  // mint app secrets, keys, Temporary Access Passes and passwords. Sovereign clouds'
  // token paths are caught by the generic row.
  { rule: 'microsoft.oauth2.token', host: 'login.microsoftonline.com', methods: 'any', path: [['*', 'oauth2', '**']] },
  { rule: 'microsoft.oauth2.token', host: 'login.windows.net', methods: 'any', path: [['*', 'oauth2', '**']] },
  { rule: 'microsoft.live.token', host: 'login.live.com', methods: 'any', path: [['oauth20_token.srf'], ['oauth20_connect.srf']] },
  {
    rule: 'microsoft.graph.credentials',
    host: 'graph.microsoft.com',
    methods: ['POST'],
    path: ['addpassword', 'addkey', 'addtokensigningcertificate', 'resetpassword', 'temporaryaccesspassmethods'].flatMap((a) => [
      ['**', a],
      ['**', `microsoft.graph.${a}`],
    ]),
  },
  // Facebook's token endpoint answers GET.
  { rule: 'facebook.oauth.access_token', host: 'graph.facebook.com', methods: 'any', path: [['oauth', 'access_token'], ['*', 'oauth', 'access_token']] },

  // Any host: the conventional OAuth 2.0 token paths (RFC 6749 leaves the path to the
  // server; these are what servers use): .../oauth/token, .../oauth2/token,
  // .../oauth2/v2.0/token, .../o/oauth2/token, .../oauth2/default/v1/token (Okta),
  // .../oauth/access_token, .../openid-connect/token (Keycloak), .../connect/token
  // (IdentityServer), .../o/token (django-oauth-toolkit). Write methods only: GET on such
  // a path elsewhere (an object named `token` in a bucket `o/`) must stay usable.
  { rule: 'generic.oauth.token', host: '*', methods: 'write', path: genericTokenPaths() },
];

function hostMatches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) {
    const suffix = pattern.slice(2);
    return host === suffix || host.endsWith(`.${suffix}`);
  }
  return host === pattern;
}

function methodMatches(spec: MintingRow['methods'], method: string): boolean {
  if (spec === 'any') return true;
  if (spec === 'write') return !READ_METHODS.has(method);
  return spec.includes(method);
}

function segmentMatches(want: string, seg: string): boolean {
  if (want === '*') return true;
  if (want.startsWith('*:')) return seg.endsWith(want.slice(1));
  return want === seg;
}

/**
 * Glob match of segments against a pattern, `**` anywhere; linear in the segments (a set
 * of pattern positions is carried along), so a path of thousands of segments costs
 * thousands of steps, never their square.
 */
export function matchMintingPath(segs: readonly string[], pattern: MintingPathPattern): boolean {
  const m = pattern.length;
  let states = new Set<number>([0]);
  const close = (s: Set<number>): Set<number> => {
    for (const j of [...s]) for (let k = j; k < m && pattern[k] === '**'; k++) s.add(k + 1);
    return s;
  };
  close(states);
  for (const seg of segs) {
    const next = new Set<number>();
    for (const j of states) {
      if (j >= m) continue;
      const want = pattern[j]!;
      if (want === '**') next.add(j);
      else if (segmentMatches(want, seg)) next.add(j + 1);
    }
    if (next.size === 0) return false;
    states = close(next);
  }
  return states.has(m);
}

/**
 * The literal a pattern's last element requires of a path's last segment, or null (`*`,
 * `**`, `*:verb`): a path whose last segment differs cannot match (the last element
 * consumes exactly the last segment), so the matcher need not run. Exact, never a guess:
 * the property test checks it against matchMintingPath.
 */
export function requiredLastSegment(pattern: MintingPathPattern): string | null {
  const last = pattern[pattern.length - 1];
  return last === undefined || last.startsWith('*') ? null : last;
}

/** Each row's patterns with the last segment they require (POSTs anywhere meet the generic row's 11). */
const COMPILED_ROWS = CREDENTIAL_MINTING_ROWS.map((row) => ({
  row,
  patterns: row.path.map((pattern) => ({ pattern, last: requiredLastSegment(pattern) })),
}));

/** The path part of an origin-form (or absolute-form) target. */
function pathname(target: string): string {
  let t = target;
  if (!t.startsWith('/')) {
    try {
      t = new URL(t).pathname;
    } catch {
      t = `/${t}`;
    }
  }
  const cut = t.search(/[?#]/);
  return cut === -1 ? t : t.slice(0, cut);
}

/** ASCII percent-escapes decoded, repeatedly (at most 3 rounds: `%252E` → `%2E` → `.`). */
function decodeAscii(s: string): string {
  let out = s;
  for (let i = 0; i < 3; i++) {
    const next = out.replace(/%([0-7][0-9A-Fa-f])/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    if (next === out) break;
    out = next;
  }
  return out;
}

/** The loose reading of a request target's path (origin- or absolute-form, query and fragment cut). */
export function looseTargetSegments(target: string): string[] {
  return looseSegments(pathname(target));
}

/** The loose reading (see the file comment). */
export function looseSegments(path: string): string[] {
  const out: string[] = [];
  for (const raw of decodeAscii(path).replace(/\\/g, '/').split('/')) {
    const semi = raw.indexOf(';');
    let seg = semi === -1 ? raw : raw.slice(0, semi);
    if (seg === '..') {
      out.pop();
      continue;
    }
    seg = seg.replace(/[. ]+$/, ''); // IIS drops trailing dots and spaces; also takes `.` and `...` away
    if (seg === '') continue;
    out.push(seg.toUpperCase().toLowerCase());
  }
  return out;
}

/**
 * The table row name (e.g. 'google.oauth2.token') when this request asks a known endpoint
 * to mint a new credential, else null. `path` is origin-form, with or without a query
 * (an absolute-form target is accepted too). Never throws.
 */
export function credentialMintingRule(req: { method: string; host: string; path: string }): string | null {
  const host = normalizeHost(req.host);
  const method = req.method.trim().toUpperCase();
  const raw = pathname(req.path);
  const strict = pathSegments(raw).map((s) => s.toLowerCase());
  const loose = looseSegments(raw);
  const strictLast = strict[strict.length - 1];
  const looseLast = loose[loose.length - 1];
  for (const { row, patterns } of COMPILED_ROWS) {
    if (!methodMatches(row.methods, method) || !hostMatches(row.host, host)) continue;
    for (const { pattern, last } of patterns) {
      if (last !== null && last !== strictLast && last !== looseLast) continue;
      if (matchMintingPath(strict, pattern) || matchMintingPath(loose, pattern)) return row.rule;
    }
  }
  return null;
}
