/**
 * Policy evaluation throughput: naive (arrays) versus compiled (compilePolicy + GrantIndex),
 * for a 100-rule policy and 1,000 grants in the environment. Target from the issue:
 * > 200,000 evaluations/s on one core. Printed comparison, never a timed assertion
 * (ARCHITECTURE.md "bench/").
 *
 *   npx tsx bench/policy/evaluate.bench.ts
 */
import { CATEGORIES, HIGH_RISK, SCOPES, type Category, type GrantScope, type Scope } from '../../policy-engine/categories.js';
import { compilePolicy, evaluate, evaluateNaive, GrantIndex, type Decision, type GrantLike, type PolicyRequest } from '../../policy-engine/evaluate.js';
import { validateRules, type Rule } from '../../policy-engine/rules.js';

// Deterministic PRNG (mulberry32) so runs compare.
let seed = 0x5eed;
function rand(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0);
const CONNECTORS = ['gmail', 'calendar', 'slack', ...Array.from({ length: 30 }, (_, i) => `secret:S${i}`)];
const TASKS = Array.from({ length: 50 }, (_, i) => `task_${i}`);
const SESSIONS = Array.from({ length: 20 }, (_, i) => `sess_${i}`);

function makeRule(): Rule {
  const r: { connector?: string; category?: Category; effect: Rule['effect']; max_scope?: Scope } = { effect: 'allow' };
  const e = rand();
  r.effect = e < 0.1 ? 'deny' : e < 0.4 ? 'ask' : 'allow';
  // Mostly specific rules, a few connector-wide ones, and wildcards only for allow.
  if (r.effect === 'allow' ? rand() < 0.95 : true) r.connector = pick(CONNECTORS);
  if (r.effect !== 'allow' || rand() < 0.8) r.category = pick(CATEGORIES);
  if (r.effect === 'allow' && r.category && HIGH_RISK.has(r.category)) r.category = pick(['read', 'write'] as const);
  if (r.effect === 'ask' && rand() < 0.7) r.max_scope = pick(SCOPES);
  return r;
}

function makeGrant(i: number): GrantLike {
  const scope = pick(['task', 'session', 'time_limited', 'permanent'] as const satisfies readonly GrantScope[]);
  return {
    id: `grt_${i.toString(16).padStart(24, '0')}`,
    connector: pick(CONNECTORS),
    category: pick(CATEGORIES),
    scope,
    task_id: scope === 'task' ? pick(TASKS) : null,
    session_id: scope === 'session' ? pick(SESSIONS) : null,
    expires_at: scope === 'time_limited' ? NOW + Math.floor((rand() - 0.5) * 3_600_000) : null,
  };
}

function makeRequest(): PolicyRequest {
  return {
    connector: pick(CONNECTORS),
    category: pick(CATEGORIES),
    task_id: rand() < 0.7 ? pick(TASKS) : null,
    session_id: rand() < 0.7 ? pick(SESSIONS) : null,
  };
}

const rulesIn = Array.from({ length: 100 }, makeRule);
const valid = validateRules(rulesIn);
if (!valid.ok) throw new Error(`bench policy invalid: ${valid.message}`);
const rules = valid.rules;
const grants = Array.from({ length: 1000 }, (_, i) => makeGrant(i));
const requests = Array.from({ length: 4096 }, makeRequest);
const opts = { nowMs: NOW };

function measure(name: string, f: (req: PolicyRequest) => Decision, minMs = 1500): number {
  for (let i = 0; i < 20_000; i++) f(requests[i & 4095]!); // warm-up
  let n = 0;
  let sink = 0;
  const start = process.hrtime.bigint();
  let elapsedMs = 0;
  while (elapsedMs < minMs) {
    for (let i = 0; i < 10_000; i++, n++) sink += f(requests[n & 4095]!).matched_rules.length;
    elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;
  }
  const perSec = (n / elapsedMs) * 1000;
  console.log(`${name.padEnd(44)} ${Math.round(perSec).toLocaleString('en-US').padStart(12)} evaluations/s  (${n.toLocaleString('en-US')} in ${elapsedMs.toFixed(0)} ms, sink ${sink % 997})`);
  return perSec;
}

function time(name: string, f: () => unknown, reps: number): void {
  const start = process.hrtime.bigint();
  for (let i = 0; i < reps; i++) f();
  const us = Number(process.hrtime.bigint() - start) / 1e3 / reps;
  console.log(`${name.padEnd(44)} ${us.toFixed(1).padStart(12)} µs`);
}

const compiled = compilePolicy(rules);
const index = new GrantIndex(grants);

// Agreement and the decision mix, so the numbers are not measuring a trivial policy.
const mix = new Map<string, number>();
for (const req of requests) {
  const a = evaluateNaive(rules, req, grants, opts);
  const b = evaluate(compiled, req, index, opts);
  if (JSON.stringify(a) !== JSON.stringify(b) || a.grant !== b.grant) throw new Error(`disagree on ${JSON.stringify(req)}`);
  mix.set(`${a.decision}/${a.reason}`, (mix.get(`${a.decision}/${a.reason}`) ?? 0) + 1);
}

console.log(`node ${process.version}, ${rules.length} rules, ${grants.length} grants, ${requests.length} distinct requests`);
console.log(`decision mix: ${[...mix].sort().map(([k, v]) => `${k} ${((v / requests.length) * 100).toFixed(1)}%`).join(', ')}`);
console.log('naive and compiled agree on every request\n');
const naive = measure('naive   evaluateNaive(rules[], grants[])', (req) => evaluateNaive(rules, req, grants, opts));
const fast = measure('compiled evaluate(CompiledPolicy, GrantIndex)', (req) => evaluate(compiled, req, index, opts));
console.log(`\nspeed-up ${(fast / naive).toFixed(1)}x; target 200,000/s: ${fast > 200_000 ? 'met' : 'NOT met'}\n`);
time('compilePolicy(100 rules)', () => compilePolicy(rules), 200);
time('new GrantIndex(1,000 grants)', () => new GrantIndex(grants), 200);

// Conditions (issue 26): one rule in ten gets `when` (checked per request after the table
// lookup); requests carry decoded facts and counts. Rules without conditions cost what
// they did above.
const conditional: Rule[] = rules.map((r, i) => {
  if (i % 10 !== 0 || (r.effect === 'allow' && r.category === undefined)) return r;
  return { ...r, when: i % 20 === 0 ? { amount_over: { currency: 'usd', minor_units: 5000 } } : { count_over: { max: 50, per: 'hour' as const } } };
});
const compiledC = compilePolicy(conditional);
const withFacts = requests.map((req, i) => ({ ...req, facts: { amount: { currency: 'usd', minor_units: (i * 37) % 10_000 } }, counts: new Map([[10, i % 80], [30, i % 60]]) }));
for (let i = 0; i < withFacts.length; i++) {
  const a = evaluateNaive(conditional, withFacts[i]!, grants, opts);
  const b = evaluate(compiledC, withFacts[i]!, index, opts);
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`disagree with conditions on ${JSON.stringify(withFacts[i])}`);
}
const factsOfReq = new Map(requests.map((r, i) => [r, withFacts[i]!]));
measure('compiled, 10% of rules with conditions', (req) => evaluate(compiledC, factsOfReq.get(req)!, index, opts));
