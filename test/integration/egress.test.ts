/**
 * Egress allowlist endpoints (decisions.md, Environments: `egress allowlist`, "Effective
 * egress allowlist"): GET / PUT `/v1/environments/{id}/egress` → `{allow, source,
 * effective}` and `/v1/egress` (the developer default) → `{allow}`.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { createEnv, expectError, expectNotFound } from './environments.fixtures.js';

describe('egress allowlist: endpoints', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  const envEgress = (c: ApiClient, id: string) => `/v1/environments/${id}/egress`;

  describe('developer default /v1/egress', () => {
    it('is [] when never set', async () => {
      const dev = await t.otherDeveloper();
      const r = await dev.get('/v1/egress');
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ allow: [] });
    });

    it('PUT stores the list lower-cased and without duplicates; GET reads it; null clears', async () => {
      const dev = await t.otherDeveloper();
      const put = await dev.put('/v1/egress', { allow: ['API.Example.com', '*.Example.org', 'api.example.com', '10.0.0.1'] });
      expect(put.status, put.text).to.equal(200);
      expect(put.body).to.deep.equal({ allow: ['api.example.com', '*.example.org', '10.0.0.1'] });
      expect((await dev.get('/v1/egress')).body).to.deep.equal(put.body);
      expect((await dev.put('/v1/egress', { allow: [] })).body).to.deep.equal({ allow: [] });
      await dev.put('/v1/egress', { allow: ['a.com'] });
      expect((await dev.put('/v1/egress', { allow: null })).body).to.deep.equal({ allow: [] });
      expect((await dev.get('/v1/egress')).body).to.deep.equal({ allow: [] });
    });

    it('is per developer', async () => {
      const a = await t.otherDeveloper();
      const b = await t.otherDeveloper();
      await a.put('/v1/egress', { allow: ['a.com'] });
      expect((await b.get('/v1/egress')).body).to.deep.equal({ allow: [] });
    });
  });

  describe('environment /v1/environments/{id}/egress', () => {
    it('unset, no default: {allow: null, source: "none", effective: []}', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev);
      const r = await dev.get(envEgress(dev, e.id));
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ allow: null, source: 'none', effective: [], unknown_hosts: 'deny' });
    });

    it('unset: the developer default applies (source "developer")', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev);
      await dev.put('/v1/egress', { allow: ['b.com', 'a.com'] });
      expect((await dev.get(envEgress(dev, e.id))).body).to.deep.equal({ allow: null, source: 'developer', effective: ['a.com', 'b.com'], unknown_hosts: 'deny' });
    });

    it('PUT sets the environment\'s own list, which replaces the default; [] is a list too; null falls back', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev);
      await dev.put('/v1/egress', { allow: ['default.com'] });
      const put = await dev.put(envEgress(dev, e.id), { allow: ['Own.com', '*.own.org'] });
      expect(put.status, put.text).to.equal(200);
      expect(put.body).to.deep.equal({ allow: ['own.com', '*.own.org'], source: 'environment', effective: ['*.own.org', 'own.com'], unknown_hosts: 'deny' });
      expect((await dev.get(envEgress(dev, e.id))).body).to.deep.equal(put.body);

      expect((await dev.put(envEgress(dev, e.id), { allow: [] })).body).to.deep.equal({ allow: [], source: 'environment', effective: [], unknown_hosts: 'deny' });
      expect((await dev.put(envEgress(dev, e.id), { allow: null })).body).to.deep.equal({ allow: null, source: 'developer', effective: ['default.com'], unknown_hosts: 'deny' });
    });

    it('egress_allow given at create is the environment\'s list', async () => {
      const e = await createEnv(api, { egress_allow: ['Created.com'] });
      expect((await api.get(envEgress(api, e.id))).body).to.deep.equal({ allow: ['created.com'], source: 'environment', effective: ['created.com'], unknown_hosts: 'deny' });
    });

    it('effective adds the hosts of the environment\'s and the developer\'s secrets (not of shadowed ones)', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev, { egress_allow: ['base.com'], secrets: { ENV_S: { value: 'v', allowed_hosts: ['api.stripe.com'] } } });
      await dev.put('/v1/secrets/DEV_S', { value: 'v', allowed_hosts: ['*.dev.com'] });
      await dev.put('/v1/secrets/SHADOWED', { value: 'v', allowed_hosts: ['shadowed-dev.com'] });
      await dev.put(`/v1/environments/${e.id}/secrets/SHADOWED`, { value: 'v', allowed_hosts: ['shadowing-env.com'] });
      const r = await dev.get(envEgress(dev, e.id));
      expect(r.body).to.deep.equal({
        allow: ['base.com'],
        source: 'environment',
        effective: ['*.dev.com', 'api.stripe.com', 'base.com', 'shadowing-env.com'],
        unknown_hosts: 'deny',
      });
      await dev.delete(`/v1/environments/${e.id}/secrets/SHADOWED`);
      expect((await dev.get(envEgress(dev, e.id))).body.effective).to.deep.equal(['*.dev.com', 'api.stripe.com', 'base.com', 'shadowed-dev.com']);
    });

    it('records an egress_updated event', async () => {
      const e = await createEnv(api);
      await api.put(envEgress(api, e.id), { allow: ['A.com'] });
      await api.put(envEgress(api, e.id), { allow: null });
      const events = (await api.get(`/v1/environments/${e.id}/events`)).body.data.filter((x: any) => x.kind === 'egress_updated');
      expect(events.map((x: any) => x.data)).to.deep.equal([{ count: 1 }, { count: null }]);
    });

    it('a destroyed environment: PUT is 409 environment_destroyed; GET shows it reaches nothing', async () => {
      const e = await createEnv(api, { egress_allow: ['a.com'] });
      await api.delete(`/v1/environments/${e.id}`);
      expectError(await api.put(envEgress(api, e.id), { allow: ['b.com'] }), 409, 'environment_destroyed');
      expect((await api.get(envEgress(api, e.id))).body).to.deep.equal({ allow: ['a.com'], source: 'environment', effective: [], unknown_hosts: 'deny' });
    });

    it('another developer\'s environment and a missing one are 404', async () => {
      const e = await createEnv(api, { egress_allow: ['a.com'] });
      const other = await t.otherDeveloper();
      expectNotFound(await other.get(envEgress(other, e.id)));
      expectNotFound(await other.put(envEgress(other, e.id), { allow: ['*'] }));
      expect((await api.get(envEgress(api, e.id))).body.allow).to.deep.equal(['a.com']);
      const missing = `env_${randomBytes(12).toString('hex')}`;
      expectNotFound(await api.get(envEgress(api, missing)));
      expectNotFound(await api.put(envEgress(api, missing), { allow: [] }));
    });

    it('500 patterns of 253 characters fit (both lists)', async () => {
      const label = (i: number) => `h${String(i).padStart(3, '0')}`;
      const long = (i: number) => `${label(i)}.${'a'.repeat(61)}.${'b'.repeat(61)}.${'c'.repeat(61)}.${'d'.repeat(58)}.com`;
      const allow = Array.from({ length: 500 }, (_, i) => long(i));
      expect(allow[0]!.length).to.equal(253);
      const e = await createEnv(api);
      const r = await api.put(envEgress(api, e.id), { allow });
      expect(r.status, r.text.slice(0, 200)).to.equal(200);
      expect(r.body.allow).to.have.length(500);
      const dev = await t.otherDeveloper();
      expect((await dev.put('/v1/egress', { allow })).status).to.equal(200);
      expect((await dev.get('/v1/egress')).body.allow).to.have.length(500);
    });
  });

  // Both PUT endpoints share the body rules.
  for (const [label, path] of [['environment', 'env'], ['developer', 'dev']] as const) {
    describe(`validation (${label})`, () => {
      let url: string;
      before(async () => {
        url = path === 'env' ? envEgress(api, (await createEnv(api)).id) : '/v1/egress';
      });
      for (const p of ['', 'http://a.com', 'a.com/path', 'a.com:443', 'exa mple.com', '*.*.com', 'foo.*', '*a.com', 'a..com', '-a.com', 'a_b.com', 'a.com.', 'x'.repeat(254)]) {
        it(`rejects the pattern ${JSON.stringify(p.slice(0, 20))} with 400 invalid_request`, async () => {
          expectError(await api.put(url, { allow: ['ok.com', p] }), 400, 'invalid_request');
        });
      }
      it('rejects 501 patterns with 400', async () => {
        expectError(await api.put(url, { allow: Array.from({ length: 501 }, (_, i) => `h${i}.com`) }), 400, 'invalid_request');
      });
      for (const [what, body] of [
        ['a missing allow', {}],
        ['allow as a string', { allow: 'a.com' }],
        ['a number in allow', { allow: [1] }],
        ['null in allow', { allow: [null] }],
        ['an unknown field', { allow: [], deny: [] }],
        ['an array body', ['a.com']],
      ] as const) {
        it(`rejects ${what} with 422 invalid_body`, async () => {
          expectError(await api.put(url, body), 422, 'invalid_body');
        });
      }
      it('no body is 415', async () => {
        expectError(await api.request('PUT', url), 415, 'unsupported_media_type');
      });
      it('nothing was stored by the rejected requests', async () => {
        const r = await api.get(url);
        expect(r.body.allow ?? []).to.deep.equal([]);
      });
    });
  }

  it('401 without a key; unsupported methods are 404 no such route', async () => {
    expectError(await t.raw('GET', '/v1/egress'), 401, 'unauthorized');
    const r = await api.delete('/v1/egress');
    expectError(r, 404, 'not_found');
    expect(r.body.message).to.equal('no such route');
  });
});
