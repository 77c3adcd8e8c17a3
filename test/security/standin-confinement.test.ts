import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld, type AuditRecord } from '../helpers/attack-fixture.js';
import { proxyAgent, rawTunnelExchange, statusOf, type Gateway } from '../helpers/proxy-client.js';

/**
 * Issue 23, item 8 (a): a connection's stand-in token is swapped for the real token only on
 * its connector's API (connections/stand-ins.ts `connectorAllows`, checked in
 * proxy/pipeline.ts). A prompt-injected agent holding the calendar stand-in sends it to
 * Gmail's and Drive's paths of the same host (www.googleapis.com serves all three, and a
 * Google connection has one access token for all its connectors); one holding the Slack
 * stand-in sends it to slack.com off the Web API (`/api/`). Each refusal is 403
 * `secret_host_not_allowed`, audited with the connector, and the real token reaches no
 * upstream.
 *
 * Every case makes its own end user, environment and connection (the earlier table in
 * connections-gateway.test.ts shared one connection between rows, so a row passed or failed
 * by what ran before it); each also proves its stand-in works on its own API first, so a
 * refusal is the confinement, not a missing connection. Each case passes alone
 * (`--grep`) and in any order.
 */
const HOSTS = ['oauth2.googleapis.com', 'gmail.googleapis.com', 'www.googleapis.com', 'slack.com'];

describe('attack: a stand-in token sent off its connector\'s API (issue 23, item 8a)', function () {
  this.timeout(30_000);
  let w: AttackWorld;
  /** code → what the local provider grants for it (each code its own real token). */
  const codes = new Map<string, { challenge: string | null; scopes: string; token: string }>();

  before(async () => {
    w = await startAttackWorld({ hosts: HOSTS, secrets: {} });
    w.up.respond = (req, res) => {
      const form = new URLSearchParams(req.body.toString());
      const issued = codes.get(form.get('code') ?? '');
      let status = 200;
      let body: unknown = { ok: true, path: req.url, auth: req.headers.authorization ?? null };
      if (req.url === '/token' && req.headers.host === 'oauth2.googleapis.com') {
        const ok = issued && createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url') === issued.challenge;
        status = ok ? 200 : 400;
        body = ok ? { access_token: issued.token, refresh_token: '1//r', expires_in: 3599, scope: issued.scopes, token_type: 'Bearer' } : { error: 'invalid_grant' };
      } else if (req.url === '/api/oauth.v2.access' && req.headers.host === 'slack.com') {
        body = issued ? { ok: true, authed_user: { id: 'U9', scope: issued.scopes, access_token: issued.token }, team: { id: 'T9', name: 'Team' } } : { ok: false, error: 'invalid_code' };
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    await w.t.api.put('/v1/oauth-clients/google', { client_id: 'g', client_secret: 'gs' });
    await w.t.api.put('/v1/oauth-clients/slack', { client_id: 's', client_secret: 'ss' });
  });
  after(async () => {
    await w?.close();
  });

  interface Victim {
    envId: string;
    gw: Gateway;
    /** The stand-in the agent holds, by connector. */
    standIn: Record<string, string>;
    /** The real access token behind them (unique to this case). */
    real: string;
    /** The requests the upstream received since this victim was made. */
    seen(): typeof w.up.seen;
    /** This environment's audit entries, newest first, waiting for `n`. */
    audited(n: number): Promise<AuditRecord[]>;
  }

  /** A fresh end user with an environment (reads and writes allowed) and one connection of `connectors`. */
  async function victim(connectors: string[]): Promise<Victim> {
    const provider = connectors[0] === 'slack' ? 'slack' : 'google';
    const endUser = `victim-${randomBytes(6).toString('hex')}`;
    // Every API host on the allowlist: a refusal below is the stand-in's confinement, never egress.
    const env = await w.t.api.post('/v1/environments', { end_user_id: endUser, egress_allow: HOSTS });
    expect(env.status, env.text).to.equal(201);
    const envId: string = env.body.id;
    expect((await w.t.api.put(`/v1/environments/${envId}/policy`, { rules: [{ category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }] })).status).to.equal(200);
    const gw: Gateway = (await w.t.api.get(`/v1/environments/${envId}/gateway`)).body;

    const link = await w.t.api.post('/v1/connections/authorize', { end_user_id: endUser, connectors, return_url: 'https://app.example.com/done' });
    expect(link.status, link.text).to.equal(201);
    const q = new URL(link.body.url).searchParams;
    const code = `c-${randomBytes(8).toString('hex')}`;
    const real = provider === 'google' ? `ya29.a0-real-${code}` : `xoxp-real-${code}`;
    codes.set(code, { challenge: q.get('code_challenge'), scopes: q.get('scope') ?? q.get('user_scope')!, token: real });
    const cb = await fetch(`${w.t.url}/v1/oauth/${provider}/callback?${new URLSearchParams({ state: q.get('state')!, code })}`, { redirect: 'manual' });
    const loc = new URL(cb.headers.get('location')!);
    expect(loc.searchParams.get('status'), loc.toString()).to.equal('ok');

    const listed = await w.t.api.get(`/v1/environments/${envId}/stand-in-tokens`);
    const standIn: Record<string, string> = Object.fromEntries((listed.body.data as Array<{ connector: string; token: string }>).map((s) => [s.connector, s.token]));
    expect(Object.keys(standIn).sort()).to.deep.equal([...connectors].sort());
    const from = w.up.seen.length;
    return {
      envId, gw, standIn, real,
      seen: () => w.up.seen.slice(from),
      async audited(n: number) {
        for (let i = 0; i < 300; i++) {
          await w.t.svc.audit.flush();
          const data: AuditRecord[] = (await w.t.api.get(`/v1/audit-log?environment_id=${envId}&limit=200`)).body.data;
          if (data.length >= n) return data;
          await new Promise((r) => setTimeout(r, 10));
        }
        throw new Error(`fewer than ${n} audit entries`);
      },
    };
  }

  async function send(v: Victim, url: string, token: string, method = 'GET') {
    const agent = proxyAgent(v.gw);
    try {
      const r = await request(url, { dispatcher: agent, method: method as 'GET', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: method === 'GET' ? undefined : '{}' });
      const text = await r.body.text();
      return { status: r.statusCode, error: (r.headers['x-gateway-error'] as string | undefined) ?? null, text };
    } finally {
      await agent.close();
    }
  }

  /** A request exactly as written (dot segments and escapes kept), inside a TLS tunnel. */
  async function sendRaw(v: Victim, host: string, path: string, token: string) {
    const raw = await rawTunnelExchange(v.gw, host, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`);
    return statusOf(raw);
  }

  /** The stand-in works on its own API: the upstream got the real token, the agent sees its stand-in. */
  async function works(v: Victim, url: string, connector: string): Promise<void> {
    const r = await send(v, url, v.standIn[connector]!);
    expect(r.status, r.text).to.equal(200);
    expect(JSON.parse(r.text).auth).to.equal(`Bearer ${v.standIn[connector]}`);
    expect(v.seen().at(-1)!.headers.authorization).to.equal(`Bearer ${v.real}`);
  }

  /** Every attack was refused, audited as the connector's, and the real token went nowhere after the control request. */
  async function refusedAll(v: Victim, connector: string, attacks: Array<{ host: string; path: string; status: number; error: string | null }>, controls: number): Promise<void> {
    for (const a of attacks) {
      expect({ status: a.status, error: a.error }, `${a.host}${a.path}`).to.deep.equal({ status: 403, error: 'secret_host_not_allowed' });
    }
    const sent = v.seen();
    expect(sent, 'only the control request reached an upstream').to.have.length(controls);
    for (const s of sent.slice(controls)) expect(JSON.stringify(s)).to.not.include(v.real);
    const entries = await v.audited(controls + attacks.length);
    const denied = entries.filter((e) => e.decision === 'deny');
    expect(denied).to.have.length(attacks.length);
    for (const a of attacks) {
      const e = denied.find((x) => x.host === a.host && x.path === a.path);
      expect(e, `audit entry for ${a.host}${a.path}`).to.not.equal(undefined);
      expect(e).to.include({ connector, credential: 'connection', decision: 'deny', reason: 'secret_host_not_allowed', status: 403, upstream_status: null });
    }
  }

  async function attack(v: Victim, connector: string, host: string, path: string, method = 'GET') {
    const r = await send(v, `https://${host}${path}`, v.standIn[connector]!, method);
    expect(r.text).to.not.include(v.real);
    return { host, path, status: r.status, error: r.error };
  }

  it('attack: the calendar stand-in on www.googleapis.com\'s Gmail paths (API, send, upload, batch) is refused; nothing sent', async () => {
    const v = await victim(['calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', 'calendar');
    await refusedAll(v, 'calendar', [
      await attack(v, 'calendar', 'www.googleapis.com', '/gmail/v1/users/me/messages'),
      await attack(v, 'calendar', 'www.googleapis.com', '/gmail/v1/users/me/messages/send', 'POST'),
      await attack(v, 'calendar', 'www.googleapis.com', '/upload/gmail/v1/users/me/messages/send', 'POST'),
      await attack(v, 'calendar', 'www.googleapis.com', '/batch/gmail/v1', 'POST'),
    ], 1);
  });

  it('attack: the calendar stand-in of a connection that also has gmail, on www.googleapis.com\'s Gmail paths (the same real token would be valid there) is refused', async () => {
    const v = await victim(['gmail', 'calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', 'calendar');
    await refusedAll(v, 'calendar', [
      await attack(v, 'calendar', 'www.googleapis.com', '/gmail/v1/users/me/messages'),
      await attack(v, 'calendar', 'www.googleapis.com', '/gmail/v1/users/me/settings/forwardingAddresses', 'POST'),
    ], 1);
  });

  it('attack: the calendar stand-in on www.googleapis.com\'s Drive paths (API, upload, batch) is refused; nothing sent', async () => {
    const v = await victim(['calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/users/me/calendarList', 'calendar');
    await refusedAll(v, 'calendar', [
      await attack(v, 'calendar', 'www.googleapis.com', '/drive/v3/files'),
      await attack(v, 'calendar', 'www.googleapis.com', '/drive/v3/files/abc/permissions', 'POST'),
      await attack(v, 'calendar', 'www.googleapis.com', '/upload/drive/v3/files', 'POST'),
      await attack(v, 'calendar', 'www.googleapis.com', '/batch/drive/v3', 'POST'),
    ], 1);
  });

  it('attack: the calendar stand-in on Gmail\'s own host (on the egress allowlist) is refused', async () => {
    const v = await victim(['calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', 'calendar');
    await refusedAll(v, 'calendar', [
      await attack(v, 'calendar', 'gmail.googleapis.com', '/gmail/v1/users/me/messages'),
      await attack(v, 'calendar', 'gmail.googleapis.com', '/calendar/v3/calendars/primary/events'),
    ], 1);
  });

  it('attack: the gmail stand-in on Gmail\'s own host but another API\'s path (Calendar, Drive, a global batch) is refused (a fourth review)', async () => {
    const v = await victim(['gmail']);
    await works(v, 'https://gmail.googleapis.com/gmail/v1/users/me/messages', 'gmail');
    await refusedAll(v, 'gmail', [
      await attack(v, 'gmail', 'gmail.googleapis.com', '/calendar/v3/calendars/primary/events'),
      await attack(v, 'gmail', 'gmail.googleapis.com', '/drive/v3/files'),
      await attack(v, 'gmail', 'gmail.googleapis.com', '/batch', 'POST'),
    ], 1);
  });

  it('attack: the calendar stand-in smuggled to Gmail or Drive by dot segments and escapes on a Calendar path is refused', async () => {
    const v = await victim(['calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', 'calendar');
    const tricks = [
      '/calendar/../gmail/v1/users/me/messages',
      '/calendar/v3/../../gmail/v1/users/me/messages',
      '/calendar/v3/%2e%2e/%2E%2E/drive/v3/files',
      '/calendar/v3%2F..%2F..%2Fgmail/v1/users/me/messages',
      '/calendar/v3/%252e%252e/%252e%252e/drive/v3/files',
      '/calendar/v3/..\\..\\gmail/v1/users/me/messages',
      '/batch/calendar/v3/./../../gmail/v1',
    ];
    const attacks = [];
    for (const path of tricks) attacks.push({ host: 'www.googleapis.com', path, ...(await sendRaw(v, 'www.googleapis.com', path, v.standIn.calendar!)) });
    await refusedAll(v, 'calendar', attacks, 1);
  });

  it('attack: the Slack stand-in on slack.com off the Web API (/api/) is refused; nothing sent', async () => {
    const v = await victim(['slack']);
    await works(v, 'https://slack.com/api/conversations.list', 'slack');
    await refusedAll(v, 'slack', [
      await attack(v, 'slack', 'slack.com', '/'),
      await attack(v, 'slack', 'slack.com', '/oauth/v2/authorize'),
      await attack(v, 'slack', 'slack.com', '/apix/chat.postMessage', 'POST'),
      await attack(v, 'slack', 'slack.com', '/api', 'POST'),
      await attack(v, 'slack', 'slack.com', '/files-pri/T9-F1/secret.txt'),
      await attack(v, 'slack', 'slack.com', '/services/T9/B1/x', 'POST'),
    ], 1);
  });

  it('attack: the Slack stand-in smuggled off /api/ by dot segments and escapes is refused', async () => {
    const v = await victim(['slack']);
    await works(v, 'https://slack.com/api/auth.test', 'slack');
    const tricks = ['/api/../oauth/v2/authorize', '/api/%2e%2e/files-pri/T9-F1/secret.txt', '/api%2F..%2Fservices/T9/B1/x', '/api/..%5cservices/T9/B1/x'];
    const attacks = [];
    for (const path of tricks) attacks.push({ host: 'slack.com', path, ...(await sendRaw(v, 'slack.com', path, v.standIn.slack!)) });
    await refusedAll(v, 'slack', attacks, 1);
  });

  it('attack: the Slack stand-in on Google\'s hosts is refused', async () => {
    const v = await victim(['slack']);
    await works(v, 'https://slack.com/api/conversations.list', 'slack');
    await refusedAll(v, 'slack', [
      await attack(v, 'slack', 'www.googleapis.com', '/calendar/v3/calendars/primary/events'),
      await attack(v, 'slack', 'gmail.googleapis.com', '/gmail/v1/users/me/messages'),
    ], 1);
  });

  it('attack: the calendar stand-in on slack.com\'s Web API is refused', async () => {
    const v = await victim(['calendar']);
    await works(v, 'https://www.googleapis.com/calendar/v3/calendars/primary/events', 'calendar');
    await refusedAll(v, 'calendar', [await attack(v, 'calendar', 'slack.com', '/api/conversations.list')], 1);
  });
});
