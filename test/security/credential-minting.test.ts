import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * Hole 1, third part: a swapped secret must not buy the agent a new real credential. A
 * refresh token, client secret or API key sent to a token endpoint through the gateway
 * would come back as an access token the gateway never sees, usable without it. Refused
 * (403 credential_minting_not_allowed) unless the secret says allow_minting.
 */
const REFRESH = '1//0real-google-refresh-token-never-for-the-agent';
const CLIENT_SECRET = 'real-slack-client-secret-0123456789';
const STRIPE_KEY = 'sk_live_51MintingRealKey';

describe('security: a swapped secret cannot mint a new credential (hole 1)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['oauth2.googleapis.com', 'slack.com', 'acme.slack.com', 'api.stripe.com', 'api.github.com', 'auth.example.com'],
      secrets: {
        REFRESH: { value: REFRESH, allowed_hosts: ['oauth2.googleapis.com'], inject: ['form:refresh_token'] },
        SLACK_APP: { value: CLIENT_SECRET, allowed_hosts: ['slack.com', 'acme.slack.com'] },
        GITHUB: { value: 'ghp_realGithubTokenNeverForTheAgent0000', allowed_hosts: ['api.github.com'] },
        STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] },
        MINTER: { value: 'real-client-secret-for-a-minting-secret', allowed_hosts: ['auth.example.com'], inject: ['form:client_secret'], allow_minting: true },
      },
    });
    w.up.respond = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 'ya29.fresh-access-token', echo: req.body.toString() }));
    };
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());

  const post = (url: string, body: string, headers: Record<string, string> = {}) =>
    request(url, { dispatcher: proxyAgent(w.gw), method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } });

  async function refused(r: Awaited<ReturnType<typeof request>>): Promise<void> {
    const text = await r.body.text();
    expect([r.statusCode, r.headers['x-gateway-error']], text).to.deep.equal([403, 'credential_minting_not_allowed']);
    expect(text).to.not.include('ya29');
    expect(w.up.seen).to.have.length(0);
  }

  it('attack: a Google refresh token traded for an access token at oauth2.googleapis.com/token', async () => {
    await refused(await post('https://oauth2.googleapis.com/token', `grant_type=refresh_token&client_id=x&refresh_token=${w.ph.REFRESH}`));
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:REFRESH', decision: 'deny', reason: 'credential_minting_not_allowed', status: 403 });
  });

  it('attack: the same with the path dressed up (//token/, upper case host)', async () => {
    await refused(await post('https://OAUTH2.googleapis.com//token/', `grant_type=refresh_token&refresh_token=${w.ph.REFRESH}`));
  });

  it('attack: a Slack client secret (Basic) at oauth.v2.access, sent as GET', async () => {
    const r = await request(`https://slack.com/api/oauth.v2.access?code=abc`, { dispatcher: proxyAgent(w.gw), headers: { authorization: `Basic ${Buffer.from(`123.456:${w.ph.SLACK_APP}`).toString('base64')}` } });
    await refused(r);
  });

  it('attack: a Stripe key asking for ephemeral keys', async () => {
    await refused(await post('https://api.stripe.com/v1/ephemeral_keys', 'customer=cus_1', { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'stripe-version': '2024-06-20' }));
  });

  it('attack: the Slack client secret at oauth.v2.access on a workspace subdomain, the method name percent-encoded', async () => {
    const r = await request(`https://acme.slack.com/api/OAuth%2Ev2.Access`, { dispatcher: proxyAgent(w.gw), method: 'POST', body: 'code=abc', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`123.456:${w.ph.SLACK_APP}`).toString('base64')}` } });
    await refused(r);
    const [e] = await w.audited(1);
    expect(e).to.include({ host: 'acme.slack.com', connector: 'secret:SLACK_APP', decision: 'deny', reason: 'credential_minting_not_allowed', status: 403 });
  });

  it('attack: a GitHub token asking for a self-hosted runner registration token (a runner receives the workflows\' secrets)', async () => {
    await refused(await post('https://api.github.com/repos/o/r/actions/runners/registration-token', '', { authorization: `Bearer ${w.ph.GITHUB}` }));
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:GITHUB', decision: 'deny', reason: 'credential_minting_not_allowed', status: 403 });
  });

  it('attack: a GitHub token registering an SSH key the agent holds the private half of', async () => {
    await refused(await post('https://api.github.com/user/keys', '{"title":"x","key":"ssh-ed25519 AAAA"}', { authorization: `Bearer ${w.ph.GITHUB}`, 'content-type': 'application/json' }));
  });

  it('a secret with allow_minting goes through (its own value still redacted from the answer)', async () => {
    const r = await post('https://auth.example.com/oauth/token', `grant_type=client_credentials&client_id=app&client_secret=${w.ph.MINTER}`);
    const text = await r.body.text();
    expect(r.statusCode).to.equal(200);
    expect(JSON.parse(text).echo).to.equal(`grant_type=client_credentials&client_id=app&client_secret=${w.ph.MINTER}`);
    expect(new URLSearchParams(w.up.seen[0]!.body.toString()).get('client_secret')).to.equal('real-client-secret-for-a-minting-secret');
  });

  it('allow_minting is shown on the secret only when set', async () => {
    const list = (await w.t.api.get(`/v1/environments/${w.envId}/secrets`)).body.data as Array<{ name: string; allow_minting?: boolean }>;
    expect(list.find((s) => s.name === 'MINTER')!.allow_minting).to.equal(true);
    expect(list.find((s) => s.name === 'REFRESH')).to.not.have.property('allow_minting');
  });
  it('attack: a session cookie the upstream sets in answer to the real key is dropped (a credential the gateway would never see); with allow_minting, or without a credential, it passes', async () => {
    const saved = w.up.respond;
    w.up.respond = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['session=s3ss10n-from-the-real-key; HttpOnly; Secure', 'lb=1'] });
      res.end('{"ok":true}');
    };
    try {
      const keyed = await request('https://api.github.com/user', { dispatcher: proxyAgent(w.gw), headers: { authorization: `token ${w.ph.GITHUB}` } });
      await keyed.body.text();
      expect(keyed.statusCode).to.equal(200);
      expect(w.up.seen[0]!.headers.authorization).to.equal('token ghp_realGithubTokenNeverForTheAgent0000');
      expect(keyed.headers['set-cookie']).to.equal(undefined);
      // The developer's choice: a secret that may mint gets its session.
      const minting = await post('https://auth.example.com/login', `client_secret=${w.ph.MINTER}`);
      await minting.body.text();
      expect(minting.headers['set-cookie']).to.deep.equal(['session=s3ss10n-from-the-real-key; HttpOnly; Secure', 'lb=1']);
      // No credential swapped: the answer is the upstream's, cookies and all.
      const plain = await request('https://api.github.com/zen', { dispatcher: proxyAgent(w.gw) });
      await plain.body.text();
      expect(plain.headers['set-cookie']).to.deep.equal(['session=s3ss10n-from-the-real-key; HttpOnly; Secure', 'lb=1']);
    } finally {
      w.up.respond = saved;
    }
  });
});
