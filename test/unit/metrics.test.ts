import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { CATEGORIES } from '../../policy-engine/categories.js';
import { CATEGORY_LABELS, ENVIRONMENT_STATES, LEASE_STATES, METRIC_NAMES, noopMetrics, type StateSources } from '../../lib/metrics.js';
import { createPrometheusMetrics } from '../../metrics/prometheus.js';

/** The Metrics port (lib/metrics.ts) and its prom-client adapter (metrics/prometheus.ts), issue 25 item 2. */

function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | null {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)) have[l[1]!] = l[2]!;
    if (Object.entries(labels).every(([k, v]) => have[k] === v) && Object.keys(have).length === Object.keys(labels).length) return Number(m[3]);
  }
  return null;
}

function sources(over: Partial<StateSources> = {}): StateSources & { reads: number } {
  const s = {
    reads: 0,
    async environmentsByState() {
      s.reads++;
      return { running: 2, pending: 1 };
    },
    async browserLeasesByState() {
      return { active: 3 };
    },
    async webhookQueueDepth() {
      return 7;
    },
    async host() {
      return { capacity: { cpus: 8, memory_bytes: 16 * 2 ** 30 }, allocated: { cpus: 2, memory_bytes: 2 ** 30 } };
    },
    ...over,
  };
  return s;
}

describe('metrics port and adapter', () => {
  it('the category labels are the policy categories and none', () => {
    expect([...CATEGORY_LABELS]).to.deep.equal([...CATEGORIES, 'none']);
  });

  it('the no-op port has every method of the port the adapter implements', () => {
    const prom = createPrometheusMetrics({ defaultMetrics: false });
    expect(Object.keys(noopMetrics).sort()).to.deep.equal(Object.keys(prom.metrics).sort());
  });

  it('declares every family, with Node\'s default metrics unless told not to', async () => {
    const { body, contentType } = await createPrometheusMetrics().scrape();
    expect(contentType).to.match(/^text\/plain; version=0\.0\.4/);
    for (const name of Object.values(METRIC_NAMES)) expect(body).to.include(`# TYPE ${name} `);
    expect(body).to.include('# TYPE process_cpu_user_seconds_total counter');
    expect((await createPrometheusMetrics({ defaultMetrics: false }).scrape()).body).to.not.include('process_cpu_user_seconds_total');
  });

  it('counts requests by their labels; a value outside its fixed set is `other`, never itself', async () => {
    const prom = createPrometheusMetrics({ defaultMetrics: false });
    prom.metrics.requestDone('allow', 'read', 'secret', 0.0004);
    prom.metrics.requestDone('allow', 'read', 'secret', 0.0006);
    prom.metrics.requestDone('deny', null, 'none', 0.0001);
    prom.metrics.requestDone('allow', '/v1/env_0123', 'sk_live_x', 0.001);
    prom.metrics.requestDone('env_abc', 'read', 'secret', 0.001);
    const { body } = await prom.scrape();
    expect(sampleValue(body, METRIC_NAMES.requests, { decision: 'allow', category: 'read', credential: 'secret' })).to.equal(2);
    expect(sampleValue(body, METRIC_NAMES.requests, { decision: 'deny', category: 'none', credential: 'none' })).to.equal(1);
    expect(sampleValue(body, METRIC_NAMES.requests, { decision: 'allow', category: 'other', credential: 'secret' })).to.equal(null);
    expect(sampleValue(body, METRIC_NAMES.requests, { decision: 'allow', category: 'other', credential: 'other' })).to.equal(1);
    expect(sampleValue(body, METRIC_NAMES.requests, { decision: 'other', category: 'read', credential: 'secret' })).to.equal(1);
    expect(body).to.not.include('env_');
    expect(body).to.not.include('sk_live');
    expect(sampleValue(body, `${METRIC_NAMES.requestOverhead}_count`)).to.equal(5);
    expect(sampleValue(body, `${METRIC_NAMES.requestOverhead}_bucket`, { le: '0.0005' })).to.equal(2);
  });

  it('the held gauge goes up and down; only a decided hold is an approval-wait sample', async () => {
    const prom = createPrometheusMetrics({ defaultMetrics: false });
    prom.metrics.holdStarted();
    prom.metrics.holdStarted();
    expect(sampleValue((await prom.scrape()).body, METRIC_NAMES.held)).to.equal(2);
    prom.metrics.holdEnded(42);
    prom.metrics.holdEnded(null);
    const { body } = await prom.scrape();
    expect(sampleValue(body, METRIC_NAMES.held)).to.equal(0);
    expect(sampleValue(body, `${METRIC_NAMES.approvalWait}_count`)).to.equal(1);
    expect(sampleValue(body, `${METRIC_NAMES.approvalWait}_sum`)).to.equal(42);
  });

  it('webhook outcomes and job outcomes exist at 0 before they happen', async () => {
    const prom = createPrometheusMetrics({ defaultMetrics: false });
    let body = (await prom.scrape()).body;
    for (const o of ['delivered', 'retry', 'failed', 'cancelled']) expect(sampleValue(body, METRIC_NAMES.webhookDeliveries, { outcome: o }), o).to.equal(0);
    prom.metrics.webhookDelivery('retry');
    prom.metrics.jobDone('expire-approvals', 'success');
    prom.metrics.auditCommitted(0.002);
    body = (await prom.scrape()).body;
    expect(sampleValue(body, METRIC_NAMES.webhookDeliveries, { outcome: 'retry' })).to.equal(1);
    expect(sampleValue(body, METRIC_NAMES.jobs, { job: 'expire-approvals', outcome: 'success' })).to.equal(1);
    expect(sampleValue(body, METRIC_NAMES.jobs, { job: 'expire-approvals', outcome: 'failure' })).to.equal(0);
    expect(sampleValue(body, `${METRIC_NAMES.auditCommit}_count`)).to.equal(1);
  });

  it('store-backed gauges: every state shown (zeros included), read at most once per cache period, last values kept on failure', async () => {
    let now = 0;
    const prom = createPrometheusMetrics({ defaultMetrics: false, stateCacheMs: 5000, now: () => now });
    let body = (await prom.scrape()).body;
    for (const s of ENVIRONMENT_STATES) expect(sampleValue(body, METRIC_NAMES.environments, { state: s }), s).to.equal(0);
    let fail = false;
    const src = sources({
      environmentsByState: async () => {
        src.reads++;
        if (fail) throw Object.assign(new Error('store down'), { code: 'ECONNREFUSED' });
        return { running: 2, pending: 1, destroyed: 99 };
      },
    });
    prom.readStateFrom(src);
    body = (await Promise.all([prom.scrape(), prom.scrape(), prom.scrape()]))[0]!.body;
    expect(src.reads).to.equal(1);
    expect(sampleValue(body, METRIC_NAMES.environments, { state: 'running' })).to.equal(2);
    expect(sampleValue(body, METRIC_NAMES.environments, { state: 'stopped' })).to.equal(0);
    expect(sampleValue(body, METRIC_NAMES.environments, { state: 'destroyed' })).to.equal(null);
    for (const s of LEASE_STATES) expect(sampleValue(body, METRIC_NAMES.browserLeases, { state: s }), s).to.equal(s === 'active' ? 3 : 0);
    expect(sampleValue(body, METRIC_NAMES.webhookQueueDepth)).to.equal(7);
    expect(sampleValue(body, METRIC_NAMES.hostCapacity, { resource: 'cpus' })).to.equal(8);
    expect(sampleValue(body, METRIC_NAMES.hostAllocated, { resource: 'memory_bytes' })).to.equal(2 ** 30);
    now = 4999;
    await prom.scrape();
    expect(src.reads).to.equal(1);
    now = 5000;
    fail = true;
    body = (await prom.scrape()).body;
    expect(src.reads).to.equal(2);
    expect(sampleValue(body, METRIC_NAMES.environments, { state: 'running' })).to.equal(2);
    now = 6000;
    await prom.scrape();
    expect(src.reads).to.equal(2); // a failed read waits its turn too
  });

  it('prom-client is imported only in metrics/, and lib/metrics.ts imports nothing', () => {
    const root = resolve(import.meta.dirname, '..', '..');
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir)) {
        const p = join(dir, e);
        if (statSync(p).isDirectory()) {
          if (e !== 'node_modules' && e !== 'dist' && !e.startsWith('.')) walk(p);
        } else if (p.endsWith('.ts')) {
          const rel = relative(root, p);
          if (/from\s+['"]prom-client['"]|import\(\s*['"]prom-client['"]\s*\)/.test(readFileSync(p, 'utf8')) && !rel.startsWith('metrics/')) offenders.push(rel);
        }
      }
    };
    walk(root);
    expect(offenders).to.deep.equal([]);
    expect(readFileSync(join(root, 'lib', 'metrics.ts'), 'utf8')).to.not.match(/^\s*import\s/m);
  });
});
