import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';

/**
 * The token vault (issue 11, item 4): an access token near its expiry is refreshed before
 * the gateway uses it, once per connection across processes (two services on one store
 * here, each with its own gateway), the rotated Slack refresh token saved with the new access
 * token, and a refused refresh turning the connection to `error` (401 connection_error).
 */
describe('connections: token refresh', function () {
  this.timeout(60_000);
  let up: FakeUpstream;
  let dir: string;
  let db: { url: string; drop(): Promise<void> };
  let a: TestService;
  let b: TestService;
  const codes = new Map<string, { challenge: string | null; scopes: string }>();
  /** Refresh grants the provider received, by refresh token. */
  const refreshes: string[] = [];
  const refreshClients: string[] = [];
  /** Slack: [refresh token used, refresh token issued] per refresh, in order. */
  const slackRotations: Array<[string, string]> = [];
  let refuseRefresh = false;
  let generation = 0;

  before(async () => {
    up = await startFakeUpstream();
    up.respond = (req, res) => {
      const form = new URLSearchParams(req.body.toString());
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.headers.host === 'oauth2.googleapis.com' && req.url === '/token') {
        if (form.get('grant_type') === 'refresh_token') {
          refreshes.push(form.get('refresh_token')!);
          refreshClients.push(form.get('client_id')!);
          if (refuseRefresh) return json(400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' });
          // An app that did not issue the grant cannot refresh it.
          if (form.get('client_id') === 'own-g') return json(401, { error: 'invalid_client', error_description: 'The OAuth client was not found.' });
          generation++;
          return json(200, { access_token: `ya29.refreshed-${generation}`, expires_in: 3599, scope: 'https://www.googleapis.com/auth/gmail.readonly https://www.googleapis.com/auth/gmail.send', token_type: 'Bearer' });
        }
        const issued = codes.get(form.get('code') ?? '');
        if (!issued || createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url') !== issued.challenge) return json(400, { error: 'invalid_grant' });
        return json(200, { access_token: 'ya29.first', refresh_token: '1//google-refresh', expires_in: 3599, scope: issued.scopes, token_type: 'Bearer' });
      }
      if (req.url === '/api/oauth.v2.access') {
        if (form.get('grant_type') === 'refresh_token') {
          refreshes.push(form.get('refresh_token')!);
          generation++;
          slackRotations.push([form.get('refresh_token')!, `xoxe-1-refresh-${generation}`]);
          // Token rotation: a new refresh token every time; the old one is dead.
          return json(200, { ok: true, access_token: `xoxe.xoxp-refreshed-${generation}`, refresh_token: `xoxe-1-refresh-${generation}`, expires_in: 43200, token_type: 'user', scope: 'channels:history,channels:read,groups:history,groups:read,chat:write,search:read' });
        }
        const issued = codes.get(form.get('code') ?? '');
        return json(200, { ok: true, authed_user: { id: 'U1', scope: issued?.scopes ?? '', access_token: 'xoxe.xoxp-first', refresh_token: 'xoxe-1-refresh-0', expires_in: 43200 }, team: { id: 'T1', name: 'T' } });
      }
      json(200, { path: req.url, auth: req.headers.authorization ?? null });
    };
    dir = mkdtempSync(join(tmpdir(), 'gw-refresh-'));
    writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
    db = freshDatabaseUrl();
    const shared = {
      DATABASE_URL: db.url,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
      GATEWAY_UPSTREAM_OVERRIDES: ['oauth2.googleapis.com', 'gmail.googleapis.com', 'slack.com'].map((h) => `${h}=127.0.0.1:${up.port}`).join(','),
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'),
      // The platform's own app, for a developer that registered none.
      GOOGLE_CLIENT_ID: 'platform-g',
      GOOGLE_CLIENT_SECRET: 'platform-gs',
    };
    a = await startTestService(shared);
    b = await startTestService(shared); // a second process's stack on the same store
    await a.api.put('/v1/oauth-clients/google', { client_id: 'g', client_secret: 'gs' });
    await a.api.put('/v1/oauth-clients/slack', { client_id: 's', client_secret: 'ss' });
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await up.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function environment(endUser: string): Promise<{ id: string; gwA: Gateway; gwB: Gateway }> {
    const env = await a.api.post('/v1/environments', { end_user_id: endUser, egress_allow: ['gmail.googleapis.com', 'slack.com'] });
    expect(env.status, env.text).to.equal(201);
    await a.api.put(`/v1/environments/${env.body.id}/policy`, { rules: [{ category: 'read', effect: 'allow' }] });
    return { id: env.body.id, gwA: (await a.api.get(`/v1/environments/${env.body.id}/gateway`)).body, gwB: (await b.api.get(`/v1/environments/${env.body.id}/gateway`)).body };
  }

  async function connect(endUser: string, connector: 'gmail' | 'slack'): Promise<string> {
    const r = await a.api.post('/v1/connections/authorize', { end_user_id: endUser, connectors: [connector], return_url: 'https://app.example.com/' });
    const q = new URL(r.body.url).searchParams;
    const code = `c-${Math.random().toString(36).slice(2)}`;
    codes.set(code, { challenge: q.get('code_challenge'), scopes: q.get('scope') ?? q.get('user_scope')! });
    const cb = await fetch(`${a.url}/v1/oauth/${connector === 'slack' ? 'slack' : 'google'}/callback?${new URLSearchParams({ state: q.get('state')!, code })}`, { redirect: 'manual' });
    return new URL(cb.headers.get('location')!).searchParams.get('connection_id')!;
  }

  async function get(gw: Gateway, url: string, token: string): Promise<{ status: number; error: string | null }> {
    const agent = proxyAgent(gw);
    try {
      const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
      await r.body.text();
      return { status: r.statusCode, error: (r.headers['x-gateway-error'] as string) ?? null };
    } finally {
      await agent.close();
    }
  }

  it('50 requests through two processes\' gateways hit an expired token at once: the provider sees exactly one refresh, every request goes out with the new token', async () => {
    const env = await environment('refresh-user');
    await connect('refresh-user', 'gmail');
    const token = (await a.api.get(`/v1/environments/${env.id}/stand-in-tokens`)).body.data[0].token as string;
    refreshes.length = 0;
    up.seen.length = 0;
    // Both processes' clocks past the expiry, without running their due jobs first (their
    // background refresh may still race the requests: one refresh in all is the point).
    a.svc.clock.advance(3600_000);
    b.svc.clock.advance(3600_000);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => get(i % 2 ? env.gwA : env.gwB, `https://gmail.googleapis.com/gmail/v1/users/me/messages?i=${i}`, token)));
    expect(results.filter((r) => r.status !== 200), JSON.stringify(results.filter((r) => r.status !== 200).slice(0, 3))).to.deep.equal([]);
    expect(refreshes).to.deep.equal(['1//google-refresh']);
    const apiCalls = up.seen.filter((s) => s.url.startsWith('/gmail/'));
    expect(apiCalls).to.have.length(50);
    expect(new Set(apiCalls.map((s) => s.headers.authorization))).to.deep.equal(new Set([`Bearer ya29.refreshed-${generation}`]));
  });

  it('slack: the rotated refresh token is saved with the new access token; the next refresh uses it', async () => {
    const env = await environment('slack-rotation');
    await connect('slack-rotation', 'slack');
    const token = (await a.api.get(`/v1/environments/${env.id}/stand-in-tokens`)).body.data[0].token as string;
    slackRotations.length = 0;
    await a.advance(43_200);
    expect((await get(env.gwA, 'https://slack.com/api/conversations.list', token)).status).to.equal(200);
    await a.advance(43_200);
    expect((await get(env.gwA, 'https://slack.com/api/conversations.list', token)).status).to.equal(200);
    // Refreshed (by the gateway or the background job) at least twice, each time with the
    // refresh token the previous refresh issued: the rotated one was saved every time.
    expect(slackRotations.length).to.be.at.least(2);
    expect(slackRotations[0]![0]).to.equal('xoxe-1-refresh-0');
    for (let i = 1; i < slackRotations.length; i++) expect(slackRotations[i]![0]).to.equal(slackRotations[i - 1]![1]);
    const last = up.seen.filter((x) => x.url === '/api/conversations.list').at(-1)!;
    expect(last.headers.authorization).to.match(/^Bearer xoxe\.xoxp-refreshed-\d+$/);
  });

  it('a connection issued under the platform app is refreshed with it after the developer registers an app of its own (a fourth review: the new app, which never issued it, erased it)', async () => {
    const other = await a.otherDeveloper();
    const env = await other.post('/v1/environments', { end_user_id: 'pinned-user', egress_allow: ['gmail.googleapis.com'] });
    expect(env.status, env.text).to.equal(201);
    await other.put(`/v1/environments/${env.body.id}/policy`, { rules: [{ category: 'read', effect: 'allow' }] });
    const gw: Gateway = (await other.get(`/v1/environments/${env.body.id}/gateway`)).body;
    const r = await other.post('/v1/connections/authorize', { end_user_id: 'pinned-user', connectors: ['gmail'], return_url: 'https://app.example.com/' });
    const q = new URL(r.body.url).searchParams;
    expect(q.get('client_id')).to.equal('platform-g');
    const code = `c-${Math.random().toString(36).slice(2)}`;
    codes.set(code, { challenge: q.get('code_challenge'), scopes: q.get('scope')! });
    const cb = await fetch(`${a.url}/v1/oauth/google/callback?${new URLSearchParams({ state: q.get('state')!, code })}`, { redirect: 'manual' });
    const id = new URL(cb.headers.get('location')!).searchParams.get('connection_id')!;
    expect(id).to.match(/^conn_/);
    const own = await other.put('/v1/oauth-clients/google', { client_id: 'own-g', client_secret: 'own-gs' });
    expect(own.status, own.text).to.be.oneOf([200, 201]);
    const token = (await other.get(`/v1/environments/${env.body.id}/stand-in-tokens`)).body.data[0].token as string;
    refreshClients.length = 0;
    await a.advance(3600);
    expect(await get(gw, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', token)).to.deep.equal({ status: 200, error: null });
    // (Other developers' connections due at the same time are refreshed with their own apps.)
    expect(refreshClients).to.include('platform-g');
    expect(refreshClients).to.not.include('own-g');
    expect((await other.get(`/v1/connections/${id}`)).body.status).to.equal('active');
  });

  it('the provider refuses the refresh (invalid_grant): the connection turns error, connection.error is queued, the agent gets 401 connection_error', async () => {
    await a.api.put('/v1/webhook-endpoint', { url: 'https://hooks.example.com/gw' });
    const env = await environment('refused-user');
    const id = await connect('refused-user', 'gmail');
    const token = (await a.api.get(`/v1/environments/${env.id}/stand-in-tokens`)).body.data[0].token as string;
    refuseRefresh = true;
    try {
      await a.advance(3600);
      const r = await get(env.gwA, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', token);
      expect(r).to.deep.equal({ status: 401, error: 'connection_error' });
      const row = await a.svc.db('connections').where({ id }).first();
      expect(row).to.include({ status: 'error', error: 'invalid_grant', access_token_enc: null, refresh_token_enc: null });
      const events = await a.svc.db('webhook_events').where({ type: 'connection.error' });
      expect(events.map((e: { body: string }) => JSON.parse(e.body).data)).to.deep.include({ connection_id: id, end_user_id: 'refused-user', provider: 'google', reason: 'invalid_grant' });
      expect((await a.api.get(`/v1/connections/${id}`)).body.status).to.equal('error');
      // Later requests: 401 at once, no further refresh attempts.
      const before = refreshes.length;
      expect((await get(env.gwA, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', token)).error).to.equal('connection_error');
      expect(refreshes.length).to.equal(before);
    } finally {
      refuseRefresh = false;
    }
  });
});
