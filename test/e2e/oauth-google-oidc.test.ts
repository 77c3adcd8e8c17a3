import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';
import { startOidcGoogle, type OidcGoogle } from '../helpers/oidc-google.js';
import { generateCa } from '../../certs/ca.js';

/**
 * The whole connection path against a real OAuth server (oidc-provider standing in for
 * Google; issue 11, item 7): authorize → the end user signs in and consents at the provider →
 * the callback exchanges the code with PKCE → a Gmail request through the gateway with the
 * stand-in reaches the API with a token the provider says is real → the token expires and the
 * gateway refreshes it at the provider → revoke ends it at the provider too.
 */
describe('a Google connection against a real OAuth server (oidc-provider)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  let op: OidcGoogle;
  let endUser: string;

  before(async () => {
    // The provider's certificate comes from a CA of its own, which the service trusts too.
    const ca = await generateCa({ commonName: 'Test OAuth provider CA' });
    op = await startOidcGoogle({ ca, clientId: 'google-client', clientSecret: 'google-secret', redirectUri: 'https://gw.example.com/v1/oauth/google/callback' });
    w = await startAttackWorld({
      hosts: ['gmail.googleapis.com'],
      secrets: {},
      extraCaPem: ca.certPem,
      env: {
        BASE_URL: 'https://gw.example.com',
        GOOGLE_AUTH_URL: op.authUrl, GOOGLE_TOKEN_URL: op.tokenUrl, GOOGLE_REVOKE_URL: op.revokeUrl,
        // The provider listens on localhost: private upstreams allowed in this test only.
        GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1',
      },
    });
    endUser = (await w.t.api.get(`/v1/environments/${w.envId}`)).body.end_user_id;
    await w.t.api.put('/v1/oauth-clients/google', { client_id: 'google-client', client_secret: 'google-secret' });
    w.up.respond = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ messages: [], path: req.url }));
    };
  });
  after(async () => {
    await w?.close();
    await op?.close();
  });

  it('authorize → sign in → callback → gmail through the gateway → refresh → revoke', async () => {
    const link = await w.t.api.post('/v1/connections/authorize', { end_user_id: endUser, connectors: ['gmail'], return_url: 'https://app.example.com/done' });
    expect(link.status, link.text).to.equal(201);
    const redirect = await op.signIn(link.body.url, 'end.user@example.com');
    expect(redirect.get('error'), redirect.toString()).to.equal(null);
    expect(redirect.get('code')).to.be.a('string');
    const cb = await fetch(`${w.t.url}/v1/oauth/google/callback?${redirect}`, { redirect: 'manual' });
    expect(cb.status).to.equal(302);
    const done = new URL(cb.headers.get('location')!);
    expect(done.searchParams.get('status'), done.toString()).to.equal('ok');
    const id = done.searchParams.get('connection_id')!;
    const conn = (await w.t.api.get(`/v1/connections/${id}`)).body;
    expect(conn).to.include({ provider: 'google', account: 'end.user@example.com', status: 'active' });
    expect(conn.connectors).to.deep.equal(['gmail']);

    const standIn = (await w.t.api.get(`/v1/environments/${w.envId}/stand-in-tokens`)).body.data[0].token as string;
    const read = async () => {
      const agent = proxyAgent(w.gw);
      try {
        const r = await request('https://gmail.googleapis.com/gmail/v1/users/me/messages', { dispatcher: agent, headers: { authorization: `Bearer ${standIn}` } });
        await r.body.text();
        return r.statusCode;
      } finally {
        await agent.close();
      }
    };
    expect(await read()).to.equal(200);
    const first = String(w.up.seen.at(-1)!.headers.authorization).replace(/^Bearer /, '');
    expect(first).to.not.equal(standIn);
    const real = await op.introspect(first);
    expect(real).to.include({ active: true, client_id: 'google-client' });
    expect(real.scope!.split(' ')).to.include.members(['https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send']);

    // An hour later the token is near its end: the gateway refreshes it at the provider first.
    w.t.svc.clock.advance(3600_000);
    expect(await read()).to.equal(200);
    const second = String(w.up.seen.at(-1)!.headers.authorization).replace(/^Bearer /, '');
    expect(second).to.not.equal(first);
    expect((await op.introspect(second)).active).to.equal(true);

    // Revoke: the stand-in stops at once; the provider is told (best effort, after the answer).
    expect((await w.t.api.delete(`/v1/connections/${id}`)).status).to.equal(200);
    expect(await read()).to.equal(401);
    let active = true;
    for (let i = 0; i < 200 && active; i++) {
      active = (await op.introspect(second)).active;
      if (active) await new Promise((r) => setTimeout(r, 10));
    }
    expect(active, 'the provider revoked the grant').to.equal(false);
  });
});
