import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';

/** POST /v1/connections/authorize (service.md Connections; issue 11, item 2). */
describe('connections: authorize', () => {
  let t: TestService;
  const RETURN = 'https://app.example.com/oauth/done?x=1';
  before(async () => {
    t = await startTestService({
      BASE_URL: 'https://gw.example.com',
      GOOGLE_AUTH_URL: 'https://accounts.example.test/o/oauth2/v2/auth',
      SLACK_AUTH_URL: 'https://slack.example.test/oauth/v2/authorize',
    });
  });
  after(async () => {
    await t.close();
  });

  it('409 no_oauth_client before any app is registered (and no platform app)', async () => {
    const r = await t.api.post('/v1/connections/authorize', { end_user_id: 'u1', connectors: ['gmail'], return_url: RETURN });
    expect(r.status).to.equal(409);
    expect(r.body.error).to.equal('no_oauth_client');
  });

  it('google: PKCE S256, exactly the scopes plus openid email, offline access, consent every time; 10 minutes; only a hash of state stored', async () => {
    await t.api.put('/v1/oauth-clients/google', { client_id: 'dev-google-id', client_secret: 'dev-google-secret' });
    const before = await t.svc.clock.nowMs();
    const r = await t.api.post('/v1/connections/authorize', { end_user_id: 'u1', connectors: ['gmail', 'calendar', 'gmail'], return_url: RETURN });
    expect(r.status, r.text).to.equal(201);
    expect(Object.keys(r.body).sort()).to.deep.equal(['expires_at', 'url']);
    expect(Date.parse(r.body.expires_at) - before).to.be.within(600_000 - 1000, 600_000 + 1000);
    const url = new URL(r.body.url);
    expect(`${url.origin}${url.pathname}`).to.equal('https://accounts.example.test/o/oauth2/v2/auth');
    const q = url.searchParams;
    expect(q.get('client_id')).to.equal('dev-google-id');
    expect(q.get('redirect_uri')).to.equal('https://gw.example.com/v1/oauth/google/callback');
    expect(q.get('response_type')).to.equal('code');
    expect(q.get('scope')!.split(' ').sort()).to.deep.equal([
      'email', 'https://www.googleapis.com/auth/calendar.events.owned', 'https://www.googleapis.com/auth/gmail.readonly',
      'https://www.googleapis.com/auth/gmail.send', 'openid',
    ]);
    expect(q.get('code_challenge_method')).to.equal('S256');
    expect(q.get('code_challenge')).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('access_type')).to.equal('offline');
    expect(q.get('prompt')).to.equal('consent');
    expect(q.has('include_granted_scopes')).to.equal(false);
    const state = q.get('state')!;
    expect(state).to.match(/^[A-Za-z0-9_-]{43}$/);
    const rows = await t.svc.db('oauth_states').select();
    expect(rows).to.have.length(1);
    expect(rows[0].state_hash).to.equal(createHash('sha256').update(state).digest('hex'));
    expect(JSON.stringify(rows)).to.not.include(state);
    expect(JSON.parse(rows[0].connectors)).to.deep.equal(['gmail', 'calendar']);
    // The verifier is sealed; it is not the challenge's preimage in clear.
    expect(String(rows[0].code_verifier_enc).split('.')).to.have.length(4);
  });

  it('slack: user_scope with exactly the listed scopes (a user token), no bot scope, no PKCE', async () => {
    await t.api.put('/v1/oauth-clients/slack', { client_id: '1234.5678', client_secret: 'slack-secret' });
    const r = await t.api.post('/v1/connections/authorize', { end_user_id: 'u2', connectors: ['slack'], return_url: RETURN });
    expect(r.status, r.text).to.equal(201);
    const url = new URL(r.body.url);
    expect(`${url.origin}${url.pathname}`).to.equal('https://slack.example.test/oauth/v2/authorize');
    const q = url.searchParams;
    expect(q.get('user_scope')!.split(',')).to.deep.equal(['channels:history', 'channels:read', 'groups:history', 'groups:read', 'chat:write', 'search:read']);
    expect(q.has('scope')).to.equal(false);
    expect(q.get('client_id')).to.equal('1234.5678');
    expect(q.get('redirect_uri')).to.equal('https://gw.example.com/v1/oauth/slack/callback');
    expect(q.has('code_challenge')).to.equal(false);
  });

  it('the retention job prunes links a jobs window (7 days) past their expiry, not before', async () => {
    const r = await t.api.post('/v1/connections/authorize', { end_user_id: 'u-old', connectors: ['slack'], return_url: RETURN });
    expect(r.status).to.equal(201);
    const count = async () => Number((await t.svc.db('oauth_states').where({ end_user_id: 'u-old' }).count({ n: '*' }).first())!.n);
    await t.advance(3 * 86_400);
    expect(await count()).to.equal(1);
    await t.advance(5 * 86_400);
    expect(await count()).to.equal(0);
  });

  it('400 for unknown connectors, a mix of providers, none, a bad return_url; 422 for the shape', async () => {
    const bad400: unknown[] = [
      { end_user_id: 'u', connectors: ['drive'], return_url: RETURN },
      { end_user_id: 'u', connectors: ['gmail', 'slack'], return_url: RETURN },
      { end_user_id: 'u', connectors: [], return_url: RETURN },
      { end_user_id: 'u', connectors: ['gmail'], return_url: '/relative' },
      { end_user_id: 'u', connectors: ['gmail'], return_url: 'javascript:alert(1)' },
      { end_user_id: 'u', connectors: ['gmail'], return_url: 'ftp://x.example.com/' },
      { end_user_id: 'u', connectors: ['gmail'], return_url: 'https://user:pw@x.example.com/' },
      { end_user_id: '', connectors: ['gmail'], return_url: RETURN },
      { end_user_id: 'u', connectors: ['__proto__'], return_url: RETURN },
    ];
    for (const body of bad400) {
      const r = await t.api.post('/v1/connections/authorize', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error).to.equal('invalid_request');
    }
    const bad422: unknown[] = [
      { connectors: ['gmail'], return_url: RETURN },
      { end_user_id: 'u', return_url: RETURN },
      { end_user_id: 'u', connectors: 'gmail', return_url: RETURN },
      { end_user_id: 'u', connectors: [1], return_url: RETURN },
      { end_user_id: 'u', connectors: ['gmail'], return_url: RETURN, scope: 'admin' },
    ];
    for (const body of bad422) {
      const r = await t.api.post('/v1/connections/authorize', body);
      expect(r.status, JSON.stringify(body)).to.equal(422);
      expect(r.body.error).to.equal('invalid_body');
    }
  });
});
