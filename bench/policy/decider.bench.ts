/**
 * Policy decisions per second through the PolicyDecider cache (policies/decider.ts) versus
 * a database round trip per decision, for an environment with a 100-rule policy and 1,000
 * grants in a real store (SQLite in a temp dir, or MySQL when DATABASE_URL says so).
 * Issue target: > 200,000 decisions/s with no store round trip per request while nothing
 * changed. Printed comparison, never a timed assertion (ARCHITECTURE.md "bench/").
 *
 *   npx tsx bench/policy/decider.bench.ts
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/gw_bench npx tsx bench/policy/decider.bench.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createDb, parseDatabaseUrl, toJson, type Db } from '../../store/db.js';
import { migrateLatest } from '../../store/migrate.js';
import { createAccountsService } from '../../accounts/accounts.service.js';
import { createApprovalsService } from '../../approvals/approvals.service.js';
import type { GrantRow } from '../../approvals/grants.store.js';
import { createPoliciesService } from '../../policies/policies.service.js';
import { CATEGORIES, HIGH_RISK, SCOPES, evaluate, validateRules, type Category, type PolicyRequest, type Rule, type Scope } from '../../policy-engine/index.js';

// Deterministic PRNG (mulberry32), as bench/policy/evaluate.bench.ts.
let seed = 0x5eed;
function rand(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const CONNECTORS = ['gmail', 'calendar', 'slack', ...Array.from({ length: 30 }, (_, i) => `secret:S${i}`)];
const TASKS = Array.from({ length: 50 }, (_, i) => `task_${i}`);
const SESSIONS = Array.from({ length: 20 }, (_, i) => `sess_${i}`);
const DEV = 'dev_bench00000000000000000001';
const ENV = 'env_bench00000000000000000001';

function makeRule(): Rule {
  const r: { connector?: string; category?: Category; effect: Rule['effect']; max_scope?: Scope } = { effect: 'allow' };
  const e = rand();
  r.effect = e < 0.1 ? 'deny' : e < 0.4 ? 'ask' : 'allow';
  if (r.effect === 'allow' ? rand() < 0.95 : true) r.connector = pick(CONNECTORS);
  if (r.effect !== 'allow' || rand() < 0.8) r.category = pick(CATEGORIES);
  if (r.effect === 'allow' && r.category && HIGH_RISK.has(r.category)) r.category = pick(['read', 'write'] as const);
  if (r.effect === 'ask' && rand() < 0.7) r.max_scope = pick(SCOPES);
  return r;
}

async function openDb(): Promise<{ db: Db; cleanup: () => Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (url && /^(mysql|mariadb):/.test(url)) {
    const target = parseDatabaseUrl(url);
    if (!target) throw new Error(`bad DATABASE_URL ${url}`);
    const db = await createDb(target);
    await migrateLatest(db);
    return { db, cleanup: async () => { await db('grants').where({ developer_id: DEV }).delete(); await db('policies').where({ developer_id: DEV }).delete(); await db.destroy(); } };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  const db = await createDb({ client: 'sqlite', filename: join(dir, 'bench.sqlite') });
  await migrateLatest(db);
  return { db, cleanup: async () => { await db.destroy(); rmSync(dir, { recursive: true, force: true }); } };
}

async function main(): Promise<void> {
  const { db, cleanup } = await openDb();
  const clock = new ServiceClock();
  try {
    await createAccountsService({ db, clock }).ensureDeveloper(DEV, 'bench');
    const valid = validateRules(Array.from({ length: 100 }, makeRule));
    if (!valid.ok) throw new Error(valid.message);
    const now = clock.nowMs();
    await db('policies').insert({ developer_id: DEV, scope: ENV, rules: toJson(valid.rules), created_at: now, updated_at: now });
    const grants: GrantRow[] = Array.from({ length: 1000 }, (_, i) => {
      const scope = pick(['task', 'session', 'time_limited', 'permanent'] as const);
      return {
        id: `grt_${i.toString(16).padStart(24, '0')}`, developer_id: DEV, environment_id: ENV,
        connector: pick(CONNECTORS), category: pick(CATEGORIES), scope,
        task_id: scope === 'task' ? pick(TASKS) : null, session_id: scope === 'session' ? pick(SESSIONS) : null,
        expires_at: scope === 'time_limited' ? now + Math.floor(rand() * 3_600_000) : null,
        approval_id: `apr_${i.toString(16).padStart(24, '0')}`, created_at: now + i, revoked_at: null,
      };
    });
    for (let i = 0; i < grants.length; i += 100) await db('grants').insert(grants.slice(i, i + 100));

    const approvals = createApprovalsService({ db, clock, log: silentLogger, baseUrl: () => 'http://bench', signingSecrets: async () => [] });
    const make = (refreshMs: number) => createPoliciesService({
      db, clock,
      environments: { get: async () => { throw new Error('not used'); } },
      loadGrants: approvals.grantsInEffect,
      isInfrastructureSecret: async () => false,
      refreshMs,
    });
    const requests: PolicyRequest[] = Array.from({ length: 4096 }, () => ({
      connector: pick(CONNECTORS), category: pick(CATEGORIES),
      task_id: rand() < 0.7 ? pick(TASKS) : null, session_id: rand() < 0.7 ? pick(SESSIONS) : null,
    }));

    let queries = 0;
    db.on('query', () => queries++);

    async function measure(name: string, decide: (r: PolicyRequest) => Promise<unknown>, minMs: number): Promise<number> {
      for (let i = 0; i < 50; i++) await decide(requests[i & 4095]!); // warm-up (and the first load)
      const q0 = queries;
      let n = 0;
      const start = process.hrtime.bigint();
      let elapsedMs = 0;
      while (elapsedMs < minMs) {
        for (let i = 0; i < 1000; i++, n++) await decide(requests[n & 4095]!);
        elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;
      }
      const perSec = (n / elapsedMs) * 1000;
      const q = queries - q0;
      console.log(`${name.padEnd(58)} ${Math.round(perSec).toLocaleString('en-US').padStart(12)} decisions/s   ${String(q).padStart(7)} store queries for ${n.toLocaleString('en-US')} decisions`);
      return perSec;
    }

    console.log(`PolicyDecider: 100 rules, ${grants.length} grants, ${db.client.config.client} store\n`);
    const cached = make(1000).decider;
    const fast = await measure('through the cache (refresh every 1000 ms)', (r) => cached.decide(DEV, ENV, r), 2000);
    const uncached = make(0).decider;
    const slow = await measure('DB round trip per decision (refreshMs 0: policy + grants)', (r) => uncached.decide(DEV, ENV, r), 2000);
    // The cheapest honest alternative without a cache: per decision, read the policy row and
    // only the grants of that connector and category (indexed), then evaluate.
    const targeted = async (r: PolicyRequest) => {
      const [row] = await db('policies').where({ developer_id: DEV }).whereIn('scope', [ENV, '*']);
      const rows: GrantRow[] = await db('grants')
        .where({ developer_id: DEV, environment_id: ENV, connector: r.connector, category: r.category })
        .whereNull('revoked_at');
      const gs = rows.map((g) => ({ ...g, category: g.category as Category, expires_at: g.expires_at == null ? null : Number(g.expires_at), limits: g.limits ? JSON.parse(g.limits) : null }));
      return evaluate(JSON.parse(row.rules) as Rule[], r, gs, { nowMs: clock.nowMs() });
    };
    await measure('DB round trip per decision (policy + matching grants only)', targeted, 2000);
    console.log(`\ncache speed-up: ${(fast / slow).toFixed(0)}x; target > 200,000/s through the cache: ${fast > 200_000 ? 'met' : 'NOT met'}`);
    approvals.close();
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
