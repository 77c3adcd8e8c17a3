/**
 * GET /metrics (issue 25, item 2) against the real service: the API key is required, and
 * after traffic through the proxy (allowed, refused, held then approved), a webhook
 * delivery and a job run, every family is there with values that moved, and no label value
 * is an id, a host or a path.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { startReceiver, waitUntil, type Receiver } from './webhooks.receiver.js';
import { METRIC_NAMES } from '../../lib/metrics.js';

const STRIPE_KEY = 'sk_live_51MetricsTestKeyNeverSeenByTheVm';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (the format prom-client writes). */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.reduce((n, s) => n + s.value, 0);
}

describe('GET /metrics', function () {
  this.timeout(60_000);
  let t: TestService;
  let up: FakeUpstream;
  let hooks: Receiver;
  let dir: string;
  let env: { id: string };
  let gateway: { proxy_url: string; ca_cert_pem: string };
  let placeholder: string;

  before(async () => {
    up = await startFakeUpstream();
    hooks = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'gw-metrics-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
      // The webhook receiver listens on loopback.
      GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1',
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'metrics-user',
      egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status, created.text).to.equal(201);
    env = created.body;
    gateway = (await t.api.get(`/v1/environments/${env.id}/gateway`)).body;
    placeholder = (await t.api.get(`/v1/environments/${env.id}/secrets`)).body.data[0].placeholder;
    expect((await t.api.put('/v1/policy', { rules: [{ connector: 'secret:STRIPE_KEY', category: 'read', effect: 'allow' }] })).status).to.equal(200);
    const hook = await t.api.put('/v1/webhook-endpoint', { url: hooks.url });
    expect(hook.status, hook.text).to.equal(200);
  });
  after(async () => {
    await t?.close();
    await up?.close();
    await hooks?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function agent() {
    const u = new URL(gateway.proxy_url);
    const token = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
    return new ProxyAgent({ uri: `${u.protocol}//${u.host}`, token, requestTls: { ca: gateway.ca_cert_pem } });
  }
  async function through(url: string, init: { method?: string; body?: string; auth?: boolean } = {}) {
    const r = await request(url, {
      dispatcher: agent(),
      method: (init.method ?? 'GET') as 'GET',
      body: init.body,
      headers: { ...(init.auth === false ? {} : { authorization: `Bearer ${placeholder}` }), ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    });
    await r.body.text();
    return r;
  }
  async function scrape(): Promise<{ text: string; samples: Sample[]; types: Map<string, string> }> {
    const r = await t.api.get('/metrics');
    expect(r.status, r.text).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
    return { text: r.text, ...parse(r.text) };
  }
  async function pendingApproval(): Promise<{ id: string }> {
    for (let i = 0; i < 250; i++) {
      const r = await t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 20));
    }
    throw new Error('no pending approval appeared');
  }

  it('401 unauthorized without an API key, with a malformed one and with an unknown one', async () => {
    const attempts: Array<Record<string, string>> = [{}, { authorization: 'Basic abc' }, { authorization: `Bearer sk_${'0'.repeat(40)}` }];
    for (const headers of attempts) {
      const r = await t.raw('GET', '/metrics', { headers });
      expect(r.status).to.equal(401);
      expect(r.body.error).to.equal('unauthorized');
      expect(r.text).to.not.include('gateway_requests_total');
    }
  });

  it('after traffic every family is there and has moved; held requests go up then down', async () => {
    const before = await scrape();
    for (const name of Object.values(METRIC_NAMES)) expect(before.types.has(name), `${name} declared`).to.equal(true);
    // Node's and the process's default metrics ride along.
    expect(before.types.has('process_cpu_user_seconds_total')).to.equal(true);
    expect(before.types.has('nodejs_eventloop_lag_seconds')).to.equal(true);
    const b = before.samples;
    const jobsBefore = value(b, METRIC_NAMES.jobs);

    // Allowed with the secret swapped; refused (no rule for a write); refused (egress); no credential.
    expect((await through('https://api.stripe.com/v1/balance')).statusCode).to.equal(200);
    expect((await through('https://api.stripe.com/v1/customers', { method: 'POST', body: 'name=x' })).statusCode).to.equal(403);
    expect((await through('https://elsewhere.example.org/x', { auth: false })).statusCode).to.equal(403);
    expect((await through('https://api.stripe.com/v1/public', { auth: false })).statusCode).to.equal(200);

    // A payment asks: held until approved through the API.
    const held = through('https://api.stripe.com/v1/charges', { method: 'POST', body: 'amount=100&currency=usd' });
    const approval = await pendingApproval();
    let during = (await scrape()).samples;
    await waitUntil('the held gauge', async () => {
      during = (await scrape()).samples;
      return value(during, METRIC_NAMES.held) === 1;
    });
    expect(value(during, METRIC_NAMES.held)).to.equal(1);
    const d = await t.api.post(`/v1/approvals/${approval.id}/decision`, { decision: 'approve', scope: { kind: 'once' } });
    expect(d.status, d.text).to.equal(200);
    expect((await held).statusCode).to.equal(200);

    // The approval's events reach the receiver; a due job runs on the test clock's advance.
    await hooks.waitFor(1, 10_000);
    await t.advance(10);

    let a: Sample[] = [];
    await waitUntil('webhook deliveries and store-backed gauges to show', async () => {
      a = (await scrape()).samples;
      return value(a, METRIC_NAMES.webhookDeliveries, { outcome: 'delivered' }) >= 1 && value(a, METRIC_NAMES.environments, { state: 'pending' }) >= 1;
    }, 10_000);

    const req = (labels: Record<string, string>) => value(a, METRIC_NAMES.requests, labels) - value(b, METRIC_NAMES.requests, labels);
    expect(req({ decision: 'allow', category: 'read', credential: 'secret' })).to.equal(1);
    expect(req({ decision: 'deny', category: 'write', credential: 'secret' })).to.equal(1);
    expect(req({ decision: 'deny', category: 'none', credential: 'none' })).to.equal(1);
    expect(req({ decision: 'allow', category: 'none', credential: 'none' })).to.equal(1);
    expect(req({ decision: 'ask', category: 'pay', credential: 'secret' })).to.equal(1);
    expect(value(a, `${METRIC_NAMES.requestOverhead}_count`) - value(b, `${METRIC_NAMES.requestOverhead}_count`)).to.equal(5);
    // The held request's minutes are not overhead: the sum stays far below the hold's wait.
    expect(value(a, `${METRIC_NAMES.requestOverhead}_sum`) - value(b, `${METRIC_NAMES.requestOverhead}_sum`)).to.be.greaterThan(0);
    expect(value(a, METRIC_NAMES.held)).to.equal(0);
    expect(value(a, `${METRIC_NAMES.approvalWait}_count`) - value(b, `${METRIC_NAMES.approvalWait}_count`)).to.equal(1);
    expect(value(a, `${METRIC_NAMES.approvalWait}_sum`)).to.be.greaterThan(0);
    expect(value(a, `${METRIC_NAMES.auditCommit}_count`) - value(b, `${METRIC_NAMES.auditCommit}_count`)).to.be.at.least(5);
    expect(value(a, METRIC_NAMES.webhookDeliveries, { outcome: 'delivered' })).to.be.at.least(1);
    for (const o of ['retry', 'failed', 'cancelled']) expect(a.some((s) => s.name === METRIC_NAMES.webhookDeliveries && s.labels.outcome === o), o).to.equal(true);
    expect(a.some((s) => s.name === METRIC_NAMES.webhookQueueDepth)).to.equal(true);
    expect(value(a, METRIC_NAMES.environments, { state: 'pending' })).to.equal(1);
    for (const st of ['running', 'suspended', 'stopped', 'failed']) expect(value(a, METRIC_NAMES.environments, { state: st }), st).to.equal(0);
    for (const st of ['pending', 'active', 'releasing']) expect(a.some((s) => s.name === METRIC_NAMES.browserLeases && s.labels.state === st), st).to.equal(true);
    // GATEWAY_RUNTIME=none: no host here, both resources shown as 0.
    for (const r of ['cpus', 'memory_bytes']) {
      expect(a.some((s) => s.name === METRIC_NAMES.hostCapacity && s.labels.resource === r), r).to.equal(true);
      expect(a.some((s) => s.name === METRIC_NAMES.hostAllocated && s.labels.resource === r), r).to.equal(true);
    }
    expect(value(a, METRIC_NAMES.jobs) - jobsBefore).to.be.greaterThan(0);
    expect(value(a, METRIC_NAMES.jobs, { job: 'expire-approvals', outcome: 'success' })).to.be.greaterThan(0);
    expect(a.some((s) => s.name === METRIC_NAMES.jobs && s.labels.job === 'expire-approvals' && s.labels.outcome === 'failure')).to.equal(true);
  });

  it('environments moved out of a state leave a 0, not a missing series', async () => {
    const d = await t.api.delete(`/v1/environments/${env.id}`);
    expect([200, 202, 204]).to.include(d.status);
    let s: Sample[] = [];
    await waitUntil('the destroyed environment to leave the gauge', async () => {
      s = (await scrape()).samples;
      return value(s, METRIC_NAMES.environments, { state: 'pending' }) === 0;
    }, 10_000);
    expect(s.some((x) => x.name === METRIC_NAMES.environments && x.labels.state === 'pending')).to.equal(true);
  });

  it('no label value is an id, a host, a path or a credential', async () => {
    const { samples, text } = await scrape();
    const values = samples.flatMap((s) => Object.values(s.labels));
    expect(values.length).to.be.greaterThan(50);
    for (const v of values) {
      expect(v, v).to.not.match(/^(env|apr|grt|aud|dlv|evt|host|dev|bls|sec|sk|whsec)_/);
      expect(v, v).to.not.include('/');
      expect(v, v).to.not.include('stripe');
      expect(v, v).to.not.include('example');
    }
    for (const secretish of [env.id, placeholder, STRIPE_KEY, t.api.key, 'api.stripe.com', '/v1/']) expect(text).to.not.include(secretish);
    // Only the label names of the design (plus prom-client's own default metrics').
    const ours = samples.filter((s) => s.name.startsWith('gateway_'));
    const names = new Set(ours.flatMap((s) => Object.keys(s.labels)));
    expect([...names].sort()).to.deep.equal(['category', 'credential', 'decision', 'job', 'le', 'outcome', 'resource', 'state']);
  });
});
