import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';

/** GET /v1/oauth-clients and PUT /v1/oauth-clients/{provider} (service.md "OAuth client entry"; issue 11, item 1). */
describe('OAuth clients', () => {
  let t: TestService;
  const GOOGLE_SECRET = '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6789';
  before(async () => {
    t = await startTestService({ BASE_URL: 'https://gateway.example.com/', GOOGLE_CLIENT_ID: 'platform-id.apps.googleusercontent.com', GOOGLE_CLIENT_SECRET: 'GOCSPX-platform' });
  });
  after(async () => {
    await t.close();
  });

  it('lists one entry per provider before anything is registered, with redirect_uri from BASE_URL and the platform apps configured', async () => {
    const r = await t.api.get('/v1/oauth-clients');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({
      data: [
        { provider: 'google', client_id: null, platform_app_available: true, redirect_uri: 'https://gateway.example.com/v1/oauth/google/callback' },
        { provider: 'slack', client_id: null, platform_app_available: false, redirect_uri: 'https://gateway.example.com/v1/oauth/slack/callback' },
      ],
    });
  });

  it('PUT registers the app: 200 with the entry, the secret never returned and stored only encrypted; a second PUT replaces', async () => {
    const put = await t.api.put('/v1/oauth-clients/google', { client_id: 'dev-app.apps.googleusercontent.com', client_secret: GOOGLE_SECRET });
    expect(put.status, put.text).to.equal(200);
    expect(put.body).to.deep.equal({ provider: 'google', client_id: 'dev-app.apps.googleusercontent.com', platform_app_available: true, redirect_uri: 'https://gateway.example.com/v1/oauth/google/callback' });
    expect(put.text).to.not.include(GOOGLE_SECRET);
    const rows = await t.svc.db('oauth_clients').select();
    expect(rows).to.have.length(1);
    expect(JSON.stringify(rows)).to.not.include(GOOGLE_SECRET);

    const again = await t.api.put('/v1/oauth-clients/google', { client_id: 'second-app', client_secret: 'GOCSPX-second' });
    expect(again.status).to.equal(200);
    expect(again.body.client_id).to.equal('second-app');
    expect(await t.svc.db('oauth_clients').select()).to.have.length(1);
    const list = await t.api.get('/v1/oauth-clients');
    expect(list.body.data[0].client_id).to.equal('second-app');
    expect(list.text).to.not.include('GOCSPX');
  });

  it('400 for empty (or blank) values, 422 for a missing field, a wrong type or an unknown field, 404 for an unknown provider', async () => {
    for (const body of [{ client_id: '', client_secret: 's' }, { client_id: 'i', client_secret: '' }, { client_id: '  ', client_secret: 's' }, { client_id: 'a b', client_secret: 's' }, { client_id: 'i', client_secret: 'x'.repeat(513) }]) {
      const r = await t.api.put('/v1/oauth-clients/slack', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error).to.equal('invalid_request');
    }
    for (const body of [{ client_id: 'i' }, { client_secret: 's' }, { client_id: 1, client_secret: 's' }, { client_id: 'i', client_secret: 's', extra: 1 }, []]) {
      const r = await t.api.put('/v1/oauth-clients/slack', body);
      expect(r.status, JSON.stringify(body)).to.equal(422);
      expect(r.body.error).to.equal('invalid_body');
    }
    for (const provider of ['github', 'Google', 'x'.repeat(300)]) {
      const r = await t.api.put(`/v1/oauth-clients/${provider}`, { client_id: 'i', client_secret: 's' });
      expect(r.status, provider).to.equal(404);
      expect(r.body.error).to.equal('not_found');
    }
    expect((await t.api.get('/v1/oauth-clients')).body.data[1].client_id).to.equal(null);
  });

  it('another developer sees none of it', async () => {
    const other = await t.otherDeveloper();
    const r = await other.get('/v1/oauth-clients');
    expect(r.body.data.map((e: { client_id: string | null }) => e.client_id)).to.deep.equal([null, null]);
  });
});
