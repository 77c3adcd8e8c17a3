import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld, type AuditRecord } from '../helpers/attack-fixture.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';

/**
 * Stand-in tokens in the gateway (issue 11, item 6): an environment of the end user gets a
 * stand-in per connector; the gateway swaps it for the real access token only on that
 * connector's API, only for that environment; a revoked or replaced connection's stand-in is
 * 401 connection_revoked. One local HTTPS server stands in for Google's token endpoint and
 * the Gmail, Calendar and Slack APIs (it sees the host the gateway meant through SNI/Host).
 * Each test makes its own end user, environment and connections (issue 23, item 8: the
 * tests here shared one connection and passed or failed by what ran before them), so each
 * passes alone (`--grep`) and in any order.
 */
const GOOGLE_TOKEN = 'ya29.a0-real-google-access-token-gw';
const SLACK_TOKEN = 'xoxp-real-slack-user-token-gw';

const HOSTS = ['oauth2.googleapis.com', 'gmail.googleapis.com', 'www.googleapis.com', 'slack.com'];

describe('connections: stand-in tokens through the gateway', function () {
  this.timeout(30_000);
  let w: AttackWorld;
  const codes = new Map<string, { challenge: string | null; scopes: string }>();

  before(async () => {
    w = await startAttackWorld({ hosts: HOSTS, secrets: {} });
    w.up.respond = (req, res) => {
      const form = new URLSearchParams(req.body.toString());
      const issued = codes.get(form.get('code') ?? '');
      let body: unknown = { ok: true, path: req.url, auth: req.headers.authorization ?? null };
      if (req.url === '/token' && req.headers.host === 'oauth2.googleapis.com') {
        const ok = issued && createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url') === issued.challenge;
        body = ok ? { access_token: GOOGLE_TOKEN, refresh_token: '1//r', expires_in: 3599, scope: issued.scopes, token_type: 'Bearer' } : { error: 'invalid_grant' };
        res.writeHead(ok ? 200 : 400, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(body));
      }
      if (req.url === '/api/oauth.v2.access') {
        body = { ok: true, authed_user: { id: 'U9', scope: issued?.scopes ?? '', access_token: SLACK_TOKEN }, team: { id: 'T9', name: 'Team' } };
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    await w.t.api.put('/v1/oauth-clients/google', { client_id: 'g', client_secret: 'gs' });
    await w.t.api.put('/v1/oauth-clients/slack', { client_id: 's', client_secret: 'ss' });
  });
  after(async () => {
    await w.close();
  });

  interface Env {
    id: string;
    endUser: string;
    gw: Gateway;
  }

  /** A fresh end user's environment: reads allowed, a Gmail send asks, the API hosts on its allowlist. */
  async function freshEnv(): Promise<Env> {
    const endUser = `user-${randomBytes(6).toString('hex')}`;
    const created = await w.t.api.post('/v1/environments', { end_user_id: endUser, egress_allow: HOSTS });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.body.id;
    const rules = [{ connector: 'gmail', category: 'send', effect: 'ask' }, { category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }];
    expect((await w.t.api.put(`/v1/environments/${id}/policy`, { rules })).status).to.equal(200);
    return { id, endUser, gw: (await w.t.api.get(`/v1/environments/${id}/gateway`)).body };
  }

  /** This environment's audit entries, newest first, waiting for `n`. */
  async function audited(env: Env, n: number): Promise<AuditRecord[]> {
    for (let i = 0; i < 300; i++) {
      await w.t.svc.audit.flush();
      const data: AuditRecord[] = (await w.t.api.get(`/v1/audit-log?environment_id=${env.id}&limit=200`)).body.data;
      if (data.length >= n) return data;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`fewer than ${n} audit entries`);
  }

  async function connect(env: Env, connectors: string[]): Promise<string> {
    const r = await w.t.api.post('/v1/connections/authorize', { end_user_id: env.endUser, connectors, return_url: 'https://app.example.com/done' });
    expect(r.status, r.text).to.equal(201);
    const q = new URL(r.body.url).searchParams;
    const code = `c-${Math.random().toString(36).slice(2)}`;
    codes.set(code, { challenge: q.get('code_challenge'), scopes: q.get('scope') ?? q.get('user_scope')! });
    const cb = await fetch(`${w.t.url}/v1/oauth/${connectors[0] === 'slack' ? 'slack' : 'google'}/callback?${new URLSearchParams({ state: q.get('state')!, code })}`, { redirect: 'manual' });
    const loc = new URL(cb.headers.get('location')!);
    expect(loc.searchParams.get('status'), loc.toString()).to.equal('ok');
    return loc.searchParams.get('connection_id')!;
  }

  async function standIns(env: Env): Promise<Record<string, string>> {
    const r = await w.t.api.get(`/v1/environments/${env.id}/stand-in-tokens`);
    expect(r.status).to.equal(200);
    return Object.fromEntries((r.body.data as Array<{ connector: string; token: string }>).map((s) => [s.connector, s.token]));
  }

  async function send(env: Env, url: string, token: string, init: { method?: string; body?: string } = {}) {
    const agent = proxyAgent(env.gw);
    try {
      const r = await request(url, { dispatcher: agent, method: (init.method ?? 'GET') as 'GET', body: init.body, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      const text = await r.body.text();
      return { status: r.statusCode, error: r.headers['x-gateway-error'] ?? null, text };
    } finally {
      await agent.close();
    }
  }

  it('GET /v1/environments/{id}/stand-in-tokens lists one per connector; the gateway swaps it for the real token on the connector\'s API', async () => {
    const env = await freshEnv();
    const id = await connect(env, ['gmail', 'calendar']);
    const s = await standIns(env);
    expect(Object.keys(s).sort()).to.deep.equal(['calendar', 'gmail']);
    expect(s.gmail).to.match(/^svcst_[A-Za-z0-9_-]{32}$/);
    expect(s.gmail).to.not.equal(s.calendar);
    expect(JSON.stringify(await standIns(env))).to.not.include(GOOGLE_TOKEN);
    await w.mark();
    const r = await send(env, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', s.gmail!);
    expect(r.status, r.text).to.equal(200);
    // The upstream echoed the real token; the agent sees its stand-in in its place.
    expect(JSON.parse(r.text).auth).to.equal(`Bearer ${s.gmail}`);
    const seen = w.up.seen.at(-1)!;
    expect(seen.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
    const entries = await audited(env, 1);
    expect(entries[0]).to.include({ connector: 'gmail', credential: 'connection', category: 'read' });
    const cal = await send(env, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', s.calendar!);
    expect(cal.status).to.equal(200);
    expect(w.up.seen.at(-1)!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
    expect(id).to.match(/^conn_/);
  });

  it('attack: a stand-in sent off its connector\'s API (another API on the same host, another host) is refused and nothing is sent', async () => {
    // More cases, each with a connection of its own: test/security/standin-confinement.test.ts.
    const env = await freshEnv();
    await connect(env, ['gmail', 'calendar']);
    const s = await standIns(env);
    await w.mark();
    for (const [url, token] of [
      ['https://www.googleapis.com/calendar/v3/calendars/primary/events', s.gmail!],
      ['https://www.googleapis.com/drive/v3/files', s.gmail!],
      ['https://gmail.googleapis.com/gmail/v1/users/me/messages', s.calendar!],
      ['https://slack.com/api/conversations.list', s.gmail!],
    ] as const) {
      const r = await send(env, url, token);
      expect(r.status, url).to.equal(403);
      expect(r.error).to.equal('secret_host_not_allowed');
    }
    expect(w.up.seen).to.have.length(0);
    const entries = await audited(env, 4);
    expect(entries.map((e) => [e.decision, e.reason, e.credential])).to.deep.equal(Array(4).fill(['deny', 'secret_host_not_allowed', 'connection']));
  });

  it('a gmail send with the stand-in is held, and once approved reaches Gmail with the real token', async () => {
    const env = await freshEnv();
    await connect(env, ['gmail']);
    const s = await standIns(env);
    await w.mark();
    const pending = send(env, 'https://gmail.googleapis.com/gmail/v1/users/me/messages/send', s.gmail!, { method: 'POST', body: JSON.stringify({ raw: 'eA' }) });
    let approval: { id: string; connector: string; category: string } | undefined;
    for (let i = 0; i < 300 && !approval; i++) {
      approval = (await w.t.api.get(`/v1/approvals?environment_id=${env.id}&status=pending`)).body.data[0];
      if (!approval) await new Promise((r) => setTimeout(r, 10));
    }
    expect(approval).to.include({ connector: 'gmail', category: 'send' });
    expect(w.up.seen).to.have.length(0);
    expect((await w.t.api.post(`/v1/approvals/${approval!.id}/decision`, { decision: 'approve', scope: { kind: 'once' } })).status).to.equal(200);
    const r = await pending;
    expect(r.status, r.text).to.equal(200);
    expect(w.up.seen).to.have.length(1);
    expect(w.up.seen[0]!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
  });

  it('attack: an end user id with a trailing space is another end user: its environment gets none of the first one\'s connections (MySQL compared them padded; a fourth review)', async () => {
    const env = await freshEnv();
    await connect(env, ['gmail']);
    expect(Object.keys(await standIns(env))).to.deep.equal(['gmail']);
    const twin = await w.t.api.post('/v1/environments', { end_user_id: `${env.endUser} `, egress_allow: HOSTS });
    expect(twin.status, twin.text).to.equal(201);
    expect((await w.t.api.get(`/v1/environments/${twin.body.id}/stand-in-tokens`)).body.data).to.deep.equal([]);
    const conns = await w.t.api.get(`/v1/connections?end_user_id=${encodeURIComponent(`${env.endUser} `)}`);
    expect(conns.status).to.equal(200);
    expect(conns.body.data).to.deep.equal([]);
  });

  it('another environment\'s stand-in is not this environment\'s: unknown here, nothing swapped', async () => {
    const env = await freshEnv();
    await connect(env, ['gmail']);
    expect(Object.keys(await standIns(env))).to.deep.equal(['gmail']);
    const other = await w.t.api.post('/v1/environments', { end_user_id: `${env.endUser}-other`, egress_allow: ['gmail.googleapis.com'] });
    expect((await standIns({ id: other.body.id, endUser: `${env.endUser}-other`, gw: env.gw }))).to.deep.equal({});
    const foreign = await w.t.otherDeveloper();
    expect((await foreign.get(`/v1/environments/${env.id}/stand-in-tokens`)).status).to.equal(404);
  });

  it('the connected connectors\' API hosts are on the effective egress allowlist without egress_allow; a revoked connection\'s stand-in still gets 401 there', async () => {
    const env = await w.t.api.post('/v1/environments', { end_user_id: 'no-egress-user' });
    expect(env.status, env.text).to.equal(201);
    await w.t.api.put(`/v1/environments/${env.body.id}/policy`, { rules: [{ category: 'read', effect: 'allow' }] });
    const gw = (await w.t.api.get(`/v1/environments/${env.body.id}/gateway`)).body;
    const r0 = await w.t.api.post('/v1/connections/authorize', { end_user_id: 'no-egress-user', connectors: ['slack'], return_url: 'https://app.example.com/done' });
    const q = new URL(r0.body.url).searchParams;
    const code = `c-${Math.random().toString(36).slice(2)}`;
    codes.set(code, { challenge: null, scopes: q.get('user_scope')! });
    const cb = await fetch(`${w.t.url}/v1/oauth/slack/callback?${new URLSearchParams({ state: q.get('state')!, code })}`, { redirect: 'manual' });
    const id = new URL(cb.headers.get('location')!).searchParams.get('connection_id')!;
    const token = (await w.t.api.get(`/v1/environments/${env.body.id}/stand-in-tokens`)).body.data[0].token as string;
    const call = async () => {
      const agent = proxyAgent(gw);
      try {
        const r = await request('https://slack.com/api/conversations.list', { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
        await r.body.text();
        return { status: r.statusCode, error: r.headers['x-gateway-error'] ?? null };
      } finally {
        await agent.close();
      }
    };
    expect(await call()).to.deep.equal({ status: 200, error: null });
    // On port 443 only (where a stand-in is swapped): a bare host name opened every port of it.
    const egress = (await w.t.api.get(`/v1/environments/${env.body.id}/egress`)).body;
    expect(egress.effective).to.include('slack.com:443');
    expect(egress.effective).to.not.include('slack.com');
    expect((await w.t.svc.egress.effectiveEgress(env.body.id))!.allows('slack.com', 8443)).to.equal(false);
    expect((await w.t.api.delete(`/v1/connections/${id}`)).status).to.equal(200);
    expect(await call()).to.deep.equal({ status: 401, error: 'connection_revoked' });
  });

  it('a provider\'s 429 reaches the agent as sent, with its Retry-After', async () => {
    const env = await freshEnv();
    await connect(env, ['gmail']);
    const s = await standIns(env);
    const saved = w.up.respond;
    w.up.respond = (_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' });
      res.end(JSON.stringify({ error: { code: 429, message: 'Rate Limit Exceeded' } }));
    };
    try {
      const agent = proxyAgent(env.gw);
      const r = await request('https://gmail.googleapis.com/gmail/v1/users/me/messages', { dispatcher: agent, headers: { authorization: `Bearer ${s.gmail}` } });
      expect(r.statusCode).to.equal(429);
      expect(r.headers['retry-after']).to.equal('30');
      expect(r.headers['x-gateway-error']).to.equal(undefined);
      await r.body.text();
      await agent.close();
    } finally {
      w.up.respond = saved;
    }
  });

  it('revoked: the stand-in gets 401 connection_revoked at once; replaced: the old stand-in too, the new one works', async () => {
    const env = await freshEnv();
    await connect(env, ['gmail', 'calendar']);
    const slackId = await connect(env, ['slack']);
    const before = await standIns(env);
    expect(Object.keys(before).sort()).to.deep.equal(['calendar', 'gmail', 'slack']);
    expect((await send(env, 'https://slack.com/api/conversations.list', before.slack!)).status).to.equal(200);
    expect(w.up.seen.at(-1)!.headers.authorization).to.equal(`Bearer ${SLACK_TOKEN}`);
    await w.mark();
    // Authorizing google again replaces the gmail/calendar connection.
    await connect(env, ['gmail']);
    const after = await standIns(env);
    expect(after.gmail).to.not.equal(before.gmail);
    const old = await send(env, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', before.gmail!);
    expect(old.status).to.equal(401);
    expect(old.error).to.equal('connection_revoked');
    expect((await send(env, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', after.gmail!)).status).to.equal(200);
    expect((await w.t.api.delete(`/v1/connections/${slackId}`)).status).to.equal(200);
    const revoked = await send(env, 'https://slack.com/api/conversations.list', before.slack!);
    expect(revoked.status).to.equal(401);
    expect(revoked.error).to.equal('connection_revoked');
    expect(w.up.seen.filter((x) => x.url === '/api/conversations.list')).to.have.length(0);
    expect(Object.keys(await standIns(env))).to.deep.equal(['gmail']);
  });
});
