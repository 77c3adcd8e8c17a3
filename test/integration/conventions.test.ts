import { expect } from 'chai';
import { startTestService, client, type TestService } from '../helpers/service.js';

describe('HTTP conventions (decisions.md, Conventions)', () => {
  let t: TestService;
  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t.close();
  });

  describe('API keys', () => {
    const cases: Array<[string, Record<string, string>]> = [
      ['missing', {}],
      ['not Bearer', { authorization: `Basic abc` }],
      ['malformed', { authorization: 'Bearer sk_nothex' }],
      ['unknown', { authorization: `Bearer sk_${'0'.repeat(40)}` }],
    ];
    for (const [name, headers] of cases) {
      it(`401 unauthorized for a ${name} key`, async () => {
        const r = await t.raw('GET', '/v1/environments', { headers });
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'unauthorized', message: r.body.message });
        expect(r.body.message).to.be.a('string').and.not.empty;
      });
    }

    it('401 for a revoked key, and only a hash is stored', async () => {
      const dev = await t.accounts.ensureDeveloper();
      const { key, info } = await t.accounts.createApiKey(dev.id, 'to revoke');
      const c = client(t.url, key);
      expect((await c.get('/v1/environments')).status).to.equal(200);
      const row = await t.svc.db('api_keys').where({ id: info.id }).first();
      expect(JSON.stringify(row)).to.not.include(key);
      expect(row.key_hash).to.match(/^[0-9a-f]{64}$/);
      await t.accounts.revokeApiKey(info.id);
      const r = await c.get('/v1/environments');
      expect(r.status).to.equal(401);
      expect(r.body.error).to.equal('unauthorized');
    });
  });

  describe('routes', () => {
    it('404 no such route for an unknown path', async () => {
      const r = await t.api.get('/v1/nothing-here');
      expect(r.status).to.equal(404);
      expect(r.body).to.deep.equal({ error: 'not_found', message: 'no such route' });
    });

    it('404 no such route for an unsupported method on an existing path', async () => {
      const r = await t.api.request('PATCH', '/v1/environments', {});
      expect(r.status).to.equal(404);
      expect(r.body).to.deep.equal({ error: 'not_found', message: 'no such route' });
    });

    it('404 no such resource for a missing id', async () => {
      const r = await t.api.get('/v1/environments/env_000000000000000000000000');
      expect(r.status).to.equal(404);
      expect(r.body).to.deep.equal({ error: 'not_found', message: 'no such resource' });
    });

    it('404 for another developer\'s resource', async () => {
      const created = await t.api.post('/v1/environments', { end_user_id: 'conv-owner' });
      expect(created.status).to.equal(201);
      const other = await t.otherDeveloper();
      const r = await other.get(`/v1/environments/${created.body.id}`);
      expect(r.status).to.equal(404);
      expect(r.body).to.deep.equal({ error: 'not_found', message: 'no such resource' });
      expect((await other.get('/v1/environments')).body.data).to.deep.equal([]);
    });
  });

  describe('bodies', () => {
    const auth = () => ({ authorization: `Bearer ${t.api.key}` });

    it('415 unsupported_media_type for a body without JSON content type', async () => {
      const r = await t.raw('POST', '/v1/environments', { body: '{"end_user_id":"x"}', headers: { ...auth(), 'content-type': 'text/plain' } });
      expect(r.status).to.equal(415);
      expect(r.body.error).to.equal('unsupported_media_type');
    });

    it('415 for a create with no body at all', async () => {
      const r = await t.raw('POST', '/v1/environments', { headers: auth() });
      expect(r.status).to.equal(415);
      expect(r.body.error).to.equal('unsupported_media_type');
    });

    it('accepts application/json with a charset', async () => {
      const r = await t.raw('POST', '/v1/environments', { body: '{"end_user_id":"charset-user"}', headers: { ...auth(), 'content-type': 'application/json; charset=utf-8' } });
      expect(r.status).to.equal(201);
    });

    it('400 invalid_request for malformed JSON', async () => {
      const r = await t.raw('POST', '/v1/environments', { body: '{"end_user_id":', headers: { ...auth(), 'content-type': 'application/json' } });
      expect(r.status).to.equal(400);
      expect(r.body.error).to.equal('invalid_request');
    });

    it('400 for an empty body sent with the JSON content type where a body is needed', async () => {
      const r = await t.raw('POST', '/v1/environments', { body: '', headers: { ...auth(), 'content-type': 'application/json' } });
      expect(r.status).to.equal(400);
      expect(r.body.error).to.equal('invalid_request');
    });

    it('an operation that takes no body ignores an empty one sent with the JSON content type (issue 10)', async () => {
      const r = await t.raw('POST', '/v1/environments/env_000000000000000000000000/suspend', { body: '', headers: { ...auth(), 'content-type': 'application/json' } });
      expect(r.status).to.equal(404);
      expect(r.body.error).to.equal('not_found');
    });

    it('422 invalid_body for an unknown field, a wrong type and a missing field', async () => {
      for (const body of [{ end_user_id: 'u', nope: 1 }, { end_user_id: 5 }, {}, [], 'text']) {
        const r = await t.api.post('/v1/environments', body);
        expect(r.status, JSON.stringify(body)).to.equal(422);
        expect(r.body.error).to.equal('invalid_body');
      }
    });

    it('400 invalid_request for a value that breaks a rule', async () => {
      const r = await t.api.post('/v1/environments', { end_user_id: 'x'.repeat(201) });
      expect(r.status).to.equal(400);
      expect(r.body.error).to.equal('invalid_request');
    });
  });

  describe('pagination', () => {
    it('clamps limit, walks pages with after/next, and rejects a non-integer limit', async () => {
      for (let i = 0; i < 5; i++) expect((await t.api.post('/v1/environments', { end_user_id: `page-${i}` })).status).to.equal(201);
      const all = (await t.api.get('/v1/environments?limit=500')).body.data as Array<{ id: string }>;
      expect(all.length).to.be.greaterThanOrEqual(5);
      const first = await t.api.get('/v1/environments?limit=0');
      expect(first.status).to.equal(200);
      expect(first.body.data).to.have.length(1);
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const r: { body: { data: Array<{ id: string }>; next: string | null } } = await t.api.get(`/v1/environments?limit=2${after ? `&after=${after}` : ''}`);
        seen.push(...r.body.data.map((e) => e.id));
        if (!r.body.next) break;
        expect(r.body.next).to.equal(r.body.data[r.body.data.length - 1]!.id);
        after = r.body.next;
      }
      expect(seen).to.deep.equal(all.map((e) => e.id));
      const bad = await t.api.get('/v1/environments?limit=abc');
      expect(bad.status).to.equal(400);
      expect(bad.body.error).to.equal('invalid_request');
    });
  });

  describe('test clock', () => {
    it('advances the service clock and answers with the new time', async () => {
      const before = Date.now();
      const r = await t.api.post('/v1/test-clock/advance', { seconds: 3600 });
      expect(r.status).to.equal(200);
      expect(Date.parse(r.body.now)).to.be.greaterThanOrEqual(before + 3600_000);
      expect(r.body.now).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    });

    it('is 404 when GATEWAY_TEST_CLOCK is off', async () => {
      const off = await startTestService({ GATEWAY_TEST_CLOCK: '0' });
      try {
        const r = await off.api.post('/v1/test-clock/advance', { seconds: 1 });
        expect(r.status).to.equal(404);
        expect(r.body.error).to.equal('not_found');
      } finally {
        await off.close();
      }
    });
  });
});
