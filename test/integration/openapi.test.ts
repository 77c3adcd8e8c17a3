import { expect } from 'chai';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestService, type TestService } from '../helpers/service.js';
import Joi from 'joi';
import { openApiPath } from '../../api/openapi/document.js';
import { joiToJsonSchema, SchemaComponents } from '../../api/openapi/joi-to-json-schema.js';
import { ERROR_CODES } from '../../lib/errors.js';

/**
 * GET /v1/openapi.json (issue 25, item 3): generated at start from the routes the router
 * serves. Routes come from the router itself (RunningService.routes, as the fuzz test
 * reads them), so a route added without an annotation fails here.
 */
describe('OpenAPI document (issue 25, item 3)', () => {
  let t: TestService;
  let doc: any;
  before(async () => {
    t = await startTestService({ BASE_URL: 'https://gateway.example.test' });
    const r = await t.raw('GET', '/v1/openapi.json');
    expect(r.status, r.text.slice(0, 300)).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^application\/json/);
    doc = r.body;
  });
  after(async () => {
    await t.close();
  });

  it('is served without a key, and is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).to.match(/^3\.1\./);
    const out = await new Validator().validate(doc);
    expect(out.errors ?? [], JSON.stringify(out.errors, null, 1)?.slice(0, 3000)).to.deep.equal([]);
    expect(out.valid).to.equal(true);
  });

  it('the validator refuses a broken document (so the check above can fail)', async () => {
    const broken = structuredClone(doc);
    delete broken.info;
    broken.paths['/v1/environments'].get.responses = 'none';
    expect((await new Validator().validate(broken)).valid).to.equal(false);
  });

  it('names the service\'s BASE_URL as its server and Bearer keys as its security', () => {
    expect(doc.servers).to.deep.equal([{ url: 'https://gateway.example.test' }]);
    expect(doc.components.securitySchemes.apiKey).to.include({ type: 'http', scheme: 'bearer' });
    expect(doc.security).to.deep.equal([{ apiKey: [] }]);
  });

  it('holds every route the router serves, each annotated (describeRoute), with its path parameters', () => {
    const routes = t.svc.routes;
    expect(routes.length).to.be.above(90);
    const undocumented = routes.filter((r) => !r.spec).map((r) => `${r.method} ${r.path}`);
    expect(undocumented, 'routes without a describeRoute annotation').to.deep.equal([]);
    for (const r of routes) {
      const op = doc.paths[openApiPath(r.path)]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.path} is missing from the document`).to.be.an('object');
      expect(op['x-undocumented'], `${r.method} ${r.path}`).to.equal(undefined);
      const params = (r.path.match(/:[A-Za-z_]+/g) ?? []).map((p) => p.slice(1));
      const inPath = (op.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
      expect(inPath, `${r.method} ${r.path}`).to.have.members(params);
    }
    // And nothing the router does not serve but the WebSocket endpoints, which the server's
    // upgrade handler serves (the console is not part of the document).
    const served = new Set(routes.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.path)}`));
    const websockets: string[] = [];
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        if (op['x-websocket']) websockets.push(`${method} ${path}`);
        else expect(served.has(`${method} ${path}`), `${method} ${path}`).to.equal(true);
      }
    }
    expect(websockets).to.have.members(['get /v1/browser/leases/{id}/cdp', 'get /v1/browser/view/{token}/ws']);
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/console'))).to.equal(false);
  });

  it('includes the public routes, the root routes and the test clock', () => {
    for (const [method, path] of [
      ['get', '/v1/openapi.json'], ['post', '/v1/approvals/{id}/decision'], ['get', '/v1/oauth/{provider}/callback'], ['get', '/v1/browser/view/{token}'],
      ['post', '/v1/test-clock/advance'], ['get', '/v1/environments'], ['post', '/v1/environments/{id}/exec'],
    ] as const) {
      expect(doc.paths[path]?.[method], `${method} ${path}`).to.be.an('object');
    }
    for (const r of t.svc.routes.filter((x) => !x.path.startsWith('/v1/'))) {
      expect(doc.paths[r.path]?.[r.method.toLowerCase()], `${r.method} ${r.path}`).to.be.an('object');
    }
    expect(doc.paths['/v1/openapi.json'].get.security).to.deep.equal([]);
    expect(doc.paths['/v1/approvals/{id}/decision'].post.security).to.deep.equal([{ apiKey: [] }, { signature: [] }]);
    expect(doc.paths['/v1/environments'].get.security).to.equal(undefined); // the default: the key
  });

  it('gives request bodies from the routes\' joi schemas, and records from api/schemas/records.ts', () => {
    const create = doc.paths['/v1/environments'].post;
    const body = create.requestBody.content['application/json'].schema;
    expect(body.required).to.deep.equal(['end_user_id']);
    expect(body.properties.end_user_id).to.deep.equal({ type: 'string', minLength: 1, maxLength: 200 });
    expect(body.properties.resources.properties.cpus).to.deep.equal({ type: 'integer', minimum: 1, maximum: 8 });
    expect(body.additionalProperties).to.equal(false);
    expect(create.responses['201'].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Environment' });
    expect(create.parameters.find((p: any) => p.name === 'Idempotency-Key')).to.include({ in: 'header', required: false });
    for (const name of ['Environment', 'Approval', 'Grant', 'Secret', 'WebhookEndpoint', 'BrowserLease', 'AuditEntry', 'Error', 'Policy', 'Connection', 'Template']) {
      expect(doc.components.schemas[name], name).to.be.an('object');
    }
    const exec = doc.paths['/v1/environments/{id}/exec'].post;
    expect(exec.requestBody.content['application/json'].schema.properties.timeout_secs).to.deep.equal({ type: 'integer', minimum: 1, maximum: 600 });
    expect(Object.keys(exec.responses['200'].content)).to.have.members(['application/json', 'text/event-stream']);
  });

  it('lists error responses with their codes and the registry\'s statuses', () => {
    const resolve = (r: any): any => (r?.$ref ? doc.components.responses[r.$ref.replace('#/components/responses/', '')] : r);
    const codesOf = (op: any, status: string): string[] => resolve(op.responses[status])?.content?.['application/json']?.schema?.allOf?.[1].properties.error.enum ?? [];
    const create = doc.paths['/v1/environments'].post;
    expect(codesOf(create, '401')).to.deep.equal(['unauthorized']);
    expect(codesOf(create, '422')).to.deep.equal(['invalid_body']);
    expect(codesOf(create, '415')).to.deep.equal(['unsupported_media_type']);
    expect(codesOf(create, '409')).to.have.members(['environment_exists', 'idempotency_key_reused', 'template_not_ready']);
    expect(codesOf(doc.paths['/v1/environments/{id}'].get, '404')).to.deep.equal(['not_found']);
    expect(codesOf(doc.paths['/v1/openapi.json'].get, '401')).to.deep.equal([]);
    const decision = doc.paths['/v1/approvals/{id}/decision'].post;
    expect(codesOf(decision, '400')).to.include.members(['invalid_decision', 'missing_scope', 'invalid_scope']);
    expect(codesOf(decision, '401')).to.have.members(['unauthorized', 'invalid_signature']);
    expect(codesOf(decision, '403')).to.deep.equal(['scope_too_wide']);
    expect(codesOf(doc.paths['/metrics'].get, '401')).to.deep.equal(['unauthorized']);
    // Every status matches the registry.
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        for (const [status, resp] of Object.entries<any>(op.responses)) {
          if (Number(status) < 400) continue;
          for (const code of codesOf(op, status)) expect(ERROR_CODES[code as keyof typeof ERROR_CODES]?.status, `${method} ${path} ${code}`).to.equal(Number(status));
          expect(resolve(resp).description, `${method} ${path} ${status}`).to.be.a('string').and.not.empty;
        }
      }
    }
  });

  it('has one operationId per operation', () => {
    const ids = Object.values<any>(doc.paths).flatMap((ops) => Object.values<any>(ops).map((op) => op.operationId));
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it('without BASE_URL, names the API\'s own URL as its server; without the test clock, lists advance, which answers 404 as before', async () => {
    const other = await startTestService({ GATEWAY_TEST_CLOCK: '0' });
    try {
      const r = await other.raw('GET', '/v1/openapi.json');
      expect(r.body.servers).to.deep.equal([{ url: other.url }]);
      expect(r.body.paths['/v1/test-clock/advance'].post).to.be.an('object');
      const advance = await other.api.post('/v1/test-clock/advance', { seconds: 60 });
      expect(advance.status).to.equal(404);
      expect(advance.body).to.deep.equal({ error: 'not_found', message: 'no such route' });
    } finally {
      await other.close();
    }
  });
});

describe('joi → JSON Schema 2020-12 (api/openapi/joi-to-json-schema.ts)', () => {
  it('says what our schemas use', () => {
    expect(joiToJsonSchema(Joi.string().min(1).max(5).allow(null))).to.deep.equal({ type: ['string', 'null'], minLength: 1, maxLength: 5 });
    expect(joiToJsonSchema(Joi.string().valid('a', 'b').allow(null))).to.deep.equal({ enum: ['a', 'b', null] });
    expect(joiToJsonSchema(Joi.string().min(1).allow(''))).to.deep.equal({ anyOf: [{ type: 'string', minLength: 1 }, { enum: [''] }] });
    expect(joiToJsonSchema(Joi.number().integer().min(0).less(10).default(3).description('n'))).to.deep.equal({ type: 'integer', minimum: 0, exclusiveMaximum: 10, default: 3, description: 'n' });
    expect(joiToJsonSchema(Joi.string().isoDate())).to.deep.equal({ type: 'string', format: 'date-time' });
    expect(joiToJsonSchema(Joi.string().pattern(/^[A-Z]+$/))).to.deep.equal({ type: 'string', pattern: '^[A-Z]+$' });
    expect(joiToJsonSchema(Joi.string().pattern(/^a$/i))).to.deep.equal({ type: 'string' }); // flags have no JSON Schema form
    expect(joiToJsonSchema(Joi.object({ a: Joi.string().required(), b: Joi.boolean() }))).to.deep.equal({
      type: 'object', properties: { a: { type: 'string' }, b: { type: 'boolean' } }, required: ['a'], additionalProperties: false,
    });
    expect(joiToJsonSchema(Joi.object().pattern(/.*/, Joi.string()))).to.deep.equal({ type: 'object', additionalProperties: { type: 'string' } });
    expect(joiToJsonSchema(Joi.object().pattern(/^[a-z]+$/, Joi.number()))).to.deep.equal({ type: 'object', patternProperties: { '^[a-z]+$': { type: 'number' } }, additionalProperties: false });
    expect(joiToJsonSchema(Joi.object().unknown(true))).to.deep.equal({ type: 'object', additionalProperties: true });
    expect(joiToJsonSchema(Joi.array().items(Joi.string()).min(1).max(2))).to.deep.equal({ type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 2 });
    expect(joiToJsonSchema(Joi.alternatives().try(Joi.string(), Joi.number()))).to.deep.equal({ anyOf: [{ type: 'string' }, { type: 'number' }] });
    // A custom rule (a 400 value rule) is left out; the shape stays.
    expect(joiToJsonSchema(Joi.number().integer().custom((v) => v))).to.deep.equal({ type: 'integer' });
  });

  it('names records once (meta component) and refers to them', () => {
    const c = new SchemaComponents();
    const rec = Joi.object({ id: Joi.string().required() }).meta({ component: 'Thing' });
    expect(c.convert(Joi.object({ a: rec.required(), b: rec.allow(null) }))).to.deep.equal({
      type: 'object',
      properties: { a: { $ref: '#/components/schemas/Thing' }, b: { anyOf: [{ $ref: '#/components/schemas/Thing' }, { type: 'null' }] } },
      required: ['a'],
      additionalProperties: false,
    });
    expect(c.schemas.Thing).to.deep.equal({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false });
    expect(() => c.convert(Joi.object({ other: Joi.string() }).meta({ component: 'Thing' }))).to.throw(/two different joi schemas are named Thing/);
  });

  it('throws on what it cannot say, never a silent {}', () => {
    expect(() => joiToJsonSchema(Joi.date())).to.throw(/joi type date is not supported/);
    expect(() => joiToJsonSchema(Joi.string().hostname())).to.throw(/string rule hostname is not supported/);
  });
});
