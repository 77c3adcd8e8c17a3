/**
 * Decision → release across nodes (issue 25, item 6; docs/deploy.md, "Nodes").
 *
 * Two `gateway start` processes (nodes A and B, GATEWAY_RUNTIME=none, from this checkout's
 * sources under tsx) on one fresh MySQL database, sharing the master key and the CA. This
 * process is the agent (undici ProxyAgent through node A's proxy) and the upstream (a local
 * HTTPS server that notes when each request arrives). Every round holds one charge on node
 * A (policy `ask`) and decides it, in turn:
 *
 *   same node   decided through node A's API: the in-process announce (the single-node figure);
 *   other node  decided through node B's API: B pokes A over A's node RPC;
 *   store only  the approval row updated in the store by a client that is no node (what an
 *               older process would do): nothing pokes A, its 1 s store poll finds it.
 *
 * Measured per round, on this process's clock: from the decision's answer (and from the
 * decision being sent) to the upstream receiving the released request. The forward itself
 * (a kept-alive connection to the upstream) is in every figure alike. Then a burst: BURST
 * requests held at once on A, all decided at once on B, time from the last answer to each
 * arrival.
 *
 * Printed comparison, never a timed assertion (ARCHITECTURE.md "bench/").
 *
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/gw_bench npx tsx bench/cluster/run.ts
 *   npx tsx bench/cluster/run.ts --rounds=60 --poll-rounds=10 --burst=200
 *
 * Options (flag or environment variable):
 *   --db           DATABASE_URL        MySQL base URL; a database <name>_<random> is made and dropped
 *                                      (default mysql://root@127.0.0.1:3306/gw_bench)
 *   --rounds       BENCH_ROUNDS        rounds per mode for same node and other node (40)
 *   --poll-rounds  BENCH_POLL_ROUNDS   rounds of the store-only mode (10; each waits for a poll)
 *   --burst        BENCH_BURST         requests held at once, then decided at once on B (100; 0 skips)
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ProxyAgent, request } from 'undici';
import knexFactory from 'knex';
import { startChildService, type ChildService } from '../../test/helpers/child-service.js';
import { startFakeUpstream } from '../../test/helpers/upstream.js';
import { parseDatabaseUrl } from '../../store/db.js';

function opt(name: string, env: string, dflt: string): string {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  return flag ? flag.slice(name.length + 3) : process.env[env] ?? dflt;
}

const ROUNDS = Number(opt('rounds', 'BENCH_ROUNDS', '40'));
const POLL_ROUNDS = Number(opt('poll-rounds', 'BENCH_POLL_ROUNDS', '10'));
const BURST = Number(opt('burst', 'BENCH_BURST', '100'));
const DB_BASE = opt('db', 'DATABASE_URL', 'mysql://root@127.0.0.1:3306/gw_bench');

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
const f = (ms: number) => `${ms.toFixed(1)} ms`;

async function main(): Promise<void> {
  if (!/^(mysql|mariadb):\/\//.test(DB_BASE)) throw new Error('bench/cluster needs MySQL (DATABASE_URL=mysql://...): several processes share one store');
  const u = new URL(DB_BASE.replace(/^mariadb:/, 'mysql:'));
  u.pathname = `/${(u.pathname.slice(1) || 'gw_bench').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const dbUrl = u.toString();
  const target = parseDatabaseUrl(dbUrl);
  if (!target || target.client !== 'mysql') throw new Error(`bad DATABASE_URL: ${DB_BASE}`);
  const root = mkdtempSync(join(tmpdir(), 'gw-bench-cluster-'));
  const up = await startFakeUpstream();
  const arrived = new Map<string, number>();
  const respond = up.respond;
  up.respond = (req, res) => {
    arrived.set(req.url, performance.now());
    respond(req, res);
  };
  writeFileSync(join(root, 'upstream-ca.pem'), up.ca.certPem);
  const key = `sk_${randomBytes(20).toString('hex')}`;
  const shared = {
    DATABASE_URL: dbUrl, API_PORT: '0', PROXY_PORT: '0', LOG_LEVEL: 'info', GATEWAY_RUNTIME: 'none',
    GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key,
    GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(root, 'upstream-ca.pem'),
  };
  let a: ChildService | null = null;
  let b: ChildService | null = null;
  const store = knexFactory({ client: 'mysql2', connection: { host: target.host, port: target.port, user: target.user, password: target.password, database: target.database }, pool: { min: 0, max: 2 } });
  try {
    a = await startChildService({ ...shared, DATA_DIR: join(root, 'a') }, { timeoutMs: 120_000 });
    cpSync(join(root, 'a', 'ca'), join(root, 'b', 'ca'), { recursive: true });
    b = await startChildService({ ...shared, DATA_DIR: join(root, 'b') }, { timeoutMs: 120_000 });
    const api = (base: string) => async (method: string, path: string, body?: unknown): Promise<any> => {
      const r = await request(`${base}${path}`, {
        method: method as 'GET', body: body === undefined ? undefined : JSON.stringify(body),
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      });
      const text = await r.body.text();
      if (r.statusCode >= 300) throw new Error(`${method} ${path}: ${r.statusCode} ${text}`);
      return text ? JSON.parse(text) : null;
    };
    const apiA = api(a.ready.api_url);
    const apiB = api(b.ready.api_url);
    const env = await apiA('POST', '/v1/environments', {
      end_user_id: 'bench-cluster', egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_benchclusterbenchcluster', allowed_hosts: ['api.stripe.com'] } },
    });
    await apiA('PUT', `/v1/environments/${env.id}/policy`, { rules: [{ category: 'pay', effect: 'ask' }] });
    const gw = await apiA('GET', `/v1/environments/${env.id}/gateway`);
    const placeholder = (await apiA('GET', `/v1/environments/${env.id}/secrets`)).data[0].placeholder;
    const proxy = new URL(gw.proxy_url);
    const agent = new ProxyAgent({
      uri: `${proxy.protocol}//${proxy.host}`,
      token: `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}`,
      requestTls: { ca: gw.ca_cert_pem }, connections: Math.max(8, BURST + 8),
    });
    let n = 0;
    const send = (path: string) => request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body: 'amount=1',
      headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded' },
    }).then(async (r) => {
      await r.body.dump();
      return r.statusCode;
    });
    const pendingIds = async (want: number): Promise<string[]> => {
      for (;;) {
        const rows = await store('approvals').where({ environment_id: env.id, status: 'pending' }).select('id');
        if (rows.length >= want) return rows.map((r: { id: string }) => r.id);
        await new Promise((r) => setTimeout(r, 2));
      }
    };

    type Mode = 'same node' | 'other node' | 'store only';
    const results: Record<Mode, { fromAnswer: number[]; fromSent: number[] }> = {
      'same node': { fromAnswer: [], fromSent: [] }, 'other node': { fromAnswer: [], fromSent: [] }, 'store only': { fromAnswer: [], fromSent: [] },
    };
    const round = async (mode: Mode): Promise<void> => {
      const path = `/v1/charges?bench=${++n}`;
      const answer = send(path);
      const [id] = await pendingIds(1);
      const sent = performance.now();
      if (mode === 'store only') {
        await store('approvals').where({ id, status: 'pending' }).update({ status: 'approved', scope: 'once', decided_via: 'api_key', decided_at: Date.now(), grant_id: null });
      } else {
        await (mode === 'same node' ? apiA : apiB)('POST', `/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'once' } });
      }
      const answered = performance.now();
      const status = await answer;
      if (status !== 200) throw new Error(`${mode}: the released request answered ${status}`);
      const at = arrived.get(path)!;
      results[mode].fromAnswer.push(at - answered);
      results[mode].fromSent.push(at - sent);
    };
    // Warm-up (connections, JIT), unmeasured.
    for (const m of ['same node', 'other node'] as const) for (let i = 0; i < 3; i++) await round(m);
    for (const m of Object.values(results)) {
      m.fromAnswer.length = 0;
      m.fromSent.length = 0;
    }
    // Interleaved, so drift on this machine lands on both alike.
    for (let i = 0; i < ROUNDS; i++) {
      await round(i % 2 ? 'other node' : 'same node');
      await round(i % 2 ? 'same node' : 'other node');
    }
    for (let i = 0; i < POLL_ROUNDS; i++) await round('store only');

    console.log(`\nbench/cluster: two gateway start nodes on one MySQL (${target.host}:${target.port}), ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`decision → the held request reaches the upstream (rounds: ${ROUNDS} same node, ${ROUNDS} other node, ${POLL_ROUNDS} store only)\n`);
    console.log('| decided | from the answer p50 | p95 | max | from the send p50 | p95 |');
    console.log('|---|---|---|---|---|---|');
    for (const [mode, r] of Object.entries(results)) {
      if (r.fromAnswer.length === 0) continue;
      console.log(`| ${mode} | ${f(pct(r.fromAnswer, 50))} | ${f(pct(r.fromAnswer, 95))} | ${f(Math.max(...r.fromAnswer))} | ${f(pct(r.fromSent, 50))} | ${f(pct(r.fromSent, 95))} |`);
    }

    // Bursts: BURST held at once, decided at once through one node's API, same node then other node.
    for (const [mode, decide] of [['same node', apiA], ['other node', apiB]] as const) {
      if (BURST <= 0) break;
      const paths = Array.from({ length: BURST }, () => `/v1/charges?burst=${++n}`);
      const answers = paths.map(send);
      const ids = await pendingIds(BURST);
      const sent = performance.now();
      await Promise.all(ids.map((id) => decide('POST', `/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'once' } })));
      const answered = performance.now();
      const statuses = await Promise.all(answers);
      if (statuses.some((s) => s !== 200)) throw new Error(`burst: answers ${[...new Set(statuses)].join(',')}`);
      const fromSent = paths.map((p) => arrived.get(p)! - sent);
      const after = paths.map((p) => arrived.get(p)! - answered);
      console.log(`\nburst, ${mode}: ${BURST} held on A at once, decided at once through ${mode === 'same node' ? 'A' : 'B'}: the ${BURST} decisions answered within ${f(answered - sent)};`);
      console.log(`  forwarded, from the decisions sent: p50 ${f(pct(fromSent, 50))}, p95 ${f(pct(fromSent, 95))}, last ${f(Math.max(...fromSent))}; the last one ${f(Math.max(...after))} after the last answer`);
    }
    await agent.close();
  } finally {
    await b?.stop();
    await a?.stop();
    await up.close();
    await store.raw('DROP DATABASE IF EXISTS ??', [target.database]).catch(() => {});
    await store.destroy();
    rmSync(root, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
