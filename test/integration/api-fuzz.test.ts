import { expect } from 'chai';
import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { startTestService, type TestService } from '../helpers/service.js';

/**
 * The API's own fuzz test (issue 10, item 1 and 2). Routes come from the router itself
 * (RunningService.routes, read from the Express stacks), so a route added later is fuzzed
 * without anyone remembering to add it here.
 */

interface Raw {
  status: number;
  contentType: string;
  body: any;
  text: string;
}

/** A request with the path sent byte for byte (fetch would normalise `../` and `%`). */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Raw> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path, headers: { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: parsed, text });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const BAD_PARAMS: Array<[string, string]> = [
  ['a lone %', '%'],
  ['%ZZ', '%ZZ'],
  ['%FF (not UTF-8)', '%FF'],
  ['%00', '%00'],
  ['../', '../'],
  ['a 5,000-character id', 'x'.repeat(5000)],
  ['a unicode id', encodeURIComponent('環境-ñ-🔑')],
];

function substitute(path: string, value: string): string[] {
  const params = path.match(/:[A-Za-z_]+/g) ?? [];
  // Each parameter in turn, the others left as a plausible id.
  return params.map((p) => path.replace(/:[A-Za-z_]+/g, (m) => (m === p ? value : m === ':name' ? 'FUZZ_SECRET' : 'env_000000000000000000000000')));
}

/** Routes that answer HTML by contract (service.md, Viewer rules: a 404 HTML page), not JSON. */
const HTML_ROUTES = /^(GET )?\/v1\/browser\/view\//;

function expectClientError(r: Raw, what: string): void {
  expect(r.status, `${what}: ${r.text.slice(0, 200)}`).to.be.below(500);
  if (r.status >= 400 && HTML_ROUTES.test(what) && /^text\/html/.test(r.contentType ?? '')) {
    expect(r.status, what).to.equal(404);
    return;
  }
  if (r.status >= 400) {
    expect(r.contentType, what).to.match(/^application\/json/);
    expect(r.body, what).to.be.an('object');
    expect(r.body.error, what).to.be.a('string').and.not.empty;
    expect(r.body.message, what).to.be.a('string').and.not.empty;
  }
}

describe('API fuzz: every route of the router (issue 10)', () => {
  let t: TestService;
  let auth: Record<string, string>;
  before(async () => {
    t = await startTestService();
    auth = { authorization: `Bearer ${t.api.key}` };
  });
  after(async () => {
    await t.close();
  });

  it('enumerates the routes from the router (a route added later is fuzzed too)', () => {
    const routes = t.svc.routes.map((r) => `${r.method} ${r.path}`);
    expect(routes.length).to.be.above(40);
    for (const known of ['GET /v1/environments/:id', 'PUT /v1/environments/:id/secrets/:name', 'POST /v1/approvals/:id/decision', 'POST /v1/environments/:id/suspend']) {
      expect(routes).to.include(known);
    }
  });

  it('the issue\'s examples answer 400 invalid_request, not 500', async () => {
    for (const [method, path] of [
      ['GET', '/v1/environments/%ZZ'],
      ['GET', '/v1/environments/%/policy'],
      ['PUT', '/v1/environments/%FF/secrets/X'],
      ['GET', '/v1/environments/%'],
      ['GET', '/v1/nothing/%'],
      ['GET', '/v1/environments?limit=%ZZ'],
      ['GET', '/v1/audit-log?environment_id=%E0%A4%A'],
    ] as const) {
      const r = await raw(t.url, method, path, { ...auth, 'content-type': 'application/json' }, method === 'PUT' ? '{"value":"v"}' : undefined);
      expect(r.status, `${method} ${path}`).to.equal(400);
      expect(r.body, `${method} ${path}`).to.deep.equal({ error: 'invalid_request', message: r.body.message });
    }
  });

  it('every path parameter of every route, replaced by %, %ZZ, %FF, %00, ../, 5,000 characters and unicode: no 5xx, a JSON {error, message}', async function () {
    this.timeout(60_000);
    let sent = 0;
    for (const route of t.svc.routes) {
      for (const [name, value] of BAD_PARAMS) {
        for (const path of substitute(route.path, value)) {
          const body = route.bodiless ? undefined : '{}';
          const headers = { ...auth, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) };
          expectClientError(await raw(t.url, route.method, path, headers, body), `${route.method} ${route.path} with ${name}`);
          // Without the key too: whatever the order of checks, never a 5xx.
          expectClientError(await raw(t.url, route.method, path, {}, body), `${route.method} ${route.path} with ${name}, no key`);
          sent += 2;
        }
      }
    }
    expect(sent).to.be.above(100);
    const after = await raw(t.url, 'GET', '/v1/environments', auth);
    expect(after.status).to.equal(200);
  });

  it('every GET route with an undecodable query: 400, and a 5,000-character query value: no 5xx', async () => {
    for (const route of t.svc.routes.filter((r) => r.method === 'GET')) {
      const path = route.path.replace(/:[A-Za-z_]+/g, 'env_000000000000000000000000');
      const r = await raw(t.url, 'GET', `${path}?limit=%ZZ`, auth);
      expect(r.status, route.path).to.equal(400);
      expect(r.body.error, route.path).to.equal('invalid_request');
      expectClientError(await raw(t.url, 'GET', `${path}?after=${'y'.repeat(5000)}&limit=${'9'.repeat(300)}`, auth), `${route.path} long query`);
    }
  });

  it('every route that takes a body, sent random and hostile JSON: no 5xx, a JSON {error, message}', async function () {
    this.timeout(60_000);
    const env = await t.api.post('/v1/environments', { end_user_id: 'fuzz-json' });
    const hostile = [
      'null', '0', '-1e309', '"x"', '[]', '{}', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}',
      `${'['.repeat(50_000)}${']'.repeat(50_000)}`, `{"end_user_id":"${'u'.repeat(100_000)}"}`, '{"end_user_id":"\u0000"}',
      '{"end_user_id":"a","end_user_id":"b"}', '{"a":1e400}', '{"limit":9007199254740993}', '\ufeff{}', '{"value":"\ud800"}',
    ];
    for (const route of t.svc.routes.filter((r) => !r.bodiless && !r.public)) {
      const path = route.path.replace(/:id/, env.body.id).replace(/:name/, 'FUZZ_SECRET').replace(/:[A-Za-z_]+/g, 'FUZZ');
      const bodies = [...hostile, ...fc.sample(fc.jsonValue({ maxDepth: 4 }), { numRuns: 15, seed: 10 }).map((v) => JSON.stringify(v))];
      for (const body of bodies) {
        const r = await raw(t.url, route.method, path, { ...auth, 'content-type': 'application/json' }, body);
        expectClientError(r, `${route.method} ${route.path} with ${body.slice(0, 60)}`);
      }
    }
    expect((await raw(t.url, 'GET', '/v1/environments', auth)).status).to.equal(200);
  });

  it('hostile headers on every route: no 5xx', async () => {
    const weird: Array<Record<string, string>> = [
      { 'idempotency-key': 'k'.repeat(5000) },
      { 'idempotency-key': '\u00ff' },
      { 'content-type': 'application/json; charset=utf-16' },
      { 'content-type': 'application/json;;;' },
      { accept: 'text/html' },
      { 'content-encoding': 'gzip' },
    ];
    for (const route of t.svc.routes) {
      const path = route.path.replace(/:[A-Za-z_]+/g, 'env_000000000000000000000000');
      for (const h of weird) {
        const body = route.bodiless ? undefined : '{}';
        expectClientError(await raw(t.url, route.method, path, { ...auth, 'content-type': 'application/json', ...h }, body), `${route.method} ${route.path} ${JSON.stringify(h)}`);
      }
    }
  });

  it('requests Node\'s own parser refuses (unknown method, bad request line, bad header, huge headers): 400 with the JSON error body', async () => {
    const { connect } = await import('node:net');
    const u = new URL(t.url);
    const exchange = (text: string) => new Promise<string>((resolve) => {
      const socket = connect(Number(u.port), u.hostname, () => socket.end(text));
      let got = '';
      socket.on('data', (d) => (got += d));
      socket.on('close', () => resolve(got));
      socket.on('error', () => resolve(got));
    });
    for (const text of [
      'FOO /v1/environments HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET /v1/environments HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /v1/environments HTTP/1.1\r\nBad Header: x\r\n\r\n',
      `GET /v1/environments HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`,
      'GARBAGE\r\n\r\n',
    ]) {
      const answer = await exchange(text);
      expect(answer, text.slice(0, 40)).to.match(/^HTTP\/1\.1 400 /);
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: string; message: string };
      expect(body.error).to.equal('invalid_request');
      expect(body.message).to.be.a('string').and.not.empty;
    }
    expect((await raw(t.url, 'GET', '/v1/environments', auth)).status).to.equal(200);
  });

  describe('bodiless operations (issue 10, item 2)', () => {
    it('an empty body with Content-Type: application/json is no body: same answer as without the header', async () => {
      const bodiless = t.svc.routes.filter((r) => r.bodiless && !r.public);
      expect(bodiless.map((r) => `${r.method} ${r.path}`)).to.include.members([
        'POST /v1/environments/:id/suspend', 'POST /v1/environments/:id/resume', 'POST /v1/environments/:id/wake', 'POST /v1/webhook-endpoint/rotate',
        'GET /v1/environments', 'DELETE /v1/environments/:id',
      ]);
      const env = await t.api.post('/v1/environments', { end_user_id: 'fuzz-bodiless' });
      expect(env.status).to.equal(201);
      for (const route of bodiless) {
        if (route.method === 'DELETE') continue; // the effect would differ between the two calls
        const path = route.path.replace(/:id/, env.body.id).replace(/:[A-Za-z_]+/g, 'FUZZ');
        const withType = await raw(t.url, route.method, path, { ...auth, 'content-type': 'application/json' }, '');
        const without = await raw(t.url, route.method, path, auth, '');
        expect(withType.status, `${route.method} ${path}: ${withType.text}`).to.equal(without.status);
        expect(withType.body?.error, `${route.method} ${path}`).to.equal(without.body?.error);
      }
    });

    it('POST .../suspend with the JSON header and no body suspends', async () => {
      const env = await t.api.post('/v1/environments', { end_user_id: 'fuzz-suspend' });
      const r = await raw(t.url, 'POST', `/v1/environments/${env.body.id}/suspend`, { ...auth, 'content-type': 'application/json' }, '');
      expect(r.status, r.text).to.equal(200);
      expect(r.body.desired_state).to.equal('suspended');
    });

    it('a non-empty body sent to an operation that takes none: 400 invalid_request saying so, and nothing done', async () => {
      const env = await t.api.post('/v1/environments', { end_user_id: 'fuzz-nobody' });
      for (const route of t.svc.routes.filter((r) => r.bodiless && !r.public)) {
        const path = route.path.replace(/:id/, env.body.id).replace(/:[A-Za-z_]+/g, 'FUZZ');
        for (const [type, body] of [['application/json', '{"x":1}'], ['text/plain', 'hello'], ['application/json', '{not json']] as const) {
          const r = await raw(t.url, route.method, path, { ...auth, 'content-type': type }, body);
          expect(r.status, `${route.method} ${path} ${type}`).to.equal(400);
          expect(r.body.error).to.equal('invalid_request');
          expect(r.body.message).to.match(/takes no body/);
        }
      }
      const still = await t.api.get(`/v1/environments/${env.body.id}`);
      expect(still.status).to.equal(200);
      expect(still.body.desired_state).to.not.equal('destroyed');
    });

    it('every other POST, PUT and PATCH reads its body: JSON that does not parse is 400 invalid_request', async () => {
      const env = await t.api.post('/v1/environments', { end_user_id: 'fuzz-body' });
      for (const route of t.svc.routes.filter((r) => !r.bodiless && !r.public)) {
        const path = route.path.replace(/:id/, env.body.id).replace(/:name/, 'FUZZ_SECRET').replace(/:[A-Za-z_]+/g, 'FUZZ');
        const r = await raw(t.url, route.method, path, { ...auth, 'content-type': 'application/json' }, '{"end_user_id":');
        expect(r.status, `${route.method} ${path}: ${r.text}`).to.equal(400);
        expect(r.body.error).to.equal('invalid_request');
        // And an empty body sent as JSON is still 400 where a body is needed.
        const empty = await raw(t.url, route.method, path, { ...auth, 'content-type': 'application/json' }, '');
        expect(empty.status, `${route.method} ${path} empty: ${empty.text}`).to.equal(400);
        expect(empty.body.message).to.match(/empty/);
      }
    });
  });
});
