/**
 * POST /v1/environments: defaults, every range boundary, shapes (422) vs values (400),
 * configuration, secrets, egress allowlist and templates (service.md: Environment,
 * Create-environment request, Resources, Idle settings, Limits; decisions.md).
 */
import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';
import { ENV_ID, TIMESTAMP, createEnv, expectError, uid } from './environments.fixtures.js';

describe('environments: create', function () {
  let t: TestService;
  let api: ApiClient;

  before(async () => {
    t = await startTestService();
    api = t.api;
  });
  after(async () => {
    await t?.close();
  });

  const post = (body: unknown, headers?: Record<string, string>) => api.post('/v1/environments', body, headers);
  /** A create whose body is `{end_user_id, ...extra}`. */
  const createWith = (extra: Record<string, unknown>) => post({ end_user_id: uid(), ...extra });

  describe('defaults', () => {
    it('fills every default and records a `created` event', async () => {
      const endUser = uid('defaults');
      const res = await post({ end_user_id: endUser });
      expect(res.status, res.text).to.equal(201);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      const e = res.body;
      expect(e.id).to.match(ENV_ID);
      expect(e.end_user_id).to.equal(endUser);
      expect(e.agent_version).to.equal(null);
      expect(e.desired_state).to.equal('running');
      expect(e.state).to.equal('pending');
      expect(e.last_active_at).to.match(TIMESTAMP);
      expect(e.idle).to.deep.equal({ suspend_after_secs: 21600, stop_after_secs: 604800, keep_awake_until: null, next_step: null, next_step_at: null });
      expect(e.resources).to.deep.equal({ cpus: 2, memory_mib: 4096, base_memory_mib: 1024, disk_gib: 10 });
      expect(e.template).to.equal(null);
      expect(e.host_id).to.equal(null);
      expect(e.failure_reason).to.equal(null);
      expect(e.limit_exceeded).to.equal(false);
      expect(e.created_at).to.match(TIMESTAMP);
      expect(e.updated_at).to.match(TIMESTAMP);
      for (const secretish of ['secrets', 'developer_id', 'live_end_user_id', 'agent_settings', 'destroyed_at']) {
        expect(e, secretish).not.to.have.property(secretish);
      }

      const got = await api.get(`/v1/environments/${e.id}`);
      expect(got.status).to.equal(200);
      expect(got.body).to.deep.equal(e);

      const events = await api.get(`/v1/environments/${e.id}/events`);
      expect(events.status).to.equal(200);
      expect(events.body.data).to.have.length(1);
      expect(events.body.data[0]).to.include({ kind: 'created', source: 'api', environment_id: e.id });
      expect(events.body.data[0].id).to.be.a('number');
    });

    it('echoes an agent_version given as a string, and keeps null', async () => {
      expect((await createEnv(api, { agent_version: '1.4.2' })).agent_version).to.equal('1.4.2');
      expect((await createEnv(api, { agent_version: null })).agent_version).to.equal(null);
    });

    it('a 512 MiB ceiling shrinks the default base memory to fit', async () => {
      const e = await createEnv(api, { resources: { memory_mib: 512 } });
      expect(e.resources).to.deep.equal({ cpus: 2, memory_mib: 512, base_memory_mib: 512, disk_gib: 10 });
    });

    it('keeps resources and idle values that were sent, defaulting the rest', async () => {
      const e = await createEnv(api, { resources: { cpus: 4 }, idle: { stop_after_secs: 0 } });
      expect(e.resources).to.deep.equal({ cpus: 4, memory_mib: 4096, base_memory_mib: 1024, disk_gib: 10 });
      expect(e.idle).to.deep.equal({ suspend_after_secs: 21600, stop_after_secs: 0, keep_awake_until: null, next_step: null, next_step_at: null });
    });
  });

  describe('resources ranges', () => {
    const ok: Array<[Record<string, number>, Record<string, number>]> = [
      [{ cpus: 1 }, { cpus: 1 }],
      [{ cpus: 8 }, { cpus: 8 }],
      [{ memory_mib: 16384 }, { memory_mib: 16384 }],
      [{ base_memory_mib: 256 }, { base_memory_mib: 256 }],
      [{ base_memory_mib: 4096 }, { base_memory_mib: 4096 }],
      [{ memory_mib: 2048, base_memory_mib: 2048 }, { memory_mib: 2048, base_memory_mib: 2048 }],
      [{ disk_gib: 1 }, { disk_gib: 1 }],
      [{ disk_gib: 200 }, { disk_gib: 200 }],
    ];
    for (const [input, expected] of ok) {
      it(`accepts ${JSON.stringify(input)}`, async () => {
        const e = await createEnv(api, { resources: input });
        expect(e.resources).to.include(expected);
      });
    }

    const bad: Array<Record<string, unknown>> = [
      { cpus: 0 }, { cpus: 9 }, { cpus: -1 }, { cpus: 1.5 },
      { memory_mib: 511 }, { memory_mib: 16385 },
      { base_memory_mib: 255 }, { base_memory_mib: 4097 },
      { memory_mib: 2048, base_memory_mib: 2049 },
      { memory_mib: 512, base_memory_mib: 1024 },
      { disk_gib: 0 }, { disk_gib: 201 },
    ];
    for (const input of bad) {
      it(`rejects ${JSON.stringify(input)} with 400 invalid_request`, async () => {
        expectError(await createWith({ resources: input }), 400, 'invalid_request');
      });
    }

    const shape: Array<unknown> = [{ cpus: '2' }, { cpus: null }, { cpus: true }, { gpus: 1 }, [], 'big', null, 4];
    for (const input of shape) {
      it(`rejects resources ${JSON.stringify(input)} with 422 invalid_body`, async () => {
        expectError(await createWith({ resources: input }), 422, 'invalid_body');
      });
    }
  });

  describe('idle ranges', () => {
    for (const field of ['suspend_after_secs', 'stop_after_secs']) {
      for (const v of [0, 60, 61, 3600, 7776000]) {
        it(`${field}: ${v} is accepted`, async () => {
          const e = await createEnv(api, { idle: { [field]: v } });
          expect(e.idle[field]).to.equal(v);
        });
      }
      for (const v of [1, 30, 59, 7776001, -1, -60, 60.5]) {
        it(`${field}: ${v} is 400 invalid_request`, async () => {
          expectError(await createWith({ idle: { [field]: v } }), 400, 'invalid_request');
        });
      }
      for (const v of ['60', null, true, {}]) {
        it(`${field}: ${JSON.stringify(v)} is 422 invalid_body`, async () => {
          expectError(await createWith({ idle: { [field]: v } }), 422, 'invalid_body');
        });
      }
    }
    it('rejects unknown idle fields (keep_awake_until is not an input) with 422', async () => {
      expectError(await createWith({ idle: { keep_awake_until: null } }), 422, 'invalid_body');
      expectError(await createWith({ idle: { suspend_after: 60 } }), 422, 'invalid_body');
    });
    it('rejects idle that is not an object with 422', async () => {
      expectError(await createWith({ idle: 60 }), 422, 'invalid_body');
      expectError(await createWith({ idle: null }), 422, 'invalid_body');
    });
  });

  describe('end_user_id, agent_version, unknown fields', () => {
    it('accepts 1 and 200 characters', async () => {
      // 'Q' is used by no other test of this file.
      const r1 = await post({ end_user_id: 'Q' });
      expect(r1.status, r1.text).to.equal(201);
      expect(r1.body.end_user_id).to.equal('Q');
      const long = `${uid('u')}${'x'.repeat(200)}`.slice(0, 200);
      const r2 = await post({ end_user_id: long });
      expect(r2.status, r2.text).to.equal(201);
      expect(r2.body.end_user_id).to.equal(long);
    });
    it('keeps non-ASCII end user ids as sent', async () => {
      const id = `${uid('ü')}-名前`;
      const r = await post({ end_user_id: id });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.end_user_id).to.equal(id);
    });
    it('rejects 0 and 201 characters with 400 invalid_request', async () => {
      expectError(await post({ end_user_id: '' }), 400, 'invalid_request');
      expectError(await post({ end_user_id: 'y'.repeat(201) }), 400, 'invalid_request');
    });
    it('rejects a missing or mistyped end_user_id with 422 invalid_body', async () => {
      expectError(await post({}), 422, 'invalid_body');
      expectError(await post({ end_user_id: 42 }), 422, 'invalid_body');
      expectError(await post({ end_user_id: null }), 422, 'invalid_body');
      expectError(await post({ end_user_id: ['a'] }), 422, 'invalid_body');
    });
    it('rejects a mistyped agent_version with 422', async () => {
      expectError(await createWith({ agent_version: 3 }), 422, 'invalid_body');
      expectError(await createWith({ agent_version: { v: '1' } }), 422, 'invalid_body');
    });
    it('rejects an unknown top-level field with 422', async () => {
      expectError(await createWith({ region: 'eu' }), 422, 'invalid_body');
      expectError(await createWith({ desired_state: 'running' }), 422, 'invalid_body');
      expectError(await createWith({ id: 'env_000000000000000000000000' }), 422, 'invalid_body');
    });
    it('rejects a body that is not an object with 422', async () => {
      expectError(await post([]), 422, 'invalid_body');
      expectError(await post(null), 422, 'invalid_body');
      expectError(await post('end_user_id'), 422, 'invalid_body');
      expectError(await post(7), 422, 'invalid_body');
    });
    it('a shape error wins over a value error in the same body (422)', async () => {
      expectError(await post({ end_user_id: '', resources: { cpus: 'two' } }), 422, 'invalid_body');
    });
  });

  describe('env variables (Limits)', () => {
    const vars = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`VAR_${i}`, `v${i}`]));

    it('accepts 100 variables and stores them as configuration', async () => {
      const e = await createEnv(api, { env: vars(100) });
      const cfg = await api.get(`/v1/environments/${e.id}/config`);
      expect(cfg.status).to.equal(200);
      expect(cfg.body).to.deep.equal({ env: vars(100), files: {} });
    });
    it('rejects 101 variables with 400', async () => {
      expectError(await createWith({ env: vars(101) }), 400, 'invalid_request');
    });
    it('accepts 32 KiB in total (names plus values) and rejects one byte more', async () => {
      // Decision (docs/api.md): the 32 KiB counts name and value bytes of every variable.
      const fits = { BIG: 'a'.repeat(32 * 1024 - 3) };
      const e = await createEnv(api, { env: fits });
      expect((await api.get(`/v1/environments/${e.id}/config`)).body.env).to.deep.equal(fits);
      expectError(await createWith({ env: { BIG: 'a'.repeat(32 * 1024 - 2) } }), 400, 'invalid_request');
      expectError(await createWith({ env: { A: 'a'.repeat(20 * 1024), B: 'b'.repeat(13 * 1024) } }), 400, 'invalid_request');
    });
    it('accepts names of letters, digits and underscores, and empty or Unicode values', async () => {
      const env = { a: '', Z_9: 'x', _LEADING: 'y', MiXeD_1: 'héllo ✓ "double" `tick` $dollar \\ back' };
      const e = await createEnv(api, { env });
      expect((await api.get(`/v1/environments/${e.id}/config`)).body.env).to.deep.equal(env);
    });
    for (const name of ['A-B', 'A B', 'A.B', '', 'É', 'A=B', 'PATH/X', 'A$']) {
      it(`rejects the name ${JSON.stringify(name)} with 400`, async () => {
        expectError(await createWith({ env: { [name]: 'v' } }), 400, 'invalid_request');
      });
    }
    for (const name of ['HOME', 'USER', 'LOGNAME', 'SERVICE_', 'SERVICE_TOKEN', 'HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'NO_PROXY',
      'SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE']) {
      it(`rejects the reserved name ${name} with 400`, async () => {
        expectError(await createWith({ env: { [name]: 'v' } }), 400, 'invalid_request');
      });
    }
    for (const [label, value] of [['single quote', "it's"], ['newline', 'a\nb'], ['carriage return', 'a\rb'], ['tab', 'a\tb'],
      ['NUL', 'a\u0000b'], ['ESC', '\u001b[0m'], ['DEL', 'a\u007fb']] as const) {
      it(`rejects a value with a ${label} with 400`, async () => {
        expectError(await createWith({ env: { GOOD_NAME: value } }), 400, 'invalid_request');
      });
    }
    it('rejects non-string values and a non-object env with 422', async () => {
      expectError(await createWith({ env: { N: 1 } }), 422, 'invalid_body');
      expectError(await createWith({ env: { N: null } }), 422, 'invalid_body');
      expectError(await createWith({ env: { N: ['a'] } }), 422, 'invalid_body');
      expectError(await createWith({ env: ['A=1'] }), 422, 'invalid_body');
      expectError(await createWith({ env: 'A=1' }), 422, 'invalid_body');
    });
  });

  describe('config files (Limits)', () => {
    const files = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}.txt`, `content ${i}`]));

    it('accepts 20 files in string form, stored as {content, encoding: utf8}', async () => {
      const e = await createEnv(api, { files: files(20) });
      const cfg = await api.get(`/v1/environments/${e.id}/config`);
      expect(cfg.body.env).to.deep.equal({});
      expect(Object.keys(cfg.body.files)).to.have.length(20);
      expect(cfg.body.files['f3.txt']).to.deep.equal({ content: 'content 3', encoding: 'utf8' });
    });
    it('rejects 21 files with 400', async () => {
      expectError(await createWith({ files: files(21) }), 400, 'invalid_request');
    });
    it('accepts the object form with utf8 and base64 encodings', async () => {
      const f = {
        'a.json': { content: '{"x":1}' },
        'b.bin': { content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' },
        'c.txt': { content: 'plain', encoding: 'utf8' },
        'empty': '',
      };
      const e = await createEnv(api, { files: f });
      const cfg = await api.get(`/v1/environments/${e.id}/config`);
      expect(cfg.body.files).to.deep.equal({
        'a.json': { content: '{"x":1}', encoding: 'utf8' },
        'b.bin': { content: 'AAEC/w==', encoding: 'base64' },
        'c.txt': { content: 'plain', encoding: 'utf8' },
        'empty': { content: '', encoding: 'utf8' },
      });
    });
    it('accepts exactly 256 KiB decoded in total, counting base64 decoded, and rejects one byte more', async () => {
      const half = 128 * 1024;
      // base64 text is longer than 256 KiB here, but only the decoded size counts.
      const b64 = Buffer.alloc(half, 7).toString('base64');
      const r = await createWith({ files: { 'a.bin': { content: b64, encoding: 'base64' }, 'b.txt': 'x'.repeat(half) } });
      expect(r.status, r.text.slice(0, 300)).to.equal(201);
      expectError(await createWith({ files: { 'a.bin': { content: b64, encoding: 'base64' }, 'b.txt': 'x'.repeat(half + 1) } }), 400, 'invalid_request');
      const allB64 = Buffer.alloc(256 * 1024 + 1, 1).toString('base64');
      expectError(await createWith({ files: { 'big.bin': { content: allB64, encoding: 'base64' } } }), 400, 'invalid_request');
    });
    it('counts UTF-8 bytes, not characters', async () => {
      // 'é' is 2 bytes: 131073 characters of it are 262146 bytes.
      expectError(await createWith({ files: { 'a.txt': 'é'.repeat(128 * 1024 + 1) } }), 400, 'invalid_request');
    });
    for (const name of ['a/b', '../x', '/etc/passwd', '.', '..', '', 'with space', 'dir\\file', 'naïve.txt', 'a:b']) {
      it(`rejects the file name ${JSON.stringify(name)} with 400`, async () => {
        expectError(await createWith({ files: { [name]: 'x' } }), 400, 'invalid_request');
      });
    }
    it('accepts names of letters, digits, ".", "_" and "-"', async () => {
      await createEnv(api, { files: { '.env': 'x', 'a_b-c.1.conf': 'y', 'UPPER': 'z' } });
    });
    it('rejects invalid base64 with 400', async () => {
      expectError(await createWith({ files: { 'a.bin': { content: 'not base64!', encoding: 'base64' } } }), 400, 'invalid_request');
    });
    it('rejects wrong shapes with 422', async () => {
      expectError(await createWith({ files: { 'a.txt': 5 } }), 422, 'invalid_body');
      expectError(await createWith({ files: { 'a.txt': null } }), 422, 'invalid_body');
      expectError(await createWith({ files: { 'a.txt': {} } }), 422, 'invalid_body');
      expectError(await createWith({ files: { 'a.txt': { content: 'x', encoding: 'hex' } } }), 422, 'invalid_body');
      expectError(await createWith({ files: { 'a.txt': { content: 'x', mode: '0600' } } }), 422, 'invalid_body');
      expectError(await createWith({ files: { 'a.txt': { content: 1 } } }), 422, 'invalid_body');
      expectError(await createWith({ files: ['a.txt'] }), 422, 'invalid_body');
    });
  });

  describe('secrets', () => {
    const value = `sv-${uid('plain')}-DO-NOT-LEAK`;

    it('creates secrets with the environment, never returns or stores the value in clear', async () => {
      const res = await createWith({ secrets: { STRIPE_KEY: { value, allowed_hosts: ['api.stripe.com'] }, OTHER: { value: `${value}-2`, allowed_hosts: ['*.example.com'], infrastructure: true } } });
      expect(res.status, res.text).to.equal(201);
      expect(res.text).not.to.include(value);
      const id = res.body.id;
      for (const p of [`/v1/environments/${id}`, `/v1/environments/${id}/config`, `/v1/environments/${id}/events`, '/v1/environments?limit=200']) {
        const r = await api.get(p);
        expect(r.status).to.equal(200);
        expect(r.text, p).not.to.include(value);
      }
      const rows = await t.svc.db('secrets').where({ environment_id: id });
      expect(rows.map((r: any) => r.name).sort()).to.deep.equal(['OTHER', 'STRIPE_KEY']);
      for (const r of rows) {
        expect(r.scope).to.equal(id);
        expect(r.placeholder).to.match(/^svcph_[0-9a-f]+$/);
        expect(r.value_enc).to.be.a('string').and.not.equal('');
      }
      // A scan of every column of every row of the tables that could hold it.
      for (const table of ['secrets', 'environments', 'environment_events', 'environment_configs', 'idempotency_keys']) {
        const all = await t.svc.db(table).select('*');
        const dump = JSON.stringify(all);
        expect(dump, table).not.to.include(value);
        expect(dump, table).not.to.include(Buffer.from(value).toString('base64'));
        expect(dump, table).not.to.include(Buffer.from(value).toString('hex'));
      }
    });
    it('accepts 100 secrets and rejects 101 with 400', async () => {
      const mk = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`S_${i}`, { value: `v${i}`, allowed_hosts: ['h.example.com'] }]));
      const e = await createEnv(api, { secrets: mk(100) });
      expect(Number((await t.svc.db('secrets').where({ environment_id: e.id }).count({ n: '*' }).first())?.n)).to.equal(100);
      expectError(await createWith({ secrets: mk(101) }), 400, 'invalid_request');
    });
    const badValues: Array<[string, Record<string, unknown>]> = [
      ['a lowercase name', { lower: { value: 'v', allowed_hosts: ['a.com'] } }],
      ['a name starting with a digit', { '1ABC': { value: 'v', allowed_hosts: ['a.com'] } }],
      ['a reserved name', { HOME: { value: 'v', allowed_hosts: ['a.com'] } }],
      ['a SERVICE_ name', { SERVICE_X: { value: 'v', allowed_hosts: ['a.com'] } }],
      ['an empty value', { S: { value: '', allowed_hosts: ['a.com'] } }],
      ['no allowed hosts', { S: { value: 'v', allowed_hosts: [] } }],
      ['a bad host pattern', { S: { value: 'v', allowed_hosts: ['https://a.com/x'] } }],
    ];
    for (const [label, secrets] of badValues) {
      it(`rejects ${label} with 400`, async () => {
        expectError(await createWith({ secrets }), 400, 'invalid_request');
      });
    }
    it('rejects a secret that shares its name with an env variable with 400', async () => {
      expectError(await createWith({ env: { TOKEN: 'x' }, secrets: { TOKEN: { value: 'v', allowed_hosts: ['a.com'] } } }), 400, 'invalid_request');
    });
    const badShapes: Array<[string, unknown]> = [
      ['a missing value', { S: { allowed_hosts: ['a.com'] } }],
      ['missing allowed_hosts', { S: { value: 'v' } }],
      ['a numeric value', { S: { value: 5, allowed_hosts: ['a.com'] } }],
      ['allowed_hosts as a string', { S: { value: 'v', allowed_hosts: 'a.com' } }],
      ['infrastructure as a string', { S: { value: 'v', allowed_hosts: ['a.com'], infrastructure: 'yes' } }],
      ['an unknown field', { S: { value: 'v', allowed_hosts: ['a.com'], ttl: 5 } }],
      ['a string instead of an object', { S: 'v' }],
      ['an array', [{ value: 'v', allowed_hosts: ['a.com'] }]],
    ];
    for (const [label, secrets] of badShapes) {
      it(`rejects ${label} with 422`, async () => {
        expectError(await createWith({ secrets }), 422, 'invalid_body');
      });
    }
    it('stores no secret when the environment is not created (same transaction)', async () => {
      const endUser = uid('txn');
      await createEnv(api, { end_user_id: endUser });
      const before = Number((await t.svc.db('secrets').count({ n: '*' }).first())?.n);
      const res = await post({ end_user_id: endUser, secrets: { LOST: { value: 'lost-value', allowed_hosts: ['a.com'] } } });
      expect(res.status).to.equal(409);
      expect(Number((await t.svc.db('secrets').count({ n: '*' }).first())?.n)).to.equal(before);
    });
  });

  describe('egress_allow', () => {
    it('accepts host names, *.domain, * and IP literals', async () => {
      await createEnv(api, { egress_allow: ['*'] });
      await createEnv(api, { egress_allow: ['api.example.com', '*.example.com', 'localhost', '10.0.0.1', 'API.Example.COM'] });
      await createEnv(api, { egress_allow: [] });
    });
    for (const p of ['', 'http://a.com', 'a.com/path', 'a.com:443', 'exa mple.com', '*.*.com', 'foo.*', '*a.com', 'a..com', '-a.com', 'a_b.com']) {
      it(`rejects the pattern ${JSON.stringify(p)} with 400`, async () => {
        expectError(await createWith({ egress_allow: [p] }), 400, 'invalid_request');
      });
    }
    it('rejects wrong shapes with 422', async () => {
      expectError(await createWith({ egress_allow: 'a.com' }), 422, 'invalid_body');
      expectError(await createWith({ egress_allow: [1] }), 422, 'invalid_body');
      expectError(await createWith({ egress_allow: [null] }), 422, 'invalid_body');
      expectError(await createWith({ egress_allow: null }), 422, 'invalid_body');
    });
  });

  describe('template', () => {
    const name = 'base-image';
    before(async () => {
      const building = await api.post('/v1/templates', { name, version: '1.0' });
      expect(building.status, building.text).to.equal(201);
      expect(building.body.status).to.equal('building');
      const ready = await api.post('/v1/templates', { name, version: '2.0' });
      expect(ready.status, ready.text).to.equal(201);
      const marked = await api.post(`/v1/templates/${ready.body.id}/ready`);
      expect(marked.status, marked.text).to.equal(200);
      expect(marked.body.status).to.equal('ready');
    });

    it('a ready version is accepted and echoed as name:version', async () => {
      const e = await createEnv(api, { template: `${name}:2.0` });
      expect(e.template).to.equal(`${name}:2.0`);
      expect((await api.get(`/v1/environments/${e.id}`)).body.template).to.equal(`${name}:2.0`);
    });
    it('null and omitted mean the platform default (template null)', async () => {
      expect((await createEnv(api, { template: null })).template).to.equal(null);
      expect((await createEnv(api)).template).to.equal(null);
    });
    it('a version still building is 409 template_not_ready, and nothing is created', async () => {
      const endUser = uid('tpl');
      expectError(await post({ end_user_id: endUser, template: `${name}:1.0` }), 409, 'template_not_ready');
      // The end user has no environment: a plain create succeeds.
      await createEnv(api, { end_user_id: endUser });
    });
    it('a nonexistent version or template is 400 invalid_request', async () => {
      expectError(await createWith({ template: `${name}:9.9` }), 400, 'invalid_request');
      expectError(await createWith({ template: 'nope:1.0' }), 400, 'invalid_request');
    });
    it("another developer's ready template does not exist for this developer (400)", async () => {
      const other = await t.otherDeveloper();
      const tpl = await other.post('/v1/templates', { name: 'private', version: '1' });
      await other.post(`/v1/templates/${tpl.body.id}/ready`);
      const mine = await other.post('/v1/environments', { end_user_id: uid(), template: 'private:1' });
      expect(mine.status, mine.text).to.equal(201);
      expectError(await createWith({ template: 'private:1' }), 400, 'invalid_request');
    });
    for (const bad of ['nocolon', ':1.0', 'base:', 'a:b:c', 'Base:1', 'base :1', '']) {
      it(`a malformed reference ${JSON.stringify(bad)} is 400 invalid_request`, async () => {
        expectError(await createWith({ template: bad }), 400, 'invalid_request');
      });
    }
    it('a non-string template is 422', async () => {
      expectError(await createWith({ template: 5 }), 422, 'invalid_body');
      expectError(await createWith({ template: { name, version: '2.0' } }), 422, 'invalid_body');
    });
  });

  describe('conventions', () => {
    const body = () => JSON.stringify({ end_user_id: uid() });
    const auth = () => ({ authorization: `Bearer ${api.key}` });

    it('415 unsupported_media_type without a JSON Content-Type', async () => {
      expectError(await t.raw('POST', '/v1/environments', { body: body(), headers: auth() }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', '/v1/environments', { body: body(), headers: { ...auth(), 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
      expectError(await t.raw('POST', '/v1/environments', { body: body(), headers: { ...auth(), 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported_media_type');
    });
    it('415 with no body at all', async () => {
      expectError(await t.raw('POST', '/v1/environments', { headers: auth() }), 415, 'unsupported_media_type');
    });
    it('accepts application/json with a charset', async () => {
      const r = await t.raw('POST', '/v1/environments', { body: body(), headers: { ...auth(), 'content-type': 'application/json; charset=utf-8' } });
      expect(r.status, r.text).to.equal(201);
    });
    it('400 invalid_request for malformed JSON or an empty JSON body', async () => {
      const h = { ...auth(), 'content-type': 'application/json' };
      expectError(await t.raw('POST', '/v1/environments', { body: '{"end_user_id": "a",', headers: h }), 400, 'invalid_request');
      expectError(await t.raw('POST', '/v1/environments', { body: "{'end_user_id': 'a'}", headers: h }), 400, 'invalid_request');
      expectError(await t.raw('POST', '/v1/environments', { body: '', headers: h }), 400, 'invalid_request');
    });
    it('401 unauthorized without a valid key, before anything else', async () => {
      expectError(await t.raw('POST', '/v1/environments', { body: body(), headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
      expectError(await t.raw('GET', '/v1/environments', { headers: { authorization: 'Bearer sk_0000000000000000000000000000000000000000' } }), 401, 'unauthorized');
    });
  });
});
