import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { startService, type RunningService } from '../../bin/service.js';
import { withinLimits, type GrantLimits } from '../../policy-engine/index.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { client, type ApiClient } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';

/**
 * Spending mandates across nodes (issue 26, items 2 and 5): two services on one store
 * (MySQL when DATABASE_URL says so), each with its own proxy and its own cached grants. A
 * grant's total and uses are spent by one conditional UPDATE per request, so two nodes
 * spending the last $10 of a grant at once let exactly one charge through and the other
 * asks; and, as a property, however many requests race on a grant from both nodes, the
 * grant never covers one outside its limits and never refuses one that still fits.
 */
describe('spending mandates across nodes: the last of a total is spent once (issue 26)', function () {
  this.timeout(180_000);
  const masterKey = randomBytes(32);
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-mandate-'));
  const db = freshDatabaseUrl();
  const key = `sk_${randomBytes(20).toString('hex')}`;
  let up: FakeUpstream;
  let a: RunningService;
  let b: RunningService;
  let apiA: ApiClient;
  let apiB: ApiClient;
  let envId: string;
  let developerId: string;
  let gwA: Gateway;
  let gwB: Gateway;
  let placeholder: string;

  async function node(): Promise<RunningService> {
    const config = loadConfig({
      DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'none',
      GATEWAY_MASTER_KEY: masterKey.toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'silent',
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dataDir, 'upstream-ca.pem'),
    });
    return startService(config, silentLogger, { waitPollMs: 50 });
  }

  before(async () => {
    up = await startFakeUpstream();
    writeFileSync(join(dataDir, 'upstream-ca.pem'), up.ca.certPem);
    a = await node();
    b = await node();
    apiA = client(a.apiUrl, key);
    apiB = client(b.apiUrl, key);
    const created = await apiA.post('/v1/environments', {
      end_user_id: 'mandate-user',
      egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_mandateclustermandate', allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status, created.text).to.equal(201);
    envId = created.body.id;
    developerId = (await a.db('environments').where({ id: envId }).first('developer_id')).developer_id;
    gwA = (await apiA.get(`/v1/environments/${envId}/gateway`)).body;
    // The same environment through node B's proxy.
    gwB = (await apiB.get(`/v1/environments/${envId}/gateway`)).body;
    expect(gwB.proxy_url).to.not.equal(gwA.proxy_url);
    placeholder = (await apiA.get(`/v1/environments/${envId}/secrets`)).body.data[0].placeholder;
    const policy = await apiA.put(`/v1/environments/${envId}/policy`, { rules: [{ category: 'pay', effect: 'ask' }, { category: 'read', effect: 'allow' }] });
    expect(policy.status, policy.text).to.equal(200);
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await up?.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  type Answer = { status: number };
  let n = 0;
  const known = new Set<string>();
  function charge(gw: Gateway, minor: number, task: string): { path: string; answer: Promise<Answer> } {
    const path = `/v1/charges?m=${++n}`;
    const agent = proxyAgent(gw);
    const answer = request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body: `amount=${minor}&currency=usd`,
      headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded', 'x-service-task-id': task },
    }).then(async (r) => {
      await r.body.dump();
      return { status: r.statusCode };
    }).finally(() => agent.close().catch(() => {}));
    return { path, answer };
  }
  const forwarded = (path: string) => up.seen.filter((s) => s.url === path).length;

  async function newPending(count: number): Promise<string[]> {
    for (let i = 0; i < 2000; i++) {
      const pending = (await apiA.get(`/v1/approvals?environment_id=${envId}&status=pending`)).body.data as Array<{ id: string }>;
      const fresh = pending.filter((p) => !known.has(p.id)).map((p) => p.id);
      if (fresh.length >= count) {
        for (const id of fresh) known.add(id);
        return fresh;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`fewer than ${count} new approvals`);
  }

  /**
   * Each node decides from its cache, both showing $10 left: once every entry is older than
   * refreshMs (1 s), a check on each node loads the environment's grants there afresh.
   */
  async function warm(): Promise<void> {
    await new Promise((r) => setTimeout(r, 1100));
    for (const api of [apiA, apiB]) {
      const r = await api.post(`/v1/environments/${envId}/policy/check`, { connector: 'secret:STRIPE_KEY', category: 'pay' });
      expect(r.status, r.text).to.equal(200);
    }
  }

  it('two nodes spending the last $10 at once: one charge passes, the other asks as a new approval', async () => {
    for (let round = 0; round < 5; round++) {
      const task = `last-ten-${round}`;
      // $70 held on node A and approved with a total of $80: $10 is left.
      const first = charge(gwA, 7000, task);
      const [id] = await newPending(1);
      const decided = await apiB.post(`/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: task }, limits: { total_minor_units: 8000, currency: 'usd' } });
      expect(decided.status, decided.text).to.equal(200);
      expect((await first.answer).status).to.equal(200);
      await warm();
      const [x, y] = [charge(gwA, 1000, task), charge(gwB, 1000, task)];
      // One is answered 200 (forwarded); the other is held for a new approval.
      const [held] = await newPending(1);
      const passed = await Promise.race([x.answer, y.answer]);
      expect(passed.status).to.equal(200);
      expect(forwarded(x.path) + forwarded(y.path), 'exactly one of the two was forwarded').to.equal(1);
      expect((await apiA.post(`/v1/approvals/${held}/decision`, { decision: 'deny' })).status).to.equal(200);
      const answers = [(await x.answer).status, (await y.answer).status].sort();
      expect(answers).to.deep.equal([200, 403]);
      const g = await a.db('grants').where({ id: decided.body.grant_id }).first();
      expect({ used: Number(g.used_minor_units), uses: Number(g.uses) }).to.deep.equal({ used: 8000, uses: 2 });
    }
  });

  it('property: requests racing on one grant from both nodes never spend past its limits, and every refused one did not fit', async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          per: fc.option(fc.integer({ min: 1, max: 5000 }), { nil: undefined }),
          total: fc.option(fc.integer({ min: 1, max: 20000 }), { nil: undefined }),
          max_uses: fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
        }),
        fc.array(fc.record({ minor: fc.integer({ min: 0, max: 6000 }), currency: fc.constantFrom('usd', 'usd', 'usd', 'eur'), node: fc.boolean(), readable: fc.boolean() }), { minLength: 1, maxLength: 12 }),
        async (l, requests) => {
          const limits: GrantLimits = {
            ...(l.per !== undefined ? { per_request_minor_units: l.per } : {}),
            ...(l.total !== undefined ? { total_minor_units: l.total } : {}),
            ...(l.per !== undefined || l.total !== undefined ? { currency: 'usd' } : {}),
            ...(l.max_uses !== undefined ? { max_uses: l.max_uses } : {}),
          };
          if (Object.keys(limits).length === 0) return;
          // The approved request: the smallest amount the limits take (1 minor unit).
          const firstFacts = { amount: { currency: 'usd', minor_units: 1 } };
          const apr = await a.approvals.requestApproval({
            developerId, environmentId: envId, connector: 'secret:STRIPE_KEY', category: 'pay', method: 'POST', host: 'api.stripe.com',
            path: '/v1/charges', task_id: `prop-${++round}`, max_scope: 'permanent', facts: firstFacts,
          });
          known.add(apr.id);
          const decided = await apiA.post(`/v1/approvals/${apr.id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: `prop-${round}` }, limits });
          if (limits.total_minor_units === undefined || limits.total_minor_units >= 1) expect(decided.status, decided.text).to.equal(200);
          const grantId = decided.body.grant_id as string;
          const facts = requests.map((r) => ({ amount: r.readable ? { currency: r.currency, minor_units: r.minor } : null }));
          const results = await Promise.all(requests.map((r, i) => (r.node ? a : b).approvals.consumeGrant(developerId, grantId, facts[i]!)));
          const row = await a.db('grants').where({ id: grantId }).first();
          const used = { minor_units: Number(row.used_minor_units), uses: Number(row.uses) };
          const spent = requests.reduce((sum, r, i) => sum + (results[i] ? r.minor : 0), 0);
          const passed = results.filter(Boolean).length;
          const amountLimited = limits.currency !== undefined;
          // What was spent is exactly what passed (the approved request first).
          expect(used).to.deep.equal({ minor_units: (amountLimited ? 1 + spent : 0), uses: 1 + passed });
          // Never past a limit.
          if (limits.total_minor_units !== undefined) expect(used.minor_units).to.be.at.most(limits.total_minor_units);
          if (limits.max_uses !== undefined) expect(used.uses).to.be.at.most(limits.max_uses);
          requests.forEach((r, i) => {
            const f = facts[i]!;
            // Every request that passed was within the limits on its own (currency, per request).
            if (results[i]) expect(withinLimits(limits, null, f), `passed: ${JSON.stringify(f)}`).to.equal(true);
            // Every refused one did not fit even what was left at the end (used only grows).
            else expect(withinLimits(limits, used, f), `refused but fits: ${JSON.stringify(f)}`).to.equal(false);
          });
        },
      ),
      { numRuns: 25 },
    );
  });
});
