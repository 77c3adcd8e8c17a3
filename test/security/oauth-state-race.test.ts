import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { usingMysql } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';

/**
 * Issue 23, item 8 (b): the OAuth callback's `state` is single use under concurrency. An
 * attacker who saw a callback URL (a proxy log, a browser history, a Referer) replays it
 * many times at once, hoping two land between "is it used?" and "mark it used": each that
 * got through would exchange the code again and store a connection of its own (the last
 * one replacing the victim's). connections/callback.ts consumes the state with one
 * conditional UPDATE (`used_at IS NULL AND expires_at > now`) and goes on only when it
 * changed exactly one row; this holds on SQLite and on MySQL (run with DATABASE_URL).
 */
const RETURN = 'https://app.example.com/connected';

describe(`attack: one OAuth state replayed by 10 concurrent callbacks (${usingMysql() ? 'MySQL' : 'SQLite'}) (issue 23, item 8b)`, function () {
  this.timeout(30_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  const codes = new Map<string, { challenge: string | null; scopes: string }>();

  before(async () => {
    up = await startFakeUpstream();
    up.respond = (req, res) => {
      const form = new URLSearchParams(req.body.toString());
      const issued = codes.get(form.get('code') ?? '');
      let status = 200;
      let body: unknown = {};
      if (req.url === '/token') {
        const ok = issued && createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url') === issued.challenge;
        status = ok ? 200 : 400;
        body = ok ? { access_token: `ya29.real-${form.get('code')}`, refresh_token: '1//r', expires_in: 3599, token_type: 'Bearer', scope: issued.scopes } : { error: 'invalid_grant' };
      } else if (req.url === '/api/oauth.v2.access') {
        body = issued ? { ok: true, authed_user: { id: 'U1', scope: issued.scopes, access_token: `xoxp-real-${form.get('code')}` }, team: { id: 'T1', name: 'Acme' } } : { ok: false, error: 'invalid_code' };
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    dir = mkdtempSync(join(tmpdir(), 'gw-oauth-race-'));
    writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_UPSTREAM_OVERRIDES: `oauth2.googleapis.com=127.0.0.1:${up.port},slack.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'),
    });
    await t.api.put('/v1/oauth-clients/google', { client_id: 'g', client_secret: 'gs' });
    await t.api.put('/v1/oauth-clients/slack', { client_id: 's', client_secret: 'ss' });
    // So that connection.created is queued (one per connection stored).
    await t.api.put('/v1/webhook-endpoint', { url: 'https://hooks.example.com/gw' });
  });
  after(async () => {
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh end user's authorization link: its state, and a code the provider will accept. */
  async function link(connectors: string[]): Promise<{ endUser: string; state: string; code: string }> {
    const endUser = `race-${randomBytes(6).toString('hex')}`;
    const r = await t.api.post('/v1/connections/authorize', { end_user_id: endUser, connectors, return_url: RETURN });
    expect(r.status, r.text).to.equal(201);
    const q = new URL(r.body.url).searchParams;
    const code = `code-${randomBytes(8).toString('hex')}`;
    codes.set(code, { challenge: q.get('code_challenge'), scopes: q.get('scope') ?? q.get('user_scope')! });
    return { endUser, state: q.get('state')!, code };
  }

  async function callback(provider: string, query: Record<string, string>) {
    const r = await fetch(`${t.url}/v1/oauth/${provider}/callback?${new URLSearchParams(query)}`, { redirect: 'manual' });
    return { status: r.status, location: r.headers.get('location'), type: r.headers.get('content-type'), cache: r.headers.get('cache-control'), text: await r.text() };
  }

  /** Exactly one callback went on (redirected); the other nine got the 400 page. */
  function exactlyOne(answers: Awaited<ReturnType<typeof callback>>[]) {
    const redirected = answers.filter((a) => a.status === 302);
    const pages = answers.filter((a) => a.status === 400);
    expect(answers.map((a) => a.status).sort(), 'one 302, nine 400').to.deep.equal([302, ...Array(9).fill(400)]);
    for (const p of pages) {
      expect(p.type).to.match(/^text\/html/);
      expect(p.cache).to.equal('no-store');
      expect(p.text).to.match(/expired or was already used/);
    }
    return new URL(redirected[0]!.location!);
  }

  /**
   * The callbacks fired while every connection of the service's pool is held by an open
   * transaction, released once all ten wait for one: their reads of the state then all run
   * before any of their writes, the widest window a check-then-act could lose in (without
   * it, SQLite's synchronous driver finishes one callback's read and write before the next
   * request is parsed, and no race would ever be seen there). Polling only decides when to
   * release; the assertions do not depend on it.
   */
  async function concurrently<T>(fire: () => Promise<T>): Promise<T[]> {
    const pool = (t.svc.db as unknown as { client: { pool: { max: number; numPendingAcquires(): number } } }).client.pool;
    const held = await Promise.all(Array.from({ length: pool.max }, () => t.svc.db.transaction()));
    let answers: Promise<T[]>;
    try {
      const waiting = pool.numPendingAcquires();
      answers = Promise.all(Array.from({ length: 10 }, fire));
      for (let i = 0; i < 500 && pool.numPendingAcquires() < waiting + 10; i++) await new Promise((r) => setTimeout(r, 10));
    } finally {
      await Promise.all(held.map((h) => h.commit()));
    }
    return answers;
  }

  async function connectionsOf(endUser: string): Promise<Array<{ id: string; status: string }>> {
    return t.svc.db('connections').where({ end_user_id: endUser }).select('id', 'status');
  }

  for (const provider of ['google', 'slack'] as const) {
    it(`${provider}: of 10 concurrent callbacks with one valid state, exactly one connects (one exchange, one connection, one connection.created)`, async () => {
      const l = await link(provider === 'google' ? ['gmail'] : ['slack']);
      const exchanges = () => up.seen.filter((s) => new URLSearchParams(s.body.toString()).get('code') === l.code).length;
      const answers = await concurrently(() => callback(provider, { state: l.state, code: l.code }));
      const loc = exactlyOne(answers);
      expect(loc.searchParams.get('status')).to.equal('ok');
      const id = loc.searchParams.get('connection_id')!;
      expect(await connectionsOf(l.endUser)).to.deep.equal([{ id, status: 'active' }]);
      expect(exchanges(), 'the code was exchanged once').to.equal(1);
      const created = (await t.svc.db('webhook_events').where({ type: 'connection.created' }).select('body'))
        .map((e: { body: string }) => JSON.parse(e.body).data)
        .filter((d: { end_user_id: string }) => d.end_user_id === l.endUser);
      expect(created.map((d: { connection_id: string }) => d.connection_id)).to.deep.equal([id]);
      const state = await t.svc.db('oauth_states').where({ state_hash: createHash('sha256').update(l.state).digest('hex') }).first();
      expect(state.used_at).to.not.equal(null);
      // And an eleventh, afterwards: the page again.
      expect((await callback(provider, { state: l.state, code: l.code })).status).to.equal(400);
      expect(exchanges()).to.equal(1);
    });
  }

  it('a declined and an accepted callback racing on one state: only one of them is acted on', async () => {
    const l = await link(['gmail']);
    let i = 0;
    const answers = await concurrently(() => callback('google', i++ % 2 ? { state: l.state, error: 'access_denied' } : { state: l.state, code: l.code }));
    const loc = exactlyOne(answers);
    const status = loc.searchParams.get('status');
    const stored = await connectionsOf(l.endUser);
    if (status === 'ok') expect(stored).to.deep.equal([{ id: loc.searchParams.get('connection_id'), status: 'active' }]);
    else {
      expect(loc.searchParams.get('error')).to.equal('access_denied');
      expect(stored).to.deep.equal([]);
    }
    expect(up.seen.filter((s) => new URLSearchParams(s.body.toString()).get('code') === l.code).length).to.equal(status === 'ok' ? 1 : 0);
  });
});
