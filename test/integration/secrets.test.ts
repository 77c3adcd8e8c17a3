/**
 * Secrets endpoints (decisions.md, Environments: `secrets`, `developer secrets`, "Secret
 * create request"; service.md Limits: 100 per environment and per developer):
 * PUT / DELETE / GET at `/v1/environments/{id}/secrets[/{name}]` and `/v1/secrets[/{name}]`.
 * Every status with its code, values never in a response nor in clear in the store,
 * placeholder kept on replace, the 100 limit under a concurrent burst.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService, type ApiClient, type ApiResponse } from '../helpers/service.js';
import { usingMysql } from '../helpers/db.js';
import { TIMESTAMP, createEnv, expectError, expectNotFound } from './environments.fixtures.js';

const PLACEHOLDER = /^svcph_[0-9a-f]{32}$/;
const RECORD_KEYS = ['allowed_hosts', 'created_at', 'infrastructure', 'name', 'placeholder'];

/** A value that must never show up anywhere but in the VM's requests upstream. */
const secretValue = () => `sv-${randomBytes(8).toString('hex')}-DO-NOT-LEAK`;

function expectRecord(res: ApiResponse, status: number, name: string): any {
  expect(res.status, res.text).to.equal(status);
  expect(res.headers.get('content-type') ?? '').to.match(/^application\/json/);
  expect(Object.keys(res.body).sort()).to.deep.equal(RECORD_KEYS);
  expect(res.body.name).to.equal(name);
  expect(res.body.placeholder).to.match(PLACEHOLDER);
  expect(res.body.created_at).to.match(TIMESTAMP);
  expect(res.body.infrastructure).to.be.a('boolean');
  return res.body;
}

async function allTables(t: TestService): Promise<string[]> {
  if (usingMysql()) {
    const [rows] = (await t.svc.db.raw('SHOW TABLES')) as unknown as [Array<Record<string, string>>];
    return rows.map((r) => Object.values(r)[0]!);
  }
  const rows = (await t.svc.db.raw("SELECT name FROM sqlite_master WHERE type = 'table'")) as Array<{ name: string }>;
  return rows.map((r) => r.name);
}

/** Every column of every row of every table, in JSON. */
async function dumpStore(t: TestService): Promise<string> {
  const parts: string[] = [];
  for (const table of await allTables(t)) parts.push(JSON.stringify(await t.svc.db(table).select('*')));
  return parts.join('\n');
}

describe('secrets: endpoints', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  /**
   * Both levels have the same endpoints and rules. `setup()` gives the collection path and
   * the client: a fresh environment of the main developer, or a fresh developer (the
   * developer-level limit is per developer, so each test needs its own).
   */
  const levels: Array<{ label: string; setup: () => Promise<{ base: string; client: ApiClient }>; scope: (path: string) => string }> = [
    {
      label: 'environment secrets',
      setup: async () => ({ base: `/v1/environments/${(await createEnv(api)).id}/secrets`, client: api }),
      scope: (path) => path.split('/')[3]!,
    },
    {
      label: 'developer secrets',
      setup: async () => ({ base: '/v1/secrets', client: await t.otherDeveloper() }),
      scope: () => '*',
    },
  ];

  for (const level of levels) {
    describe(level.label, () => {
      let base: string;
      let c: ApiClient;
      beforeEach(async () => {
        ({ base, client: c } = await level.setup());
      });

      it('PUT creates (201) with the record, never the value; GET lists it; the store holds it sealed', async () => {
        const value = secretValue();
        const res = await c.put(`${base}/STRIPE_KEY`, { value, allowed_hosts: ['API.Stripe.com', '*.Example.com'] });
        const rec = expectRecord(res, 201, 'STRIPE_KEY');
        expect(rec.allowed_hosts).to.deep.equal(['api.stripe.com', '*.example.com']);
        expect(rec.infrastructure).to.equal(false);
        expect(res.text).not.to.include(value);

        const list = await c.get(base);
        expect(list.status).to.equal(200);
        expect(Object.keys(list.body)).to.deep.equal(['data']);
        expect(list.body.data).to.deep.equal([rec]);
        expect(list.text).not.to.include(value);

        const row = await t.svc.db('secrets').where({ placeholder: rec.placeholder }).first();
        expect(row.scope).to.equal(level.scope(base));
        expect(row.value_enc).to.be.a('string').and.not.include(value);
        const dump = await dumpStore(t);
        expect(dump).not.to.include(value);
        expect(dump).not.to.include(Buffer.from(value).toString('base64'));
        expect(dump).not.to.include(Buffer.from(value).toString('base64url'));
        expect(dump).not.to.include(Buffer.from(value).toString('hex'));
      });

      it('infrastructure: true is kept', async () => {
        const rec = expectRecord(await c.put(`${base}/DB_PASSWORD`, { value: 'pw', allowed_hosts: ['db.internal'], infrastructure: true }), 201, 'DB_PASSWORD');
        expect(rec.infrastructure).to.equal(true);
      });

      it('PUT again replaces (200): same placeholder and created_at, new hosts and flag, new sealed value', async () => {
        const first = expectRecord(await c.put(`${base}/TOKEN`, { value: 'one', allowed_hosts: ['a.com'], infrastructure: true }), 201, 'TOKEN');
        const before = await t.svc.db('secrets').where({ placeholder: first.placeholder }).first();
        await t.advance(5);
        const second = expectRecord(await c.put(`${base}/TOKEN`, { value: 'two', allowed_hosts: ['b.com'] }), 200, 'TOKEN');
        expect(second.placeholder).to.equal(first.placeholder);
        expect(second.created_at).to.equal(first.created_at);
        expect(second.allowed_hosts).to.deep.equal(['b.com']);
        expect(second.infrastructure).to.equal(false, 'PUT is a full replace: infrastructure omitted is false');
        const after = await t.svc.db('secrets').where({ placeholder: first.placeholder }).first();
        expect(after.id).to.equal(before.id);
        expect(after.value_enc).not.to.equal(before.value_enc);
        expect(Number(after.updated_at)).to.be.greaterThan(Number(before.updated_at));
        const list = await c.get(base);
        expect(list.body.data).to.deep.equal([second]);
      });

      it('GET lists by name; values never appear', async () => {
        const values: string[] = [];
        for (const name of ['ZED', 'ALPHA', 'MIDDLE_1', 'MIDDLE_0', 'B']) {
          const v = secretValue();
          values.push(v);
          expect((await c.put(`${base}/${name}`, { value: v, allowed_hosts: ['h.com'] })).status).to.equal(201);
        }
        const list = await c.get(base);
        expect(list.status).to.equal(200);
        expect(list.body.data.map((s: any) => s.name)).to.deep.equal(['ALPHA', 'B', 'MIDDLE_0', 'MIDDLE_1', 'ZED']);
        for (const s of list.body.data) expect(Object.keys(s).sort()).to.deep.equal(RECORD_KEYS);
        for (const v of values) expect(list.text).not.to.include(v);
      });

      it('GET with none is {data: []}', async () => {
        const list = await c.get(base);
        expect(list.status).to.equal(200);
        expect(list.body).to.deep.equal({ data: [] });
      });

      it('DELETE is 204 with no body; a second DELETE and an unknown name are 404', async () => {
        await c.put(`${base}/GONE`, { value: 'v', allowed_hosts: ['a.com'] });
        const del = await c.delete(`${base}/GONE`);
        expect(del.status).to.equal(204);
        expect(del.text).to.equal('');
        expect((await c.get(base)).body.data).to.deep.equal([]);
        expectNotFound(await c.delete(`${base}/GONE`));
        expectNotFound(await c.delete(`${base}/NEVER_THERE`));
      });

      it('a new secret after a delete gets a new placeholder', async () => {
        const a = (await c.put(`${base}/AGAIN`, { value: 'v', allowed_hosts: ['a.com'] })).body;
        await c.delete(`${base}/AGAIN`);
        const b = expectRecord(await c.put(`${base}/AGAIN`, { value: 'v', allowed_hosts: ['a.com'] }), 201, 'AGAIN');
        expect(b.placeholder).not.to.equal(a.placeholder);
      });

      for (const name of ['lower', '1ABC', '_X', 'A-B', 'A'.repeat(65), 'ÄB']) {
        it(`a bad name in the path (${JSON.stringify(name.slice(0, 12))}) is 400 on PUT and DELETE`, async () => {
          expectError(await c.put(`${base}/${encodeURIComponent(name)}`, { value: 'v', allowed_hosts: ['a.com'] }), 400, 'invalid_request');
          expectError(await c.delete(`${base}/${encodeURIComponent(name)}`), 400, 'invalid_request');
        });
      }

      it('a 64-character name is fine', async () => {
        expectRecord(await c.put(`${base}/${'A'.repeat(64)}`, { value: 'v', allowed_hosts: ['a.com'] }), 201, 'A'.repeat(64));
      });

      const badValues: Array<[string, string, unknown]> = [
        ['a reserved name', 'HOME', { value: 'v', allowed_hosts: ['a.com'] }],
        ['a SERVICE_ name', 'SERVICE_X', { value: 'v', allowed_hosts: ['a.com'] }],
        ['a proxy variable name', 'HTTPS_PROXY', { value: 'v', allowed_hosts: ['a.com'] }],
        ['an empty value', 'S', { value: '', allowed_hosts: ['a.com'] }],
        ['a value over 64 KiB', 'S', { value: 'x'.repeat(64 * 1024 + 1), allowed_hosts: ['a.com'] }],
        ['no allowed hosts', 'S', { value: 'v', allowed_hosts: [] }],
        ['a URL as host', 'S', { value: 'v', allowed_hosts: ['https://a.com/x'] }],
        ['a host with port 0', 'S', { value: 'v', allowed_hosts: ['a.com:0'] }],
        ['a host with port 65536', 'S', { value: 'v', allowed_hosts: ['a.com:65536'] }],
        ['a host with an empty port', 'S', { value: 'v', allowed_hosts: ['a.com:'] }],
        ['a wildcard in the middle', 'S', { value: 'v', allowed_hosts: ['a.*.com'] }],
        ['an empty host', 'S', { value: 'v', allowed_hosts: [''] }],
      ];
      for (const [label, name, body] of badValues) {
        it(`rejects ${label} with 400 invalid_request and stores nothing`, async () => {
          expectError(await c.put(`${base}/${name}`, body), 400, 'invalid_request');
          expect((await c.get(base)).body.data).to.deep.equal([]);
        });
      }

      it('accepts a value of exactly 64 KiB', async () => {
        expectRecord(await c.put(`${base}/BIG`, { value: 'x'.repeat(64 * 1024), allowed_hosts: ['a.com'] }), 201, 'BIG');
      });

      const badShapes: Array<[string, unknown]> = [
        ['a missing value', { allowed_hosts: ['a.com'] }],
        ['missing allowed_hosts', { value: 'v' }],
        ['a numeric value', { value: 5, allowed_hosts: ['a.com'] }],
        ['a null value', { value: null, allowed_hosts: ['a.com'] }],
        ['allowed_hosts as a string', { value: 'v', allowed_hosts: 'a.com' }],
        ['a number among the hosts', { value: 'v', allowed_hosts: [1] }],
        ['infrastructure as a string', { value: 'v', allowed_hosts: ['a.com'], infrastructure: 'yes' }],
        ['an unknown field', { value: 'v', allowed_hosts: ['a.com'], name: 'S' }],
        ['an array body', [{ value: 'v', allowed_hosts: ['a.com'] }]],
        ['a string body', 'v'],
      ];
      for (const [label, body] of badShapes) {
        it(`rejects ${label} with 422 invalid_body`, async () => {
          expectError(await c.put(`${base}/S`, body), 422, 'invalid_body');
        });
      }

      it('no body is 415, a body that is not JSON is 400', async () => {
        expectError(await c.request('PUT', `${base}/S`), 415, 'unsupported_media_type');
        const raw = await t.raw('PUT', `${base}/S`, { body: '{"value":', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' } });
        expectError(raw, 400, 'invalid_request');
      });

      it('at most 100: the 101st is 400 invalid_request; replacing at 100 is fine; a delete makes room', async () => {
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => c.put(`${base}/S_${i}`, { value: `v${i}`, allowed_hosts: ['h.com'] })));
        expect(results.map((r) => r.status)).to.deep.equal(Array(100).fill(201));
        const over = await c.put(`${base}/S_100`, { value: 'v', allowed_hosts: ['h.com'] });
        expectError(over, 400, 'invalid_request');
        expect(over.body.message).to.match(/at most 100 secrets/);
        expectRecord(await c.put(`${base}/S_7`, { value: 'new', allowed_hosts: ['h.com'] }), 200, 'S_7');
        expect((await c.get(base)).body.data).to.have.length(100);
        expect((await c.delete(`${base}/S_0`)).status).to.equal(204);
        expectRecord(await c.put(`${base}/S_100`, { value: 'v', allowed_hosts: ['h.com'] }), 201, 'S_100');
        expectError(await c.put(`${base}/S_101`, { value: 'v', allowed_hosts: ['h.com'] }), 400, 'invalid_request');
      });

      it('a concurrent burst of new names never passes 100', async () => {
        await Promise.all(Array.from({ length: 90 }, (_, i) => c.put(`${base}/PRE_${i}`, { value: 'v', allowed_hosts: ['h.com'] })));
        const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => c.put(`${base}/BURST_${i}`, { value: 'v', allowed_hosts: ['h.com'] })));
        const statuses = burst.map((r) => r.status);
        expect(statuses.filter((s) => s === 201)).to.have.length(10);
        expect(statuses.filter((s) => s === 400)).to.have.length(30);
        for (const r of burst.filter((x) => x.status === 400)) expect(r.body.error).to.equal('invalid_request');
        expect((await c.get(base)).body.data).to.have.length(100);
      });

      it('a concurrent burst on one new name creates it once (one 201, the rest 200, one placeholder)', async () => {
        const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => c.put(`${base}/RACE`, { value: `v${i}`, allowed_hosts: ['h.com'] })));
        const statuses = burst.map((r) => r.status).sort();
        expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
        expect(new Set(burst.map((r) => r.body.placeholder)).size).to.equal(1);
        expect((await c.get(base)).body.data).to.have.length(1);
      });

      it('401 without a valid key', async () => {
        const anon = await t.raw('GET', base);
        expectError(anon, 401, 'unauthorized');
        expectError(await t.raw('PUT', `${base}/S`, { body: JSON.stringify({ value: 'v', allowed_hosts: ['a.com'] }), headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
      });

      it('an unsupported method is 404 no such route', async () => {
        const r = await c.post(`${base}/S`, { value: 'v', allowed_hosts: ['a.com'] });
        expectError(r, 404, 'not_found');
        expect(r.body.message).to.equal('no such route');
        expectError(await c.request('PATCH', base, {}), 404, 'not_found');
      });
    });
  }

  describe('environment secrets only', () => {
    it('another developer\'s environment is 404 on GET, PUT and DELETE, and nothing changes', async () => {
      const e = await createEnv(api, { secrets: { MINE: { value: 'v', allowed_hosts: ['a.com'] } } });
      const other = await t.otherDeveloper();
      expectNotFound(await other.get(`/v1/environments/${e.id}/secrets`));
      expectNotFound(await other.put(`/v1/environments/${e.id}/secrets/MINE`, { value: 'stolen', allowed_hosts: ['evil.com'] }));
      expectNotFound(await other.put(`/v1/environments/${e.id}/secrets/NEW`, { value: 'x', allowed_hosts: ['evil.com'] }));
      expectNotFound(await other.delete(`/v1/environments/${e.id}/secrets/MINE`));
      const list = await api.get(`/v1/environments/${e.id}/secrets`);
      expect(list.body.data.map((s: any) => [s.name, s.allowed_hosts])).to.deep.equal([['MINE', ['a.com']]]);
    });

    it('an environment that does not exist is 404', async () => {
      const id = `env_${randomBytes(12).toString('hex')}`;
      expectNotFound(await api.get(`/v1/environments/${id}/secrets`));
      expectNotFound(await api.put(`/v1/environments/${id}/secrets/S`, { value: 'v', allowed_hosts: ['a.com'] }));
      expectNotFound(await api.delete(`/v1/environments/${id}/secrets/S`));
    });

    it('a destroyed environment: PUT and DELETE are 409 environment_destroyed, GET is an empty list', async () => {
      const e = await createEnv(api, { secrets: { OLD: { value: 'v', allowed_hosts: ['a.com'] } } });
      expect((await api.delete(`/v1/environments/${e.id}`)).status).to.equal(200);
      expectError(await api.put(`/v1/environments/${e.id}/secrets/NEW`, { value: 'v', allowed_hosts: ['a.com'] }), 409, 'environment_destroyed');
      expectError(await api.put(`/v1/environments/${e.id}/secrets/OLD`, { value: 'v', allowed_hosts: ['a.com'] }), 409, 'environment_destroyed');
      expectError(await api.delete(`/v1/environments/${e.id}/secrets/OLD`), 409, 'environment_destroyed');
      expectError(await api.delete(`/v1/environments/${e.id}/secrets/NEVER`), 409, 'environment_destroyed');
      const list = await api.get(`/v1/environments/${e.id}/secrets`);
      expect(list.status).to.equal(200);
      expect(list.body).to.deep.equal({ data: [] });
    });

    it('secrets created with the environment are listed, and a PUT replaces them keeping the placeholder', async () => {
      const e = await createEnv(api, { secrets: { FROM_CREATE: { value: 'v', allowed_hosts: ['A.com'] } } });
      const list = await api.get(`/v1/environments/${e.id}/secrets`);
      const [s] = list.body.data;
      expect(s).to.include({ name: 'FROM_CREATE', infrastructure: false });
      expect(s.allowed_hosts).to.deep.equal(['a.com']);
      const r = expectRecord(await api.put(`/v1/environments/${e.id}/secrets/FROM_CREATE`, { value: 'w', allowed_hosts: ['b.com'] }), 200, 'FROM_CREATE');
      expect(r.placeholder).to.equal(s.placeholder);
      expect(r.created_at).to.equal(s.created_at);
    });

    it('a name that is an environment variable of the environment is 400', async () => {
      const e = await createEnv(api, { env: { TOKEN: 'x' } });
      expectError(await api.put(`/v1/environments/${e.id}/secrets/TOKEN`, { value: 'v', allowed_hosts: ['a.com'] }), 400, 'invalid_request');
    });

    it('records secret_set and secret_deleted events with the name only', async () => {
      const e = await createEnv(api);
      const value = secretValue();
      await api.put(`/v1/environments/${e.id}/secrets/EV`, { value, allowed_hosts: ['a.com'] });
      await api.put(`/v1/environments/${e.id}/secrets/EV`, { value, allowed_hosts: ['a.com'] });
      await api.delete(`/v1/environments/${e.id}/secrets/EV`);
      const events = await api.get(`/v1/environments/${e.id}/events`);
      expect(events.text).not.to.include(value);
      const kinds = events.body.data.filter((x: any) => x.kind.startsWith('secret_')).map((x: any) => [x.kind, x.data, x.source]);
      expect(kinds).to.deep.equal([
        ['secret_set', { name: 'EV', replaced: false }, 'api'],
        ['secret_set', { name: 'EV', replaced: true }, 'api'],
        ['secret_deleted', { name: 'EV' }, 'api'],
      ]);
    });

    it('the 100 limit counts each environment on its own, apart from the developer\'s', async () => {
      const dev = await t.otherDeveloper();
      const e1 = await createEnv(dev);
      const e2 = await createEnv(dev);
      const fill = (path: string) => Promise.all(Array.from({ length: 100 }, (_, i) => dev.put(`${path}/S_${i}`, { value: 'v', allowed_hosts: ['h.com'] })));
      await fill(`/v1/environments/${e1.id}/secrets`);
      expectError(await dev.put(`/v1/environments/${e1.id}/secrets/X`, { value: 'v', allowed_hosts: ['h.com'] }), 400, 'invalid_request');
      expectRecord(await dev.put(`/v1/environments/${e2.id}/secrets/X`, { value: 'v', allowed_hosts: ['h.com'] }), 201, 'X');
      await fill('/v1/secrets');
      expectError(await dev.put('/v1/secrets/X', { value: 'v', allowed_hosts: ['h.com'] }), 400, 'invalid_request');
      expectRecord(await dev.put(`/v1/environments/${e2.id}/secrets/Y`, { value: 'v', allowed_hosts: ['h.com'] }), 201, 'Y');
    });
  });

  describe('developer secrets only', () => {
    it('belong to one developer: another developer neither sees nor deletes them', async () => {
      const a = await t.otherDeveloper();
      const b = await t.otherDeveloper();
      const rec = expectRecord(await a.put('/v1/secrets/SHARED_NAME', { value: 'va', allowed_hosts: ['a.com'] }), 201, 'SHARED_NAME');
      expect((await b.get('/v1/secrets')).body).to.deep.equal({ data: [] });
      expectNotFound(await b.delete('/v1/secrets/SHARED_NAME'));
      // The same name is b's own, separate secret.
      const recB = expectRecord(await b.put('/v1/secrets/SHARED_NAME', { value: 'vb', allowed_hosts: ['b.com'] }), 201, 'SHARED_NAME');
      expect(recB.placeholder).not.to.equal(rec.placeholder);
      expect((await a.get('/v1/secrets')).body.data).to.deep.equal([rec]);
    });

    it('are listed apart from environment secrets of the same name', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev);
      const d = expectRecord(await dev.put('/v1/secrets/API_KEY', { value: 'dev', allowed_hosts: ['d.com'] }), 201, 'API_KEY');
      const en = expectRecord(await dev.put(`/v1/environments/${e.id}/secrets/API_KEY`, { value: 'env', allowed_hosts: ['e.com'] }), 201, 'API_KEY');
      expect(en.placeholder).not.to.equal(d.placeholder);
      expect((await dev.get('/v1/secrets')).body.data).to.deep.equal([d]);
      expect((await dev.get(`/v1/environments/${e.id}/secrets`)).body.data).to.deep.equal([en]);
      // Deleting one leaves the other.
      expect((await dev.delete(`/v1/environments/${e.id}/secrets/API_KEY`)).status).to.equal(204);
      expect((await dev.get('/v1/secrets')).body.data).to.deep.equal([d]);
    });

    it('survive the destroy of an environment (only that environment\'s secrets are erased)', async () => {
      const dev = await t.otherDeveloper();
      const e = await createEnv(dev, { secrets: { ENV_ONLY: { value: 'v', allowed_hosts: ['a.com'] } } });
      const d = expectRecord(await dev.put('/v1/secrets/KEEP', { value: 'v', allowed_hosts: ['a.com'] }), 201, 'KEEP');
      await dev.delete(`/v1/environments/${e.id}`);
      expect((await dev.get('/v1/secrets')).body.data).to.deep.equal([d]);
      expect(await t.svc.db('secrets').where({ environment_id: e.id })).to.have.length(0);
    });
  });
});
