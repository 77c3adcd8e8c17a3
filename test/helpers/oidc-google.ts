import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { Agent, request, type Dispatcher } from 'undici';
import type { CaMaterial } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';

/**
 * A real OAuth 2.0 / OpenID Connect server (panva's oidc-provider) standing in for Google in
 * tests: HTTPS on localhost with a certificate from a test CA, one confidential client,
 * PKCE required, refresh tokens, revocation and introspection. `signIn` plays the end user's
 * browser through its development login and consent pages and returns the callback query
 * the provider redirected to.
 */
export interface OidcGoogle {
  issuer: string;
  authUrl: string;
  tokenUrl: string;
  revokeUrl: string;
  /** Opens `authUrl` as the end user `email`, signs in, consents; resolves with the redirect's query (code, state, or error). */
  signIn(authUrl: string, email: string): Promise<URLSearchParams>;
  /** Introspects a token at the provider (is it real and active, for which client and scopes). */
  introspect(token: string): Promise<{ active: boolean; client_id?: string; scope?: string; token_type?: string }>;
  close(): Promise<void>;
}

const GOOGLE_SCOPES = [
  'https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send', 'https://www.googleapis.com/auth/calendar.events.owned',
];

export async function startOidcGoogle(opts: { ca: CaMaterial; clientId: string; clientSecret: string; redirectUri: string }): Promise<OidcGoogle> {
  const leaf = (await createLeafIssuer(opts.ca)).getLeaf('localhost');
  const server: Server = createServer({ key: leaf.keyPem, cert: leaf.certPem });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `https://localhost:${(server.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: opts.clientId, client_secret: opts.clientSecret, redirect_uris: [opts.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_post',
    }],
    scopes: ['openid', 'email', 'offline_access', ...GOOGLE_SCOPES],
    claims: { openid: ['sub'], email: ['email'] },
    // oidc-provider's default (unlike Google): scope-requested claims only at userinfo, so the
    // id_token carries no email and the gateway must find it there (connections/providers/google.ts).
    conformIdTokenClaims: true,
    findAccount: async (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub, email: sub }) }),
    pkce: { required: () => true },
    // Google issues a refresh token for access_type=offline with prompt=consent; this stand-in always does.
    issueRefreshToken: async () => true,
    features: { revocation: { enabled: true }, introspection: { enabled: true }, devInteractions: { enabled: true } },
    cookies: { keys: ['test-cookie-key-0123456789'] },
    ttl: { AccessToken: 3600, AuthorizationCode: 600, RefreshToken: 86_400 * 30, Grant: 86_400 * 30, Interaction: 600, Session: 86_400 },
  } as never);
  server.on('request', provider.callback());
  const http: Dispatcher = new Agent({ connect: { ca: opts.ca.certPem } });

  /** A minimal browser: follows redirects on the provider, keeping its cookies, until one leaves it. */
  async function browse(start: string, form?: Record<string, string>): Promise<string> {
    const jar = new Map<string, string>();
    let url = start;
    let body = form ? new URLSearchParams(form).toString() : undefined;
    let method: 'GET' | 'POST' = form ? 'POST' : 'GET';
    for (let hop = 0; hop < 10; hop++) {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const r = await request(url, {
        dispatcher: http, method, body,
        headers: { ...(cookie ? { cookie } : {}), ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      });
      const setCookie = r.headers['set-cookie'];
      for (const c of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
        const [pair] = c.split(';');
        const eq = pair!.indexOf('=');
        jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
      await r.body.text();
      const location = r.headers.location as string | undefined;
      if (!location) throw new Error(`the provider stopped at ${url} with ${r.statusCode}`);
      const next = new URL(location, url);
      if (next.origin !== issuer) return next.toString();
      url = next.toString();
      method = 'GET';
      body = undefined;
      // An interaction page: answer it as the end user would (the dev login, then consent).
      if (/\/interaction\/[^/]+$/.test(next.pathname)) return `${issuer}${next.pathname}|${[...jar].map(([k, v]) => `${k}=${v}`).join('; ')}`;
    }
    throw new Error('too many redirects at the provider');
  }

  async function submit(interaction: string, form: Record<string, string>): Promise<string> {
    const [url, cookie] = interaction.split('|') as [string, string];
    const jar = new Map(cookie.split('; ').filter(Boolean).map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)] as [string, string]));
    const r = await request(url, { dispatcher: http, method: 'POST', body: new URLSearchParams(form).toString(), headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), 'content-type': 'application/x-www-form-urlencoded' } });
    const setCookie = r.headers['set-cookie'];
    for (const c of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = c.split(';');
      jar.set(pair!.slice(0, pair!.indexOf('=')), pair!.slice(pair!.indexOf('=') + 1));
    }
    await r.body.text();
    const resume = new URL(r.headers.location as string, url).toString();
    // Follow the resume with the session cookies.
    let at = resume;
    for (let hop = 0; hop < 10; hop++) {
      const rr = await request(at, { dispatcher: http, headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
      const sc = rr.headers['set-cookie'];
      for (const c of Array.isArray(sc) ? sc : sc ? [sc] : []) {
        const [pair] = c.split(';');
        jar.set(pair!.slice(0, pair!.indexOf('=')), pair!.slice(pair!.indexOf('=') + 1));
      }
      await rr.body.text();
      const next = new URL(rr.headers.location as string, at);
      if (next.origin !== issuer) return next.toString();
      if (/\/interaction\/[^/]+$/.test(next.pathname)) return `${issuer}${next.pathname}|${[...jar].map(([k, v]) => `${k}=${v}`).join('; ')}`;
      at = next.toString();
    }
    throw new Error('too many redirects after an interaction');
  }

  return {
    issuer,
    authUrl: `${issuer}/auth`,
    tokenUrl: `${issuer}/token`,
    revokeUrl: `${issuer}/token/revocation`,
    async signIn(authUrl, email) {
      let at = await browse(authUrl);
      for (let step = 0; step < 4 && at.includes('|'); step++) {
        const prompt: Record<string, string> = step === 0 ? { prompt: 'login', login: email, password: 'any' } : { prompt: 'consent' };
        at = await submit(at, prompt);
      }
      return new URL(at).searchParams;
    },
    async introspect(token) {
      const r = await request(`${issuer}/token/introspection`, {
        dispatcher: http, method: 'POST',
        body: new URLSearchParams({ token, client_id: opts.clientId, client_secret: opts.clientSecret }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      return (await r.body.json()) as { active: boolean; client_id?: string; scope?: string };
    },
    async close() {
      await http.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
