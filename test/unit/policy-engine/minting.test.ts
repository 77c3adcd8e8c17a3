import { expect } from 'chai';
import { credentialMintingRule } from '../../../policy-engine/classify/index.js';

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
  ];
  for (const [method, host, path, rule] of mint) it(`${method} ${host}${path} → ${rule}`, () => expect(credentialMintingRule({ method, host, path })).to.equal(rule));

  const not: Array<[string, string, string]> = [
    ['GET', 'oauth2.googleapis.com', '/tokeninfo'],
    ['GET', 'oauth2.googleapis.com', '/token'],
    ['POST', 'slack.com', '/api/chat.postMessage'],
    ['POST', 'api.stripe.com', '/v1/charges'],
    ['GET', 'api.stripe.com', '/v1/ephemeral_keys'],
    ['POST', 'api.example.com', '/v1/token'],
    ['POST', 'api.example.com', '/tokens'],
  ];
  for (const [method, host, path] of not) it(`${method} ${host}${path} → none`, () => expect(credentialMintingRule({ method, host, path })).to.equal(null));
});
