import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { ProxyAgent, request } from 'undici';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { WebSocket, WebSocketServer } from 'ws';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { openTunnel, plainProxyRequest, rawConnect, rawTunnelExchange, type Gateway } from '../helpers/proxy-client.js';

const STRIPE_KEY = 'sk_live_51EdgeStripeKeyNeverSeenByTheVm';
const PLAIN_KEY = 'plain-api-key-0123456789-real';
const INFRA_KEY = 'sk_live_51InfraKeySkipsThePolicy';

interface AuditRecord {
  id: string;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  credential: string;
  decision: string;
  reason: string;
  approval_id: string | null;
  status: number;
  upstream_status: number | null;
}

/**
 * Edge cases of the gateway inside the whole service (in process, port 0, fresh database):
 * WebSocket pass-through in a CONNECT tunnel, plain-HTTP proxying, 407, the hold limit, an
 * agent that goes away while held, infrastructure secrets, requests without a credential,
 * private upstream addresses, and failing closed when the store is gone.
 */
describe('gateway edge cases (service level)', function () {
  this.timeout(30000);
  let t: TestService;
  let up: FakeUpstream;
  let plain: FakeUpstream;
  let wss: WebSocketServer;
  let dir: string;
  let env: { id: string };
  let gw: Gateway;
  let ph: Record<string, string>;

  before(async () => {
    up = await startFakeUpstream();
    plain = await startFakeUpstream({ tls: false });
    // The WebSocket upstream shares the HTTPS fake: its 'upgrade' event is the ws server's.
    wss = new WebSocketServer({ server: up.server as import('node:https').Server });
    wss.on('connection', (sock, req) => {
      sock.send(JSON.stringify({ hello: true, authorization: req.headers.authorization ?? null, proxyAuthorization: req.headers['proxy-authorization'] ?? null }));
      sock.on('message', (m) => sock.send(`echo:${String(m)}`));
    });
    dir = mkdtempSync(join(tmpdir(), 'gw-edge-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    const at = `127.0.0.1:${up.port}`;
    t = await startTestService({
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=${at},wss.example.test=${at},plain.example.test=127.0.0.1:${plain.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'edge-user',
      egress_allow: ['api.stripe.com', 'wss.example.test', 'plain.example.test', 'localhost'],
      secrets: {
        STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] },
        PLAIN_KEY: { value: PLAIN_KEY, allowed_hosts: ['plain.example.test'] },
      },
    });
    expect(created.status, created.text).to.equal(201);
    env = created.body;
    gw = (await t.api.get(`/v1/environments/${env.id}/gateway`)).body;
    ph = Object.fromEntries((await t.api.get(`/v1/environments/${env.id}/secrets`)).body.data.map((s: { name: string; placeholder: string }) => [s.name, s.placeholder]));
    const policy = await t.api.put(`/v1/environments/${env.id}/policy`, {
      rules: [
        { connector: 'secret:STRIPE_KEY', category: 'read', effect: 'allow' },
        { connector: 'secret:PLAIN_KEY', category: 'read', effect: 'allow' },
        { connector: 'secret:PLAIN_KEY', category: 'write', effect: 'allow' },
      ],
    });
    expect(policy.status, policy.text).to.equal(200);
  });
  after(async () => {
    for (const c of wss?.clients ?? []) c.terminate();
    wss?.close();
    await t?.close();
    await up?.close();
    await plain?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  let known: Set<string>;
  beforeEach(async () => {
    up.seen.length = 0;
    plain.seen.length = 0;
    known = new Set((await auditLog()).map((e) => e.id));
  });

  async function auditLog(environmentId = env.id): Promise<AuditRecord[]> {
    await t.svc.audit.flush();
    return (await t.api.get(`/v1/audit-log?environment_id=${environmentId}&limit=200`)).body.data;
  }

  /** The audit entries this test caused (newest first), waiting for `n` of them. */
  async function audited(n = 1, environmentId = env.id): Promise<AuditRecord[]> {
    for (let i = 0; i < 200; i++) {
      const fresh = (await auditLog(environmentId)).filter((e) => !known.has(e.id));
      if (fresh.length >= n) return fresh;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`fewer than ${n} new audit entries`);
  }

  async function pendingApproval(environmentId = env.id): Promise<{ id: string; status: string }> {
    for (let i = 0; i < 200; i++) {
      const r = await t.api.get(`/v1/approvals?status=pending&environment_id=${environmentId}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 10));
    }
    throw new Error('no pending approval appeared');
  }

  const agent = (g: Gateway = gw) => new ProxyAgent({ uri: g.proxy_url, requestTls: { ca: g.ca_cert_pem } });

  describe('WebSocket inside a CONNECT tunnel', () => {
    it('passes through both ways to an allowed host (wss via https-proxy-agent), without the proxy credentials, audited as an upgrade', async () => {
      const ws = new WebSocket('wss://wss.example.test/socket', { agent: new HttpsProxyAgent(gw.proxy_url), ca: gw.ca_cert_pem });
      try {
        const [hello] = await once(ws, 'message');
        expect(JSON.parse(String(hello))).to.deep.equal({ hello: true, authorization: null, proxyAuthorization: null });
        ws.send('ping');
        const [echo] = await once(ws, 'message');
        expect(String(echo)).to.equal('echo:ping');
      } finally {
        ws.close();
      }
      const [e] = await audited();
      expect(e).to.include({ host: 'wss.example.test', path: '/socket', credential: 'none', decision: 'allow', reason: 'upgrade', status: 101, upstream_status: 101 });
    });

    it('a host off the allowlist: the upgrade is refused with 403 egress_denied and never reaches anything', async () => {
      const ws = new WebSocket('wss://blocked.example.org/socket', { agent: new HttpsProxyAgent(gw.proxy_url), ca: gw.ca_cert_pem });
      const [, res] = (await once(ws, 'unexpected-response')) as [unknown, IncomingMessage];
      expect(res.statusCode).to.equal(403);
      expect(res.headers['x-gateway-error']).to.equal('egress_denied');
      res.resume();
      ws.on('error', () => undefined);
      ws.terminate();
      const [e] = await audited();
      expect(e).to.include({ host: 'blocked.example.org', decision: 'deny', reason: 'egress_denied', status: 403 });
    });

    // Regression: upgrades once checked only the egress allowlist, so a placeholder reached any allowed host.
    it('a placeholder in the upgrade request to a host outside its allowed_hosts is 403 secret_host_not_allowed', async () => {
      const ws = new WebSocket('wss://wss.example.test/socket', {
        agent: new HttpsProxyAgent(gw.proxy_url), ca: gw.ca_cert_pem, headers: { authorization: `Bearer ${ph.STRIPE_KEY}` },
      });
      ws.on('error', () => undefined);
      const outcome = await Promise.race([
        once(ws, 'message').then(([m]) => ({ reached: String(m) })),
        once(ws, 'unexpected-response').then(([, res]) => res as IncomingMessage),
      ]);
      ws.terminate();
      expect(outcome).to.not.have.property('reached');
      expect((outcome as IncomingMessage).statusCode).to.equal(403);
      expect((outcome as IncomingMessage).headers['x-gateway-error']).to.equal('secret_host_not_allowed');
      const [e] = await audited();
      expect(e).to.include({ host: 'wss.example.test', connector: 'secret:STRIPE_KEY', credential: 'secret', decision: 'deny', reason: 'secret_host_not_allowed' });
    });
  });

  describe('plain http:// through the proxy (absolute form, no CONNECT)', () => {
    it('with Proxy-Authorization and no credential: forwarded as it is, Host kept, proxy headers stripped, audited', async () => {
      const r = await plainProxyRequest(gw, 'http://plain.example.test/v1/things?page=2', { headers: { 'x-trace': 'abc' } });
      expect(r.status, r.body).to.equal(200);
      expect(plain.seen).to.have.length(1);
      expect(plain.seen[0]).to.include({ method: 'GET', url: '/v1/things?page=2' });
      expect(plain.seen[0]!.headers['x-trace']).to.equal('abc');
      expect(plain.seen[0]!.headers.host).to.equal('plain.example.test');
      expect(plain.seen[0]!.headers).to.not.have.property('proxy-authorization');
      const [get] = await audited(1);
      expect(get).to.include({ method: 'GET', host: 'plain.example.test', credential: 'none', decision: 'allow', reason: 'no_credential', status: 200 });
    });

    // Regression (issue 9, hole 7): plain http:// once had the real key swapped in, so it
    // crossed the network in cleartext.
    it('a placeholder in a cleartext request is refused 403 cleartext_not_allowed; nothing is forwarded', async () => {
      const r = await plainProxyRequest(gw, 'http://plain.example.test/v1/things?page=2', { headers: { authorization: `Bearer ${ph.PLAIN_KEY}` } });
      expect(r.status, r.body).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal('cleartext_not_allowed');
      expect(plain.seen).to.have.length(0);
      const [e] = await audited(1);
      expect(e).to.include({ host: 'plain.example.test', connector: 'secret:PLAIN_KEY', credential: 'secret', decision: 'deny', reason: 'cleartext_not_allowed', status: 403 });
    });

    it('407 proxy_auth_required without credentials or with a wrong password; nothing is forwarded', async () => {
      const none = await plainProxyRequest(gw, 'http://plain.example.test/x', { auth: false });
      expect(none.status).to.equal(407);
      expect(none.headers['x-gateway-error']).to.equal('proxy_auth_required');
      expect(none.headers['proxy-authenticate']).to.match(/^Basic /);
      expect(JSON.parse(none.body)).to.include({ error: 'proxy_auth_required' });

      const u = new URL(gw.proxy_url);
      u.password = 'not-the-password';
      const wrong = await plainProxyRequest({ ...gw, proxy_url: u.toString() }, 'http://plain.example.test/x');
      expect(wrong.status).to.equal(407);
      expect(plain.seen).to.have.length(0);
    });
  });

  describe('request targets', () => {
    it('regression: an absolute-form target inside a TLS tunnel was classified and forwarded as `/`; its path and query are kept', async () => {
      const out = await rawTunnelExchange(gw, 'api.stripe.com',
        `GET https://api.stripe.com/v1/balance?expand=x HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${ph.STRIPE_KEY}\r\nConnection: close\r\n\r\n`);
      expect(out).to.match(/^HTTP\/1\.1 200 /);
      expect(up.seen.map((s) => s.url)).to.deep.equal(['/v1/balance?expand=x']);
      expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${STRIPE_KEY}`);
      const [e] = await audited();
      expect(e).to.include({ method: 'GET', connector: 'secret:STRIPE_KEY', category: 'read', decision: 'allow', reason: 'rule' });
      expect(e.path).to.match(/^\/v1\/balance\?expand=/);
    });
  });

  describe('held requests', () => {
    it('a held request whose body is over the hold limit (10 MiB) is 413 payload_too_large, with no approval created', async () => {
      const body = Buffer.alloc(10 * 1024 * 1024 + 4096, 'a');
      const r = await request('https://api.stripe.com/v1/charges', {
        dispatcher: agent(),
        method: 'POST',
        headers: { authorization: `Bearer ${ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      expect(r.statusCode).to.equal(413);
      expect(r.headers['x-gateway-error']).to.equal('payload_too_large');
      expect(await r.body.json()).to.include({ error: 'payload_too_large' });
      expect(up.seen).to.have.length(0);
      expect((await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`)).body.data).to.have.length(0);
      const [e] = await audited();
      expect(e).to.include({ connector: 'secret:STRIPE_KEY', category: 'pay', decision: 'deny', reason: 'payload_too_large', status: 413, approval_id: null });
    });

    it('the agent disconnects while held: nothing crashes, the approval stays pending and decidable, nothing is forwarded', async () => {
      const abort = new AbortController();
      const dispatcher = agent();
      const held = request('https://api.stripe.com/v1/charges', {
        dispatcher, signal: abort.signal, method: 'POST',
        headers: { authorization: `Bearer ${ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'amount=100&currency=usd',
      }).catch((err: Error) => err);
      const approval = await pendingApproval();
      abort.abort();
      expect(await held).to.be.instanceOf(Error);
      const [e] = await audited();
      expect(e).to.include({ category: 'pay', decision: 'ask', reason: 'client_disconnected', status: 499, approval_id: approval.id });
      expect((await t.api.get(`/v1/approvals/${approval.id}`)).body.status).to.equal('pending');

      const d = await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'approve', scope: { kind: 'once' } });
      expect(d.status, d.text).to.equal(200);
      expect(d.body.status).to.equal('approved');
      await dispatcher.close();
      // The gateway still serves, and the abandoned request was never sent.
      const after = await request('https://api.stripe.com/v1/balance', { dispatcher: agent(), headers: { authorization: `Bearer ${ph.STRIPE_KEY}` } });
      expect(after.statusCode).to.equal(200);
      await after.body.text();
      expect(up.seen.map((s) => s.url)).to.deep.equal(['/v1/balance']);
    });
  });

  describe('credentials', () => {
    it('an infrastructure secret skips the policy (reason infrastructure_credential) even for a payment and with no rules at all', async () => {
      const other = await t.api.post('/v1/environments', {
        end_user_id: 'edge-infra-user',
        secrets: { INFRA_KEY: { value: INFRA_KEY, allowed_hosts: ['api.stripe.com'], infrastructure: true } },
      });
      expect(other.status, other.text).to.equal(201);
      const policy = await t.api.get(`/v1/environments/${other.body.id}/policy`);
      expect(policy.body.rules).to.deep.equal([]);
      const g: Gateway = (await t.api.get(`/v1/environments/${other.body.id}/gateway`)).body;
      const placeholder = (await t.api.get(`/v1/environments/${other.body.id}/secrets`)).body.data[0].placeholder;
      const r = await request('https://api.stripe.com/v1/charges', {
        dispatcher: agent(g), method: 'POST',
        headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'amount=100&currency=usd',
      });
      expect(r.statusCode).to.equal(200);
      await r.body.text();
      expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${INFRA_KEY}`);
      const [e] = await audited(1, other.body.id);
      expect(e).to.include({ connector: 'secret:INFRA_KEY', category: 'pay', credential: 'secret', decision: 'allow', reason: 'infrastructure_credential', status: 200 });
    });

    it('a request with no credential to an allowed host goes through and is audited with credential none', async () => {
      const r = await request('https://api.stripe.com/v1/charges', { dispatcher: agent(), method: 'POST', body: 'amount=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect(r.statusCode).to.equal(200);
      await r.body.text();
      expect(up.seen).to.have.length(1);
      const [e] = await audited();
      expect(e).to.include({ method: 'POST', host: 'api.stripe.com', connector: null, category: null, credential: 'none', decision: 'allow', reason: 'no_credential', status: 200, upstream_status: 200 });
    });
  });

  describe('private upstream addresses (GATEWAY_ALLOW_PRIVATE_UPSTREAMS off)', () => {
    it('localhost is on the allowlist but resolves to loopback: 403 egress_denied over CONNECT and plain HTTP, nothing reached', async () => {
      const r = await request(`https://localhost:${up.port}/v1/balance`, { dispatcher: agent() });
      expect(r.statusCode).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal('egress_denied');
      expect((await r.body.json()) as { message: string }).to.have.property('message').that.matches(/loopback/);
      const p = await plainProxyRequest(gw, `http://localhost:${plain.port}/x`);
      expect(p.status).to.equal(403);
      expect(p.headers['x-gateway-error']).to.equal('egress_denied');
      expect(up.seen).to.have.length(0);
      expect(plain.seen).to.have.length(0);
      const entries = await audited(2);
      for (const e of entries) expect(e).to.include({ host: 'localhost', decision: 'deny', reason: 'egress_denied', status: 403 });
    });
  });
});

/**
 * Fail closed: the store goes away under a running gateway. Its own service and throwaway
 * database, because the store is broken for real: the knex pool is destroyed (every query
 * then fails as with a database that cannot be reached) and re-initialized afterwards.
 */
describe('gateway fails closed when the store cannot be reached', function () {
  this.timeout(30000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let env: { id: string };
  let gw: Gateway;
  let placeholder: string;
  let storeDown = false;

  before(async () => {
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-failclosed-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({ GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem') });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'store-down-user',
      secrets: { STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] } },
    });
    env = created.body;
    gw = (await t.api.get(`/v1/environments/${env.id}/gateway`)).body;
    placeholder = (await t.api.get(`/v1/environments/${env.id}/secrets`)).body.data[0].placeholder;
    await t.api.put(`/v1/environments/${env.id}/policy`, { rules: [{ connector: 'secret:STRIPE_KEY', category: 'read', effect: 'allow' }] });
  });
  beforeEach(() => {
    up.seen.length = 0;
  });
  after(async () => {
    if (storeDown) await t.svc.db.initialize();
    await t?.close();
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const agent = () => new ProxyAgent({ uri: gw.proxy_url, requestTls: { ca: gw.ca_cert_pem } });
  const stripe = (path: string, init: { method?: string; body?: string } = {}) =>
    request(`https://api.stripe.com${path}`, {
      dispatcher: agent(), method: (init.method ?? 'GET') as 'GET', body: init.body,
      headers: { authorization: `Bearer ${placeholder}`, ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    });

  it('a request that needs an approval gets 503 gateway_unavailable and is never forwarded; the refusal is audited once the store is back', async () => {
    const warm = await stripe('/v1/balance');
    expect(warm.statusCode).to.equal(200);
    await warm.body.text();
    up.seen.length = 0;

    await t.svc.db.destroy();
    storeDown = true;
    const r = await stripe('/v1/charges', { method: 'POST', body: 'amount=5000&currency=usd' });
    expect(r.statusCode).to.equal(503);
    expect(r.headers['x-gateway-error']).to.equal('gateway_unavailable');
    expect(await r.body.json()).to.include({ error: 'gateway_unavailable' });
    expect(up.seen).to.have.length(0);

    t.svc.db.initialize();
    storeDown = false;
    await t.svc.audit.flush();
    const log = (await t.api.get(`/v1/audit-log?environment_id=${env.id}`)).body.data as AuditRecord[];
    expect(log[0]).to.include({ path: '/v1/charges', category: 'pay', decision: 'deny', reason: 'gateway_unavailable', status: 503 });
    expect((await t.api.get(`/v1/approvals?environment_id=${env.id}`)).body.data).to.have.length(0);
  });

  it('a WebSocket upgrade in an open tunnel while the store is down: 503 gateway_unavailable, no unhandled rejection (it would end the process)', async () => {
    const rejections: unknown[] = [];
    const onRejection = (err: unknown) => rejections.push(err);
    process.on('unhandledRejection', onRejection);
    const tunnel = await openTunnel(gw, 'api.stripe.com');
    try {
      tunnel.tls.write('GET /v1/warm HTTP/1.1\r\nHost: api.stripe.com\r\n\r\n');
      expect(await tunnel.read()).to.match(/^HTTP\/1\.1 200 /);
      await t.svc.db.destroy();
      storeDown = true;
      // Past the 1 s bound of the snapshot cache (the test clock ages it, no sleep): the
      // allowlist lookup needs the store.
      t.svc.clock.advance(1100);
      tunnel.tls.write('GET /socket HTTP/1.1\r\nHost: api.stripe.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
      const answer = await tunnel.read();
      expect(answer).to.match(/^HTTP\/1\.1 503 /);
      expect(answer.toLowerCase()).to.include('x-gateway-error: gateway_unavailable');
      expect(rejections).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', onRejection);
      tunnel.tls.destroy();
      t.svc.db.initialize();
      storeDown = false;
    }
  });

  // Regression: a store failure during proxy authentication once read as bad credentials (407).
  it('once the cached lookups are older than their 1 s bound: 503 gateway_unavailable (not 407) on CONNECT and plain HTTP, nothing forwarded', async () => {
    await t.svc.db.destroy();
    storeDown = true;
    try {
      // The proxy-credential, snapshot and policy caches are bounded by 1 s (of monotonic
      // time plus the test clock's offset: advanced here instead of slept).
      t.svc.clock.advance(1100);
      const { head, socket } = await rawConnect(gw, 'api.stripe.com:443');
      socket.destroy();
      expect(head).to.match(/^HTTP\/1\.1 503 /);
      expect(head.toLowerCase()).to.include('x-gateway-error: gateway_unavailable');
      const plain = await plainProxyRequest(gw, 'http://api.stripe.com/v1/balance', { headers: { authorization: `Bearer ${placeholder}` } });
      expect(plain.status, plain.body).to.equal(503);
      expect(plain.headers['x-gateway-error']).to.equal('gateway_unavailable');
      expect(up.seen).to.have.length(0);
    } finally {
      t.svc.db.initialize();
      storeDown = false;
    }
  });
});
