import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server as TlsServer } from 'node:tls';
import { generateCa } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { openTunnel, rawTunnelExchange, statusOf, UPGRADE_HEADERS, type Gateway } from '../helpers/proxy-client.js';
import { startTestService, type TestService } from '../helpers/service.js';

/**
 * A fourth review's request-parsing findings: what the gateway checks must be what the
 * upstream gets. Each attack is sent raw inside the agent's own tunnel.
 *
 * - A `#` in the request target: every check read the path up to it, the upstream got it
 *   whole (`/v1/products#/../../v1/charges`, classified as a product write).
 * - `Upgrade: h2c` passed through: HTTP/2 requests the gateway never reads.
 * - A WebSocket to a registered MCP server's origin: tool calls no tool rule sees.
 * - `Expect: 100-continue`: Node answered 100, undici refused the header, the agent got 502
 *   even after an approval.
 * - Method overrides in spellings the classifier does not read (`X-HTTP-Method`,
 *   `X-Method-Override`, `X_HTTP_Method_Override`) were forwarded.
 */
const KEY = 'sk_live_51ParsingRealKey';

describe('security: request parsing the upstream could read otherwise (a fourth review)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com', 'api.allowed.com', 'mcp.tools.example'],
      secrets: { KEY: { value: KEY, allowed_hosts: ['api.stripe.com', 'api.allowed.com'] } },
    });
    expect((await w.t.api.put('/v1/mcp-servers/tools', { url: 'https://mcp.tools.example/mcp' })).status).to.equal(201);
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());

  const raw = (host: string, lines: string[], body = '') => rawTunnelExchange(w.gw, host, `${lines.join('\r\n')}\r\nConnection: close\r\n\r\n${body}`);

  it('attack: a fragment in the request target is refused (400) before any check reads the path; nothing is forwarded', async () => {
    const body = 'amount=100&currency=usd';
    const r = statusOf(await raw('api.stripe.com', [
      'POST /v1/products#/../../v1/charges HTTP/1.1', 'Host: api.stripe.com', `Authorization: Bearer ${w.ph.KEY}`,
      'Content-Type: application/x-www-form-urlencoded', `Content-Length: ${body.length}`,
    ], body));
    expect([r.status, r.error]).to.deep.equal([400, 'invalid_request']);
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited();
    expect(e).to.include({ decision: 'deny', reason: 'invalid_request', status: 400 });
    // An upgrade with one too.
    const u = statusOf(await raw('api.allowed.com', ['GET /socket#x HTTP/1.1', 'Host: api.allowed.com', ...UPGRADE_HEADERS.trim().split('\r\n')]));
    expect([u.status, u.error]).to.deep.equal([400, 'invalid_request']);
  });

  it('attack: an h2c upgrade (HTTP/2 the gateway would never read) is refused; a WebSocket one is not refused for its kind', async () => {
    const h2c = statusOf(await raw('api.allowed.com', ['GET / HTTP/1.1', 'Host: api.allowed.com', 'Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA']));
    expect([h2c.status, h2c.error]).to.deep.equal([400, 'invalid_request']);
    const both = statusOf(await raw('api.allowed.com', ['GET / HTTP/1.1', 'Host: api.allowed.com', 'Connection: Upgrade', 'Upgrade: websocket, h2c', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==']));
    expect([both.status, both.error]).to.deep.equal([400, 'invalid_request']);
    expect(w.up.seen).to.have.length(0);
  });

  it('a refused upgrade\'s chunked answer reaches the agent framed as it is relayed (the body decoded, ended by the close)', async () => {
    const normal = w.up.respond;
    w.up.respond = (req, res) => {
      if (!(req.url ?? '').startsWith('/ws-refused')) return normal(req, res);
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.write('no websockets ');
      res.end('here');
    };
    try {
      const answer = await raw('api.allowed.com', ['GET /ws-refused HTTP/1.1', 'Host: api.allowed.com', ...UPGRADE_HEADERS.trim().split('\r\n')]);
      const r = statusOf(answer);
      expect(r.status).to.equal(403);
      const head = answer.slice(0, answer.indexOf('\r\n\r\n')).toLowerCase();
      expect(head).to.not.include('transfer-encoding');
      expect(head).to.include('connection: close');
      expect(r.body).to.equal('no websockets here');
    } finally {
      w.up.respond = normal;
    }
  });

  it('attack: a WebSocket to a registered MCP server\'s origin (tool calls no rule would see) is refused', async () => {
    const r = statusOf(await raw('mcp.tools.example', ['GET /mcp HTTP/1.1', 'Host: mcp.tools.example', ...UPGRADE_HEADERS.trim().split('\r\n')]));
    expect([r.status, r.error]).to.deep.equal([400, 'invalid_request']);
    expect(w.up.seen).to.have.length(0);
  });

  it('attack: a Stripe charge whose path a lenient router reads as /v1/charges (;x=1, %2F, a backslash, a trailing dot) is a payment, held; never a generic write the policy allows', async () => {
    const body = 'amount=100&currency=usd';
    for (const path of ['/v1/charges;x=1', '/v1%2Fcharges', '/v1/x\\..\\charges', '/v1/charges.']) {
      const t = await openTunnel(w.gw, 'api.stripe.com');
      t.tls.write(`POST ${path} HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${w.ph.KEY}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      let pending: Array<{ id: string; category: string; summary: string }> = [];
      for (let i = 0; i < 300 && pending.length === 0; i++) {
        pending = (await w.t.api.get(`/v1/approvals?status=pending&environment_id=${w.envId}`)).body.data;
        if (pending.length === 0) await new Promise((r) => setTimeout(r, 10));
      }
      expect(pending.map((a) => a.category), path).to.deep.equal(['pay']);
      await w.t.api.post(`/v1/approvals/${pending[0]!.id}/decision`, { decision: 'deny' });
      t.tls.destroy();
      expect(w.up.seen, path).to.have.length(0);
    }
  });

  it('Expect: 100-continue is answered by the gateway and not forwarded: the request goes through (it was a 502)', async () => {
    const body = '{"a":1}';
    const answer = await raw('api.allowed.com', [
      'POST /things HTTP/1.1', 'Host: api.allowed.com', `Authorization: Bearer ${w.ph.KEY}`, 'Expect: 100-continue',
      'Content-Type: application/json', `Content-Length: ${body.length}`,
    ], body);
    expect(answer).to.match(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    const r = statusOf(answer.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, ''));
    expect(r.status).to.equal(200);
    expect(w.up.seen).to.have.length(1);
    expect(w.up.seen[0]!.headers.expect).to.equal(undefined);
  });

  it('attack: method overrides in spellings the classifier does not read, and routing headers (X-Original-URL, X-Forwarded-Host, Forwarded), are not forwarded; the override it reads is', async () => {
    const r = statusOf(await raw('api.allowed.com', [
      'GET /things/abc HTTP/1.1', 'Host: api.allowed.com', `Authorization: Bearer ${w.ph.KEY}`,
      'X-HTTP-Method: DELETE', 'X-Method-Override: DELETE', 'X_HTTP_Method_Override: DELETE', 'X_Method_Override: DELETE',
      'X-Original-URL: /things/abc/delete', 'X-Rewrite-URL: /things/abc/delete',
      'X-Forwarded-Host: admin.internal.example', 'Forwarded: host=admin.internal.example;for=10.0.0.1', 'X-Forwarded-For: 10.0.0.1', 'X-Real-IP: 10.0.0.1',
    ]));
    expect(r.status).to.equal(200);
    const h = w.up.seen[0]!.headers;
    for (const k of ['x-http-method', 'x-method-override', 'x_http_method_override', 'x_method_override', 'x-original-url', 'x-rewrite-url', 'x-forwarded-host', 'forwarded', 'x-forwarded-for', 'x-real-ip']) expect(h[k], k).to.equal(undefined);
    const [e] = await w.audited();
    expect(e).to.include({ category: 'read', decision: 'allow' });
    // X-HTTP-Method-Override itself is read (the wire method and it both count) and forwarded.
    await w.mark();
    const d = statusOf(await raw('api.allowed.com', ['GET /things/abc HTTP/1.1', 'Host: api.allowed.com', `Authorization: Bearer ${w.ph.KEY}`, 'X-HTTP-Method-Override: PATCH']));
    expect(d.status).to.equal(200);
    expect(w.up.seen[0]!.headers['x-http-method-override']).to.equal('PATCH');
    const [e2] = await w.audited();
    expect(e2).to.include({ category: 'write' });
  });
});

/**
 * A body on a GET, to an upstream that does not read bodies on GETs: its bytes are the next
 * request on the connection, and the gateway's upstream connections are pooled across every
 * environment. The smuggled request's answer then answered the next request on that
 * connection, another tenant's. Now a request with a body on a method that usually has none
 * does not leave its connection for reuse.
 */
describe('security: a request smuggled in a GET body cannot answer another tenant\'s request (a fourth review)', function () {
  this.timeout(30000);
  let server: TlsServer;
  let t: TestService;
  let dir: string;
  const agents: Array<{ gw: Gateway; ph: string }> = [];

  before(async () => {
    const ca = await generateCa({ commonName: 'Lenient Upstream CA' });
    const leaf = (await createLeafIssuer(ca)).getLeaf('lenient.example.com');
    // HTTP/1.1 that answers each request by its path and never reads a body (as some servers do on GET).
    server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (sock) => {
      let buf = '';
      sock.on('data', (d: Buffer) => {
        buf += d.toString('latin1');
        for (let end = buf.indexOf('\r\n\r\n'); end !== -1; end = buf.indexOf('\r\n\r\n')) {
          const path = buf.slice(0, end).split(' ')[1] ?? '/';
          buf = buf.slice(end + 4);
          sock.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${path.length}\r\n\r\n${path}`);
        }
      });
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    dir = mkdtempSync(join(tmpdir(), 'gw-lenient-'));
    writeFileSync(join(dir, 'ca.pem'), ca.certPem);
    const port = (server.address() as AddressInfo).port;
    t = await startTestService({ GATEWAY_UPSTREAM_OVERRIDES: `lenient.example.com=127.0.0.1:${port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem') });
    for (const name of ['smuggler', 'victim']) {
      const e = await t.api.post('/v1/environments', { end_user_id: name, egress_allow: ['lenient.example.com'], secrets: { KEY: { value: `real-key-of-${name}-0123456789`, allowed_hosts: ['lenient.example.com'] } } });
      expect(e.status, e.text).to.equal(201);
      expect((await t.api.put(`/v1/environments/${e.body.id}/policy`, { rules: [{ category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }] })).status).to.equal(200);
      const gw = (await t.api.get(`/v1/environments/${e.body.id}/gateway`)).body;
      const ph = (await t.api.get(`/v1/environments/${e.body.id}/secrets`)).body.data[0].placeholder;
      agents.push({ gw, ph });
    }
  });
  after(async () => {
    await t?.close();
    server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('attack: the smuggler\'s GET body is the start of a request the next one on the connection completes; the victim\'s requests get their own answers', async () => {
    const [smuggler, victim] = agents as [typeof agents[0], typeof agents[0]];
    // Unfinished: the next request's bytes on the connection complete it (as a header value).
    const smuggled = 'GET /smuggled-answer HTTP/1.1\r\nHost: lenient.example.com\r\nX-Ignore: ';
    const first = statusOf(await rawTunnelExchange(smuggler.gw, 'lenient.example.com',
      `GET /mine HTTP/1.1\r\nHost: lenient.example.com\r\nAuthorization: Bearer ${smuggler.ph}\r\nContent-Length: ${smuggled.length}\r\nConnection: close\r\n\r\n${smuggled}`));
    // (Answers to requests with a swapped credential are chunked: the body is read inside the chunk.)
    expect(first.status).to.equal(200);
    expect(first.body).to.include('/mine');
    for (let i = 0; i < 3; i++) {
      const r = statusOf(await rawTunnelExchange(victim.gw, 'lenient.example.com', `GET /victim-${i} HTTP/1.1\r\nHost: lenient.example.com\r\nAuthorization: Bearer ${victim.ph}\r\nConnection: close\r\n\r\n`));
      expect(r.status, `request ${i}`).to.equal(200);
      expect(r.body, `request ${i}`).to.include(`/victim-${i}`);
      expect(r.body, `request ${i}`).to.not.include('smuggled');
    }
  });
});
