import { expect } from 'chai';
import fc from 'fast-check';
import { credentialMintingRule } from '../../../policy-engine/classify/index.js';
import { CREDENTIAL_MINTING_ROWS, matchMintingPath, requiredLastSegment } from '../../../policy-engine/classify/minting.js';

describe('credential-minting endpoints (policy-engine/classify/minting)', () => {
  const mint: Array<[string, string, string, string]> = [
    ['POST', 'oauth2.googleapis.com', '/token', 'google.oauth2.token'],
    ['POST', 'OAUTH2.googleapis.com.:443', '//token/', 'google.oauth2.token'],
    ['POST', 'accounts.google.com', '/o/oauth2/token', 'google.accounts.token'],
    ['POST', 'www.googleapis.com', '/oauth2/v4/token', 'google.www.oauth2.token'],
    ['POST', 'iamcredentials.googleapis.com', '/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken', 'google.iamcredentials'],
    ['POST', 'sts.googleapis.com', '/v1/token', 'google.sts.token'],
    ['POST', 'slack.com', '/api/oauth.v2.access', 'slack.oauth.v2.access'],
    ['GET', 'slack.com', '/api/oauth.v2.access?code=x', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/API/OAuth.V2.Access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/oauth%2Ev2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/x/../tooling.tokens.rotate', 'slack.tooling.tokens.rotate'],
    ['POST', 'slack.com', '/api/apps.connections.open', 'slack.apps.connections.open'],
    ['POST', 'api.stripe.com', '/v1/ephemeral_keys', 'stripe.ephemeral_keys'],
    ['POST', 'api.stripe.com', '/v1/accounts/acct_1/login_links', 'stripe.accounts.login_links'],
    ['POST', 'api.stripe.com', '/v1/account_sessions', 'stripe.account_sessions'],
    ['POST', 'connect.stripe.com', '/oauth/token', 'stripe.connect.oauth.token'],
    ['POST', 'api.github.com', '/app/installations/123/access_tokens', 'github.app.installations.access_tokens'],
    ['PATCH', 'api.github.com', '/applications/Iv1.abc/token', 'github.applications.token'],
    ['POST', 'github.com', '/login/oauth/access_token', 'github.login.oauth.access_token'],
    ['POST', 'login.microsoftonline.com', '/common/oauth2/v2.0/token', 'microsoft.oauth2.token'],
    ['POST', 'auth.example.com', '/oauth/token', 'generic.oauth.token'],
    ['POST', 'id.example.com', '/realms/x/protocol/openid-connect/oauth2/token', 'generic.oauth.token'],
    ['POST', 'id.example.com', '/oauth2/v1/token', 'generic.oauth.token'],
    // a GET carrying a swapped secret to the token endpoint is nothing legitimate either
    ['GET', 'oauth2.googleapis.com', '/token', 'google.oauth2.token'],
    // second pass: more endpoints
    ['POST', 'oauth2.mtls.googleapis.com', '/token', 'google.oauth2.token'],
    ['POST', 'oauth2.googleapis.com', '/device/code', 'google.oauth2.token'],
    ['POST', 'accounts.google.com', '/o/oauth2/device/code', 'google.accounts.token'],
    ['POST', 'sts.googleapis.com', '/v1/oauthtoken', 'google.sts.token'],
    ['POST', 'iamcredentials.googleapis.com', '/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:signJwt', 'google.iamcredentials'],
    ['POST', 'iamcredentials.googleapis.com', '/v1/projects/-/serviceAccounts/sa%40p.iam.gserviceaccount.com%3AgenerateIdToken', 'google.iamcredentials'],
    ['POST', 'iam.googleapis.com', '/v1/projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com/keys', 'google.iam.serviceAccounts.keys'],
    ['POST', 'iam.googleapis.com', '/v1/projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com/keys:upload', 'google.iam.serviceAccounts.keys'],
    ['POST', 'iam.googleapis.com', '/v1/projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com:signBlob', 'google.iam.serviceAccounts.sign'],
    ['POST', 'apikeys.googleapis.com', '/v2/projects/p/locations/global/keys', 'google.apikeys.create'],
    ['GET', 'apikeys.googleapis.com', '/v2/projects/p/locations/global/keys/k1:getKeyString', 'google.apikeys.getKeyString'],
    ['POST', 'securetoken.googleapis.com', '/v1/token?key=x', 'google.securetoken'],
    ['POST', 'acme.slack.com', '/api/oauth.v2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack-gov.com', '/api/oauth.v2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/apps.manifest.create', 'slack.apps.manifest.create'],
    ['POST', 'slack.com', '/api/apps.auth.external.get', 'slack.apps.auth.external.get'],
    ['GET', 'slack.com', '/api/rtm.start', 'slack.rtm.start'],
    ['POST', 'slack.com', '/api/oauth.token', 'slack.oauth.token'],
    ['POST', 'api.stripe.com', '/v1/billing_portal/sessions', 'stripe.billing_portal.sessions'],
    ['POST', 'api.stripe.com', '/v2/core/account_links', 'stripe.v2.account_links'],
    ['POST', 'api.stripe.com', '/v2/billing/meter_event_session', 'stripe.v2.meter_event_session'],
    ['POST', 'api.github.com', '/applications/Iv1.abc/token/scoped', 'github.applications.token'],
    ['POST', 'api.github.com', '/app-manifests/code123/conversions', 'github.app_manifests.conversions'],
    ['POST', 'api.github.com', '/repos/o/r/actions/runners/registration-token', 'github.actions.runners.token'],
    ['POST', 'api.github.com', '/orgs/o/actions/runners/generate-jitconfig', 'github.actions.runners.token'],
    ['POST', 'api.github.com', '/user/keys', 'github.keys'],
    ['POST', 'api.github.com', '/repos/o/r/keys', 'github.keys'],
    ['POST', 'github.com', '/login/device/code', 'github.login.oauth.access_token'],
    ['POST', 'login.windows.net', '/contoso.onmicrosoft.com/oauth2/token', 'microsoft.oauth2.token'],
    ['POST', 'login.microsoftonline.com', '/common/oauth2/v2.0/devicecode', 'microsoft.oauth2.token'],
    ['POST', 'login.live.com', '/oauth20_token.srf', 'microsoft.live.token'],
    ['POST', 'graph.microsoft.com', '/v1.0/applications/abc/addPassword', 'microsoft.graph.credentials'],
    ['POST', 'graph.microsoft.com', "/beta/applications(appId='x')/microsoft.graph.addKey", 'microsoft.graph.credentials'],
    ['POST', 'graph.microsoft.com', '/v1.0/servicePrincipals/sp1/addTokenSigningCertificate', 'microsoft.graph.credentials'],
    ['POST', 'graph.microsoft.com', '/v1.0/users/u1/authentication/temporaryAccessPassMethods', 'microsoft.graph.credentials'],
    ['POST', 'graph.microsoft.com', '/v1.0/users/u1/authentication/methods/m1/resetPassword', 'microsoft.graph.credentials'],
    ['GET', 'graph.facebook.com', '/v19.0/oauth/access_token?grant_type=fb_exchange_token', 'facebook.oauth.access_token'],
    ['POST', 'dev-1.okta.com', '/oauth2/default/v1/token', 'generic.oauth.token'],
    ['POST', 'kc.example.com', '/realms/r/protocol/openid-connect/token', 'generic.oauth.token'],
    ['POST', 'id.example.com', '/connect/token', 'generic.oauth.token'],
    ['POST', 'app.example.com', '/o/token/', 'generic.oauth.token'],
    ['POST', 'api-m.paypal.com', '/v1/oauth2/token', 'generic.oauth.token'],
    ['PUT', 'auth.example.com', '/oauth/token', 'generic.oauth.token'],
    ['POST', 'auth.example.com', '/oauth/access_token', 'generic.oauth.token'],
  ];

  // Every spelling a server may read as the endpoint: the classifier's normalisation
  // (case, port, trailing dot, percent-encoding, `//`, dot segments) and a looser
  // reading (double encoding, %2F and \ as separators, ;params, trailing dots and spaces,
  // Unicode case folding), since the generic row guards servers we know nothing about.
  const tricks: Array<[string, string, string, string]> = [
    ['POST', 'SLACK.COM.:443', '/API/OAUTH.V2.ACCESS', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/oauth%2ev2%2Eaccess', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/oauth%252Ev2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api%2Foauth.v2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api\\oauth.v2.access', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/oauth.v2.access;jsessionid=1', 'slack.oauth.v2.access'],
    ['POST', 'slack.com', '/api/./x/../oauth.v2.access/', 'slack.oauth.v2.access'],
    ['POST', 'login.microsoftonline.com', '/common/oauth2/v2.0/token.', 'microsoft.oauth2.token'],
    ['POST', 'auth.example.com', '/oauth/token%20', 'generic.oauth.token'],
    ['POST', 'auth.example.com', '/OAuth/Token', 'generic.oauth.token'],
    ['POST', 'auth.example.com', '//api//oauth2//token', 'generic.oauth.token'],
    ['POST', 'github.com', '/login/oauth/acce\u017f\u017f_token', 'github.login.oauth.access_token'], // long s: upper-cases to S
    ['POST', 'auth.example.com', 'https://auth.example.com/oauth/token?x=1', 'generic.oauth.token'],
  ];
  for (const [method, host, path, rule] of tricks) it(`${method} ${host}${JSON.stringify(path)} → ${rule}`, () => expect(credentialMintingRule({ method, host, path })).to.equal(rule));
  for (const [method, host, path, rule] of mint) it(`${method} ${host}${path} → ${rule}`, () => expect(credentialMintingRule({ method, host, path })).to.equal(rule));

  const not: Array<[string, string, string]> = [
    ['GET', 'oauth2.googleapis.com', '/tokeninfo'],
    ['POST', 'oauth2.googleapis.com', '/revoke'],
    ['POST', 'api.github.com', '/applications/Iv1.abc/token'], // checks the token sent
    ['DELETE', 'api.github.com', '/applications/Iv1.abc/token'], // revokes
    ['GET', 'api.github.com', '/user/keys'],
    ['GET', 'iam.googleapis.com', '/v1/projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com/keys'],
    ['GET', 'storage.googleapis.com', '/storage/v1/b/bkt/o/token'],
    ['GET', 'auth.example.com', '/oauth/token/info'],
    ['POST', 'slack.com', '/api/auth.test'],
    ['POST', 'slack.com', '/api/oauth.v2.accessx'],
    ['POST', 'evil-slack.com', '/api/oauth.v2.access'],
    ['POST', 'api.stripe.com', '/v1/checkout/sessions'],
    ['POST', 'slack.com', '/api/chat.postMessage'],
    ['POST', 'api.stripe.com', '/v1/charges'],
    ['GET', 'api.stripe.com', '/v1/ephemeral_keys'],
    ['POST', 'api.example.com', '/v1/token'],
    ['POST', 'api.example.com', '/tokens'],
  ];
  for (const [method, host, path] of not) it(`${method} ${host}${path} → none`, () => expect(credentialMintingRule({ method, host, path })).to.equal(null));

  it('any spelling of a minting path (case, percent-encoding, `//`, `./`, `x/../`) still matches', () => {
    const endpoints: Array<[string, string, string, string]> = [
      ['POST', 'slack.com', '/api/oauth.v2.access', 'slack.oauth.v2.access'],
      ['POST', 'oauth2.googleapis.com', '/token', 'google.oauth2.token'],
      ['POST', 'api.stripe.com', '/v1/ephemeral_keys', 'stripe.ephemeral_keys'],
      ['POST', 'api.github.com', '/app/installations/42/access_tokens', 'github.app.installations.access_tokens'],
      ['POST', 'login.microsoftonline.com', '/common/oauth2/v2.0/token', 'microsoft.oauth2.token'],
      ['POST', 'auth.example.com', '/oauth/token', 'generic.oauth.token'],
    ];
    const respell = (path: string, seed: number[]): string => {
      let i = 0;
      const r = (): number => seed[i++ % seed.length]!;
      const segs = path.split('/').slice(1).map((seg) =>
        [...seg]
          .map((c) => {
            const k = r() % 4;
            return k === 0 ? c.toUpperCase() : k === 1 ? `%${c.charCodeAt(0).toString(16).padStart(2, '0')}` : c;
          })
          .join(''),
      );
      return segs.map((seg) => { const k = r() % 5; return k === 0 ? `/${seg}` : k === 1 ? `/./${seg}` : k === 2 ? `/x/../${seg}` : `/${seg}`; }).join('/').replace(/^\/+/, '/');
    };
    fc.assert(
      fc.property(fc.constantFrom(...endpoints), fc.array(fc.nat(100), { minLength: 1, maxLength: 40 }), ([method, host, path, rule], seed) => {
        const spelled = respell(path, seed);
        expect(credentialMintingRule({ method, host, path: spelled }), spelled).to.equal(rule);
      }),
      { numRuns: 1000 },
    );
  });

  it('a path of 50,000 segments is judged (the matcher is linear: a quadratic one would not finish)', () => {
    const path = `${'/a'.repeat(50000)}/oauth2/x/token`;
    expect(credentialMintingRule({ method: 'POST', host: 'auth.example.com', path })).to.equal('generic.oauth.token');
    expect(credentialMintingRule({ method: 'POST', host: 'auth.example.com', path: '/b'.repeat(50000) })).to.equal(null);
  });

  it('the last-segment shortcut is exact: whenever a pattern matches, the path ends in the literal it requires', () => {
    const alphabet = ['token', 'oauth', 'oauth2', 'o', 'x', 'a:signjwt', 'keys', 'access_token'];
    const patternElement = fc.constantFrom('*', '**', '*:signjwt', ...alphabet);
    const tablePatterns = CREDENTIAL_MINTING_ROWS.flatMap((row) => row.path);
    fc.assert(
      fc.property(
        fc.oneof(fc.array(patternElement, { maxLength: 6 }), fc.constantFrom(...tablePatterns)),
        fc.array(fc.constantFrom(...alphabet), { maxLength: 8 }),
        (pattern, segs) => {
          const last = requiredLastSegment(pattern);
          if (last !== null && matchMintingPath(segs, pattern)) expect(segs.at(-1), `${pattern.join('/')} ~ ${segs.join('/')}`).to.equal(last);
        },
      ),
      { numRuns: 5000 },
    );
    // And it does shortcut: the generic token row's patterns all end in a literal.
    expect(CREDENTIAL_MINTING_ROWS.find((r) => r.rule === 'generic.oauth.token')!.path.every((p) => requiredLastSegment(p) !== null)).to.equal(true);
  });

  it('never throws on odd input', () => {
    for (const path of ['', '%', '%zz/%E0%A4%A', 'http://[', '?', '#', '/..', '\\'.repeat(5)]) {
      for (const host of ['', '[::1]:443', '.', 'x'.repeat(300)]) expect(() => credentialMintingRule({ method: '', host, path })).not.to.throw();
    }
  });
});
