/**
 * Gateway throughput, latency and CPU: the same load against
 *   direct        a local HTTPS upstream, no proxy;
 *   raw           RAW http-mitm-proxy 1.1.0, library defaults (keepAlive: false);
 *   raw-ka        RAW http-mitm-proxy 1.1.0 with keepAlive: true;
 *   gateway       OUR gateway: the real service (startService, SQLite) with an allow rule,
 *                 a secret placeholder swapped for the real key on every request, and an
 *                 audit entry written for every request;
 * then a hold test: BENCH_HOLD requests (default 10,000) held for approval at once
 * (policy `ask`), the gateway's RSS while they wait, then half approved and half denied
 * through the approvals service, checking that every one is released with the right answer.
 *
 * Printed comparison, never a timed assertion (ARCHITECTURE.md "bench/"). Loopback only.
 * Every server runs in a child process of its own so its CPU time is its own (ipc.ts).
 * Loads: small GET, 1 MiB GET, 1 KiB JSON POST; each with keep-alive (a pool of
 * BENCH_CONCURRENCY connections, pipelining 1) and with a fresh connection per request
 * (a new undici dispatcher per request, so a new CONNECT tunnel and a full TLS handshake
 * with the proxy, no session resumption), and "resumed": the same, every connection offering
 * a TLS session the target issued before, as an agent's HTTPS client that keeps its sessions
 * does (the output says whether each target resumed it). Targets are INTERLEAVED: every round runs a short
 * slice of every (load, target) cell, rotating the order, so drift and noise on this
 * 2-core machine land on every target alike; cells sum their slices.
 *
 *   npx tsx bench/gateway/run.ts
 *   npx tsx bench/gateway/run.ts --rounds=5 --slice-ms=2000 --concurrency=32 --hold=0
 *   BENCH_TARGETS=gateway BENCH_PROFILE=/tmp/prof npx tsx bench/gateway/run.ts   # --cpu-prof the gateway
 *
 * Options (flag or environment variable):
 *   --rounds        BENCH_ROUNDS       rounds of slices (3)
 *   --slice-ms      BENCH_SLICE_MS     measured milliseconds per cell per round (1000)
 *   --warmup-ms     BENCH_WARMUP_MS    unmeasured load before each slice (200)
 *   --concurrency   BENCH_CONCURRENCY  requests in flight per cell (16)
 *   --hold          BENCH_HOLD         requests held at once in the hold test (10000; 0 skips it)
 *   --targets       BENCH_TARGETS      subset of direct,raw,raw-ka,gateway
 *   --loads         BENCH_LOADS        subset of small,large,post
 *   --modes         BENCH_MODES        subset of keepalive,fresh,resumed
 *   --client        BENCH_CLIENT       undici (default): undici's ProxyAgent/Agent, a new one per fresh
 *                                      request; lean: lean-client.ts (node:net + node:tls, requests
 *                                      written and parsed by hand, as wrk would), whose own CPU per new
 *                                      connection is a fraction of undici's, so the machine's two cores
 *                                      go to the proxies (issue 29, item 4)
 *   --profile       BENCH_PROFILE      directory: run the gateway under node --cpu-prof
 *   --json          BENCH_JSON         also write the results as JSON to this file
 *   --heap-snapshot BENCH_HEAP_SNAPSHOT  write a heap snapshot of the gateway to this file while
 *                                      the hold test's requests wait (heap-summary.ts reads it)
 *   --heap-profile  BENCH_HEAP_PROFILE   likewise a sampling heap profile (what is live, by the
 *                                      stack that allocated it; heap-summary.ts reads it too)
 *   --gateway-db    BENCH_GATEWAY_DB   mysql://user:pass@host:port/name: the gateway's store is MySQL (a
 *                                      database name_<random> made for the run and dropped after);
 *                                      default SQLite in the temp dir, as `npm start`
 *   --compiled      BENCH_COMPILED     1 (default): the gateway runs from dist/ as `npm start` runs it
 *                                      (built first when stale); 0: its sources under tsx
 *   --compare       BENCH_COMPARE      another checkout of this repository: its gateway runs too,
 *                                      as target gateway-b, interleaved with ours (A/B of a change)
 *   --metrics-ab    BENCH_METRICS_AB   1: a second gateway of this checkout runs with the no-op Metrics port
 *                                      (startService's `metrics: false`: no prom-client, no /metrics), as
 *                                      target gateway-nometrics, interleaved with ours; a table of the two
 *                                      side by side closes the run (issue 25, item 2: metrics cost < 3 %)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync, existsSync, statSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { connect as tlsConnect, createSecureContext, type SecureContext } from 'node:tls';
import { Agent, ProxyAgent, type Dispatcher } from 'undici';
import knexFactory from 'knex';
import { parseDatabaseUrl, type DbTarget } from '../../store/db.js';
import { startChild, type Child } from './ipc.js';
import { LeanConnection, openTunnel, type LeanResponse } from './lean-client.js';

// ---- options ---------------------------------------------------------------------------

function option(name: string, env: string, dflt: string): string {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  return flag ? flag.slice(name.length + 3) : process.env[env] ?? dflt;
}
const ROUNDS = Number(option('rounds', 'BENCH_ROUNDS', '3'));
const SLICE_MS = Number(option('slice-ms', 'BENCH_SLICE_MS', '1000'));
const WARMUP_MS = Number(option('warmup-ms', 'BENCH_WARMUP_MS', '200'));
const CONCURRENCY = Number(option('concurrency', 'BENCH_CONCURRENCY', '16'));
const HOLD = Number(option('hold', 'BENCH_HOLD', '10000'));
const TARGETS = option('targets', 'BENCH_TARGETS', 'direct,raw,raw-ka,gateway').split(',').filter(Boolean);
const LOADS = option('loads', 'BENCH_LOADS', 'small,large,post').split(',').filter(Boolean);
/** The gateway runs compiled (dist/, as `npm start` runs it; built first when stale) unless --compiled=0. */
const COMPILED = option('compiled', 'BENCH_COMPILED', '1') !== '0';
const MODES = option('modes', 'BENCH_MODES', 'keepalive,fresh,resumed').split(',').filter(Boolean);
const CLIENT = option('client', 'BENCH_CLIENT', 'undici');
if (CLIENT !== 'undici' && CLIENT !== 'lean') throw new Error(`--client is undici or lean, not ${CLIENT}`);
const PROFILE = option('profile', 'BENCH_PROFILE', '');
const JSON_OUT = option('json', 'BENCH_JSON', '');
const COMPARE = option('compare', 'BENCH_COMPARE', '');
const METRICS_AB = option('metrics-ab', 'BENCH_METRICS_AB', '0') === '1';
const HEAP_SNAPSHOT = option('heap-snapshot', 'BENCH_HEAP_SNAPSHOT', '');
const HEAP_PROFILE = option('heap-profile', 'BENCH_HEAP_PROFILE', '');
const GATEWAY_DB = option('gateway-db', 'BENCH_GATEWAY_DB', '');
/** The gateway's own database for this run (MySQL), dropped at the end. */
const gatewayDbUrl = GATEWAY_DB
  ? (() => {
      const u = new URL(GATEWAY_DB);
      u.pathname = `/${u.pathname.replace(/^\//, '') || 'gw_bench'}_${Math.random().toString(16).slice(2, 10)}`;
      return u.toString();
    })()
  : '';
const STORE_LABEL = gatewayDbUrl ? 'MySQL' : 'SQLite';

const REAL_KEY = 'sk_live_bench_0123456789abcdefREALKEY';
const MiB = 1024 * 1024;

// ---- loads -----------------------------------------------------------------------------

interface Load {
  name: string;
  label: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  expectBytes: number;
}
const POST_BODY = Buffer.from(JSON.stringify({ kind: 'bench', pad: 'x'.repeat(1024 - 25) }));
const ALL_LOADS: Load[] = [
  { name: 'small', label: 'small GET (17 B)', method: 'GET', path: '/small', headers: {}, expectBytes: 17 },
  { name: 'large', label: '1 MiB GET', method: 'GET', path: '/large', headers: {}, expectBytes: MiB },
  {
    name: 'post', label: '1 KiB JSON POST', method: 'POST', path: '/echo', headers: { 'content-type': 'application/json' }, body: POST_BODY,
    expectBytes: Buffer.byteLength(`{"ok":true,"n":${POST_BODY.length}}`),
  },
];
if (POST_BODY.length !== 1024) throw new Error(`POST body is ${POST_BODY.length} bytes`);

// ---- targets ---------------------------------------------------------------------------

interface Target {
  name: string;
  label: string;
  origin: string;
  authorization: string;
  proc: Child | null;
  /** A dispatcher; `fresh` ones are used for one request and closed; `session`: the TLS session they offer. */
  dispatcher(fresh: boolean, session?: Buffer): Dispatcher;
  keepAlive?: Dispatcher;
  /** A TLS session of the target's (the "resumed" mode offers it), and whether a connection that offered it resumed. */
  tls?: { session: Buffer; reused: boolean; protocol: string | null };
  /** The proxy the agent's connections go through (null: direct), for tlsSession. */
  proxy: { uri: string; token?: string } | null;
  secureContext: SecureContext;
  /** Requests completed (any outcome), for the audit check. */
  completed: number;
}

function proxyDispatcher(uri: string, ca: SecureContext, fresh: boolean, token?: string, session?: Buffer): Dispatcher {
  return new ProxyAgent({
    uri,
    ...(token ? { token } : {}),
    requestTls: { secureContext: ca, ...(session ? { session } : {}) } as never,
    connections: fresh ? 1 : CONCURRENCY,
    pipelining: 1,
  });
}

/**
 * A TLS session for the "resumed" mode: a new connection through the target (CONNECT when it
 * is a proxy, as the agent's connections go), its first session ticket, and whether a second
 * connection offering that session was resumed (the target accepted its own ticket).
 */
async function tlsSession(t: Target): Promise<{ session: Buffer; reused: boolean; protocol: string | null }> {
  const u = new URL(t.origin);
  const port = Number(u.port || 443);
  const open = async (session?: Buffer): Promise<{ session: Buffer; reused: boolean; protocol: string | null }> => {
    const raw = t.proxy ? await openTunnel(t) : undefined;
    const s = tlsConnect({ ...(raw ? { socket: raw } : { host: u.hostname, port }), servername: u.hostname, secureContext: t.secureContext, ...(session ? { session } : {}) });
    // The first connection waits for its ticket; the second only for its handshake (a resumed
    // TLS 1.2 session gets no new ticket).
    const [got] = await Promise.all([
      session ? Promise.resolve(session) : new Promise<Buffer>((res, rej) => s.once('session', res).once('error', rej)),
      new Promise<void>((res, rej) => s.once('secureConnect', res).once('error', rej)),
    ]);
    const reused = s.isSessionReused();
    const protocol = s.getProtocol();
    s.destroy();
    return { session: got, reused, protocol };
  };
  const first = await open();
  const second = await open(first.session);
  return { session: first.session, reused: second.reused, protocol: second.protocol };
}

// ---- measuring -------------------------------------------------------------------------

interface Cell {
  target: string;
  load: string;
  mode: string;
  ok: number;
  errors: number;
  errorSamples: string[];
  ms: number;
  latencies: number[];
  proxyCpuUs: number;
  upstreamCpuUs: number;
  /** This process's CPU: the load generator's (undici, its TLS handshakes), which shares the machine's cores. */
  clientCpuUs: number;
  maxRss: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function once(d: Dispatcher, t: Target, load: Load): Promise<string | null> {
  const res = await d.request({
    origin: t.origin,
    path: load.path,
    method: load.method,
    headers: { authorization: t.authorization, ...load.headers },
    body: load.body,
  });
  let n = 0;
  for await (const c of res.body) n += (c as Buffer).length;
  if (res.statusCode !== 200) return `status ${res.statusCode} ${String(res.headers['x-gateway-error'] ?? '')}`;
  if (res.headers['x-auth'] !== 'real') return `x-auth ${String(res.headers['x-auth'])}`;
  if (n !== load.expectBytes) return `body ${n} bytes`;
  return null;
}

/** What `once` checks, of a lean client's response. */
function leanCheck(res: LeanResponse, load: Load): string | null {
  if (res.status !== 200) return `status ${res.status} ${res.headers['x-gateway-error'] ?? ''}`;
  if (res.headers['x-auth'] !== 'real') return `x-auth ${res.headers['x-auth']}`;
  if (res.bodyBytes !== load.expectBytes) return `body ${res.bodyBytes} bytes`;
  return null;
}

async function runSlice(t: Target, load: Load, mode: string, cell: Cell, upstream: Child, sliceMs = SLICE_MS): Promise<void> {
  const fresh = mode !== 'keepalive';
  const session = mode === 'resumed' ? t.tls?.session : undefined;
  let stop = false;
  let measuring = false;
  const request = { method: load.method, path: load.path, headers: { authorization: t.authorization, ...load.headers }, body: load.body };
  const work = async () => {
    // --client=lean: each worker keeps its own connection (keep-alive) or opens one per request.
    let conn: LeanConnection | null = null;
    while (!stop) {
      const started = performance.now();
      let err: string | null;
      if (CLIENT === 'lean') {
        try {
          if (!conn || conn.closed) conn = await LeanConnection.open(t, session);
          const res = await conn.request(request);
          err = session && !conn.reused ? 'TLS session offered, not resumed' : leanCheck(res, load);
          if (fresh || res.close) conn.close();
        } catch (e) {
          err = (e as { code?: string }).code ?? (e as Error).message;
          conn?.close();
        }
        if (conn?.closed) conn = null;
      } else {
        const d = fresh ? t.dispatcher(true, session) : t.keepAlive!;
        try {
          err = await once(d, t, load);
        } catch (e) {
          err = (e as { code?: string }).code ?? (e as Error).message;
        } finally {
          if (fresh) d.close().catch(() => undefined);
        }
      }
      t.completed++;
      if (!measuring) continue;
      if (err) {
        cell.errors++;
        if (cell.errorSamples.length < 5) cell.errorSamples.push(err);
      } else {
        cell.ok++;
        cell.latencies.push(performance.now() - started);
      }
    }
    conn?.close();
  };
  const workers = Array.from({ length: CONCURRENCY }, work);
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const [p0, u0] = await Promise.all([t.proc?.stats(), upstream.stats()]);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  measuring = true;
  await new Promise((r) => setTimeout(r, sliceMs));
  measuring = false;
  const c1 = process.cpuUsage(c0);
  const t1 = performance.now();
  const [p1, u1] = await Promise.all([t.proc?.stats(), upstream.stats()]);
  stop = true;
  await Promise.all(workers);
  cell.ms += t1 - t0;
  if (p0 && p1) {
    cell.proxyCpuUs += p1.cpuUs - p0.cpuUs;
    cell.maxRss = Math.max(cell.maxRss, p1.rss);
  }
  cell.upstreamCpuUs += u1.cpuUs - u0.cpuUs;
  cell.clientCpuUs += c1.user + c1.system;
}

// ---- the API, as a developer's backend would call it ----------------------------------------

async function api(base: string, key: string, method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

interface GatewayEnv {
  id: string;
  proxyUri: string;
  token: string;
  ca: string;
  placeholder: string;
}

async function gatewayEnvironment(g: Child, host: string, secret: string, rules: unknown[]): Promise<GatewayEnv> {
  const { apiUrl, apiKey } = g.info as { apiUrl: string; apiKey: string };
  const env = await api(apiUrl, apiKey, 'POST', '/v1/environments', {
    end_user_id: `bench-${host}`,
    egress_allow: [host],
    secrets: { [secret]: { value: REAL_KEY, allowed_hosts: [host] } },
  });
  await api(apiUrl, apiKey, 'PUT', `/v1/environments/${env.id}/policy`, { rules });
  const gw = await api(apiUrl, apiKey, 'GET', `/v1/environments/${env.id}/gateway`);
  const secrets = await api(apiUrl, apiKey, 'GET', `/v1/environments/${env.id}/secrets`);
  const u = new URL(gw.proxy_url);
  return {
    id: env.id,
    proxyUri: `${u.protocol}//${u.host}`,
    token: `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`,
    ca: gw.ca_cert_pem,
    placeholder: secrets.data[0].placeholder,
  };
}

// ---- printing --------------------------------------------------------------------------

const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '–');
const ratio = (a: number, b: number | undefined) => (b && Number.isFinite(a) && b > 0 ? `${(a / b).toFixed(2)}x` : '–');
const MODE_LABEL: Record<string, string> = {
  keepalive: 'keep-alive', fresh: 'fresh connection per request', resumed: 'new connection per request, TLS session resumed',
};

function summarize(c: Cell) {
  const sorted = [...c.latencies].sort((a, b) => a - b);
  const rps = (c.ok / c.ms) * 1000;
  return {
    target: c.target, load: c.load, mode: c.mode, requests: c.ok, errors: c.errors, error_samples: c.errorSamples,
    rps, p50_ms: percentile(sorted, 0.5), p99_ms: percentile(sorted, 0.99),
    proxy_cpu_us_per_req: c.target === 'direct' ? NaN : c.proxyCpuUs / Math.max(1, c.ok + c.errors),
    proxy_rss_mib: c.target === 'direct' ? NaN : c.maxRss / MiB,
    upstream_cpu_us_per_req: c.upstreamCpuUs / Math.max(1, c.ok + c.errors),
    client_cpu_us_per_req: c.clientCpuUs / Math.max(1, c.ok + c.errors),
  };
}

// ---- main ------------------------------------------------------------------------------

const dir = mkdtempSync(path.join(tmpdir(), 'gw-bench-'));
const children: Child[] = [];
const out: string[] = [];
const print = (line = '') => {
  out.push(line);
  process.stdout.write(`${line}\n`);
};
const note = (line: string) => process.stderr.write(`[bench] ${line}\n`);

async function main(): Promise<void> {
  const started = performance.now();
  const want = (t: string) => TARGETS.includes(t);
  note(`temp dir ${dir}`);
  if (COMPILED) {
    // dist/ as `npm start` has it (a checkout compared with --compare is built by its own script, if it has one).
    for (const root of [path.resolve(import.meta.dirname, '..', '..'), ...(COMPARE ? [path.resolve(COMPARE)] : [])]) {
      const script = path.join(root, 'bin', 'build-if-stale.mjs');
      if (existsSync(script)) execFileSync(process.execPath, [script], { cwd: root, stdio: 'inherit' });
    }
    note('the gateway runs compiled (dist/); --compiled=0 runs its sources under tsx');
  }

  const upstream = await startChild<{ port: number; caFile: string; caPem: string }>('upstream', 'upstream.child.ts', {
    env: { BENCH_DIR: dir, BENCH_REAL_KEY: REAL_KEY }, logFile: path.join(dir, 'upstream.log'),
  });
  children.push(upstream);
  const upCtx = createSecureContext({ ca: upstream.info.caPem });

  const starting: Array<Promise<Child>> = [];
  if (want('raw')) starting.push(startChild('raw', 'raw-mitm.child.ts', {
    env: { BENCH_DIR: dir, BENCH_KEEP_ALIVE: '0', NODE_EXTRA_CA_CERTS: upstream.info.caFile }, logFile: path.join(dir, 'raw.log'),
  }));
  if (want('raw-ka')) starting.push(startChild('raw-ka', 'raw-mitm.child.ts', {
    env: { BENCH_DIR: dir, BENCH_KEEP_ALIVE: '1', NODE_EXTRA_CA_CERTS: upstream.info.caFile }, logFile: path.join(dir, 'raw-ka.log'),
  }));
  if (want('gateway') || HOLD > 0) starting.push(startChild('gateway', 'gateway.child.ts', {
    compiled: COMPILED,
    env: {
      BENCH_DIR: dir, BENCH_UPSTREAM_PORT: String(upstream.info.port), BENCH_UPSTREAM_CA_FILE: upstream.info.caFile,
      ...(gatewayDbUrl ? { BENCH_GATEWAY_DATABASE_URL: gatewayDbUrl } : {}),
    },
    nodeArgs: PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : [],
    logFile: path.join(dir, 'gateway.log'),
  }));
  if (COMPARE) mkdirSync(path.join(dir, 'b'));
  if (COMPARE) starting.push(startChild('gateway-b', 'gateway.child.ts', {
    root: path.resolve(COMPARE),
    compiled: COMPILED,
    env: { BENCH_DIR: path.join(dir, 'b'), BENCH_UPSTREAM_PORT: String(upstream.info.port), BENCH_UPSTREAM_CA_FILE: upstream.info.caFile },
    logFile: path.join(dir, 'gateway-b.log'),
  }));
  if (METRICS_AB) mkdirSync(path.join(dir, 'nometrics'));
  if (METRICS_AB) starting.push(startChild('gateway-nometrics', 'gateway.child.ts', {
    compiled: COMPILED,
    env: {
      BENCH_DIR: path.join(dir, 'nometrics'), BENCH_UPSTREAM_PORT: String(upstream.info.port), BENCH_UPSTREAM_CA_FILE: upstream.info.caFile, BENCH_METRICS: 'off',
      ...(gatewayDbUrl ? { BENCH_GATEWAY_DATABASE_URL: `${gatewayDbUrl}_nm` } : {}),
    },
    logFile: path.join(dir, 'gateway-nometrics.log'),
  }));
  const procs = await Promise.all(starting);
  children.push(...procs);
  const byName = new Map(procs.map((p) => [p.name, p]));

  const targets: Target[] = [];
  const upOrigin = `https://localhost:${upstream.info.port}`;
  if (want('direct')) {
    targets.push({
      name: 'direct', label: 'direct (no proxy)', origin: upOrigin, authorization: `Bearer ${REAL_KEY}`, proc: null, completed: 0, proxy: null, secureContext: upCtx,
      dispatcher: (fresh, session) => new Agent({ connections: fresh ? 1 : CONCURRENCY, pipelining: 1, connect: { secureContext: upCtx, ...(session ? { session } : {}) } as never }),
    });
  }
  for (const [name, label] of [['raw', 'raw http-mitm-proxy, keepAlive:false (default)'], ['raw-ka', 'raw http-mitm-proxy, keepAlive:true']] as const) {
    const p = byName.get(name);
    if (!p || !want(name)) continue;
    const ctx = createSecureContext({ ca: p.info.caPem });
    targets.push({
      name, label, origin: upOrigin, authorization: `Bearer ${REAL_KEY}`, proc: p, completed: 0, proxy: { uri: `http://127.0.0.1:${p.info.port}` }, secureContext: ctx,
      dispatcher: (fresh, session) => proxyDispatcher(`http://127.0.0.1:${p.info.port}`, ctx, fresh, undefined, session),
    });
  }
  const gateway = byName.get('gateway');
  let benchEnv: GatewayEnv | null = null;
  if (gateway) {
    benchEnv = await gatewayEnvironment(gateway, 'bench.example', 'BENCH_KEY', [
      { connector: 'secret:BENCH_KEY', category: 'read', effect: 'allow' },
      { connector: 'secret:BENCH_KEY', category: 'write', effect: 'allow' },
    ]);
    if (want('gateway')) {
      const env = benchEnv;
      const ctx = createSecureContext({ ca: env.ca });
      targets.push({
        name: 'gateway', label: `our gateway (service, ${STORE_LABEL}, swap + audit)`, origin: 'https://bench.example', authorization: `Bearer ${env.placeholder}`,
        proc: gateway, completed: 0, proxy: { uri: env.proxyUri, token: env.token }, secureContext: ctx,
        dispatcher: (fresh, session) => proxyDispatcher(env.proxyUri, ctx, fresh, env.token, session),
      });
    }
  }
  const gatewayB = byName.get('gateway-b');
  if (gatewayB) {
    const env = await gatewayEnvironment(gatewayB, 'bench.example', 'BENCH_KEY', [
      { connector: 'secret:BENCH_KEY', category: 'read', effect: 'allow' },
      { connector: 'secret:BENCH_KEY', category: 'write', effect: 'allow' },
    ]);
    const ctx = createSecureContext({ ca: env.ca });
    targets.push({
      name: 'gateway-b', label: `gateway of ${COMPARE}`, origin: 'https://bench.example', authorization: `Bearer ${env.placeholder}`,
      proc: gatewayB, completed: 0, proxy: { uri: env.proxyUri, token: env.token }, secureContext: ctx,
      dispatcher: (fresh, session) => proxyDispatcher(env.proxyUri, ctx, fresh, env.token, session),
    });
  }
  const gatewayNm = byName.get('gateway-nometrics');
  if (gatewayNm) {
    const env = await gatewayEnvironment(gatewayNm, 'bench.example', 'BENCH_KEY', [
      { connector: 'secret:BENCH_KEY', category: 'read', effect: 'allow' },
      { connector: 'secret:BENCH_KEY', category: 'write', effect: 'allow' },
    ]);
    const ctx = createSecureContext({ ca: env.ca });
    targets.push({
      name: 'gateway-nometrics', label: `our gateway, metrics off (no-op port, ${STORE_LABEL})`, origin: 'https://bench.example', authorization: `Bearer ${env.placeholder}`,
      proc: gatewayNm, completed: 0, proxy: { uri: env.proxyUri, token: env.token }, secureContext: ctx,
      dispatcher: (fresh, session) => proxyDispatcher(env.proxyUri, ctx, fresh, env.token, session),
    });
  }
  for (const t of targets) t.keepAlive = t.dispatcher(false);

  // Warm-up: raw http-mitm-proxy makes its per-host key with forge on the first CONNECT
  // (seconds); ours signs the host's leaf once. Nothing of that is measured.
  note('warming up (certificates, connections, JIT)');
  for (const t of targets) {
    for (const load of ALL_LOADS) {
      const err = await once(t.keepAlive!, t, load);
      if (err) throw new Error(`warm-up ${t.name} ${load.name}: ${err}`);
      t.completed++;
      const d = t.dispatcher(true);
      const err2 = await once(d, t, load);
      await d.close();
      if (err2) throw new Error(`warm-up (fresh) ${t.name} ${load.name}: ${err2}`);
      t.completed++;
    }
    if (MODES.includes('resumed')) t.tls = await tlsSession(t);
  }

  const loads = ALL_LOADS.filter((l) => LOADS.includes(l.name));
  // JIT warm-up: without it the first cells of round 1 run on unoptimised code (the first
  // scenario then looks slower than the second for every target, the direct one included).
  for (const m of MODES) {
    for (const l of loads) {
      for (const t of targets) {
        const scratch: Cell = { target: t.name, load: l.name, mode: m, ok: 0, errors: 0, errorSamples: [], ms: 0, latencies: [], proxyCpuUs: 0, upstreamCpuUs: 0, clientCpuUs: 0, maxRss: 0 };
        await runSlice(t, l, m, scratch, upstream, m === 'keepalive' ? 500 : 200);
      }
    }
  }
  const cells = new Map<string, Cell>();
  const key = (t: string, l: string, m: string) => `${m}/${l}/${t}`;
  for (const m of MODES) for (const l of loads) for (const t of targets) {
    cells.set(key(t.name, l.name, m), {
      target: t.name, load: l.name, mode: m, ok: 0, errors: 0, errorSamples: [], ms: 0, latencies: [], proxyCpuUs: 0, upstreamCpuUs: 0, clientCpuUs: 0, maxRss: 0,
    });
  }
  const benchStarted = performance.now();
  for (let round = 0; round < ROUNDS; round++) {
    note(`round ${round + 1}/${ROUNDS}`);
    let s = 0;
    for (const m of MODES) {
      for (const l of loads) {
        s++;
        for (let i = 0; i < targets.length; i++) {
          const t = targets[(i + round + s) % targets.length]!;
          await runSlice(t, l, m, cells.get(key(t.name, l.name, m))!, upstream);
        }
      }
    }
  }
  const benchSecs = (performance.now() - benchStarted) / 1000;

  // ---- results ----
  const results = [...cells.values()].map(summarize);
  print(`## Results`);
  print();
  print(`Node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}); ` +
    `${CLIENT === 'lean' ? 'the lean client (lean-client.ts: node:net + node:tls, one request at a time per connection)' : 'undici ProxyAgent/Agent, pipelining 1'}, ` +
    `concurrency ${CONCURRENCY}; ${ROUNDS} rounds x ${SLICE_MS} ms measured per cell (+${WARMUP_MS} ms warm-up), interleaved; ${benchSecs.toFixed(0)} s.`);
  print('proxy CPU = user+system time of the proxy process per request (the gateway process includes its API, jobs and audit writer); ' +
    'upstream CPU likewise for the upstream process; client CPU is the load generator\'s (this process), on the same cores: ' +
    'where it dominates, requests/s ratios between proxies are bounded by it (issue 29, item 4). Ratios are requests/s. raw http-mitm-proxy with its default keepAlive:false ' +
    'answers every request with Connection: close and opens a new upstream TLS connection per request, so its keep-alive rows ' +
    'are really a new tunnel per request. "fresh" = a new connection per request (undici: a new dispatcher): new TCP connection, CONNECT, full TLS ' +
    'handshake with the proxy (no session resumption). "resumed" = the same, but every connection offers one TLS session ' +
    'the target issued before (an agent\'s HTTPS client keeps its sessions): an abbreviated handshake where the target accepts it.');
  if (MODES.includes('resumed')) {
    print(`TLS session resumption offered on every "resumed" connection: ${targets.map((t) => `${t.name} ${t.tls?.protocol ?? '?'} ${t.tls?.reused ? 'resumed' : 'NOT resumed (full handshakes)'}`).join('; ')}.`);
  }
  for (const m of targets.length > 0 ? MODES : []) {
    for (const l of loads) {
      print();
      print(`### ${MODE_LABEL[m]}, ${ALL_LOADS.find((x) => x.name === l.name)!.label}`);
      print();
      print('| target | req/s | p50 ms | p99 ms | proxy CPU µs/req | proxy RSS MiB | upstream CPU µs/req | client CPU µs/req | vs direct | vs raw | vs raw-ka | errors |');
      print('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      const row = (t: string) => results.find((r) => r.target === t && r.load === l.name && r.mode === m);
      for (const t of targets) {
        const r = row(t.name)!;
        print(`| ${t.label} | ${fmt(r.rps)} | ${fmt(r.p50_ms, 2)} | ${fmt(r.p99_ms, 2)} | ${fmt(r.proxy_cpu_us_per_req)} | ${fmt(r.proxy_rss_mib)} | ` +
          `${fmt(r.upstream_cpu_us_per_req)} | ${fmt(r.client_cpu_us_per_req)} | ${t.name === 'direct' ? '1.00x' : ratio(r.rps, row('direct')?.rps)} | ${ratio(r.rps, row('raw')?.rps)} | ` +
          `${ratio(r.rps, row('raw-ka')?.rps)} | ${r.errors}${r.error_samples.length ? ` (${[...new Set(r.error_samples)].join('; ')})` : ''} |`);
      }
    }
  }

  // ---- the issue's targets ----
  const checks: string[] = [];
  const r = (t: string, l: string, m: string) => results.find((x) => x.target === t && x.load === l && x.mode === m);

  // ---- metrics A/B (issue 25, item 2): the same gateway with and without the Metrics port ----
  if (gatewayNm && want('gateway')) {
    print();
    print('### Metrics A/B: metrics on (prom-client) vs off (no-op port), same run, interleaved');
    print();
    print('| mode, load | req/s on / off | p50 ms on / off | p99 ms on / off | proxy CPU µs/req on / off | CPU cost of metrics | req/s cost of metrics |');
    print('|---|---:|---:|---:|---:|---:|---:|');
    const pct = (on: number, off: number) => `${(((on - off) / off) * 100).toFixed(1)} %`;
    for (const m of MODES) {
      for (const l of loads) {
        const on = r('gateway', l.name, m);
        const off = r('gateway-nometrics', l.name, m);
        if (!on || !off) continue;
        print(`| ${MODE_LABEL[m]}, ${l.name} | ${fmt(on.rps)} / ${fmt(off.rps)} | ${fmt(on.p50_ms, 2)} / ${fmt(off.p50_ms, 2)} | ${fmt(on.p99_ms, 2)} / ${fmt(off.p99_ms, 2)} | ` +
          `${fmt(on.proxy_cpu_us_per_req)} / ${fmt(off.proxy_cpu_us_per_req)} | ${pct(on.proxy_cpu_us_per_req, off.proxy_cpu_us_per_req)} | ${pct(off.rps, on.rps)} |`);
        if (m === 'keepalive' && l.name === 'small') {
          const cost = (on.proxy_cpu_us_per_req - off.proxy_cpu_us_per_req) / off.proxy_cpu_us_per_req;
          checks.push(`${cost < 0.03 ? 'MET' : 'NOT MET'}: metrics cost, keep-alive small GET: ${(cost * 100).toFixed(1)} % proxy CPU per request ` +
            `(${fmt(on.proxy_cpu_us_per_req)} vs ${fmt(off.proxy_cpu_us_per_req)} µs), ${(((off.rps - on.rps) / on.rps) * 100).toFixed(1)} % req/s (target < 3 %)`);
        }
      }
    }
  }
  if (want('gateway')) {
    for (const l of loads) {
      const g = r('gateway', l.name, 'keepalive');
      if (!g) continue;
      for (const raw of ['raw', 'raw-ka']) {
        const o = r(raw, l.name, 'keepalive');
        if (o) checks.push(`${g.rps >= o.rps ? 'MET' : 'NOT MET'}: keep-alive ${l.name}: gateway ${(g.rps / o.rps).toFixed(2)}x ${raw} requests/s (target >= 1.0x)`);
      }
    }
    const glk = r('gateway', 'large', 'keepalive');
    for (const raw of ['raw', 'raw-ka']) {
      const o = r(raw, 'large', 'keepalive');
      if (glk && o) checks.push(`${glk.rps >= 1.2 * o.rps ? 'MET' : 'NOT MET'}: keep-alive large (1 MiB): gateway ${(glk.rps / o.rps).toFixed(2)}x ${raw} requests/s (target >= 1.2x, issue 10)`);
    }
    const gs = r('gateway', 'small', 'keepalive');
    if (gs) checks.push(`${gs.proxy_cpu_us_per_req <= 400 ? 'MET' : 'NOT MET'}: keep-alive small: gateway ${gs.proxy_cpu_us_per_req.toFixed(0)} µs proxy CPU/request (target <= 400)`);
    for (const l of loads) {
      const g = r('gateway', l.name, 'fresh');
      if (!g) continue;
      for (const raw of ['raw', 'raw-ka']) {
        const o = r(raw, l.name, 'fresh');
        if (o) checks.push(`${g.rps >= 0.9 * o.rps ? 'MET' : 'NOT MET'}: fresh ${l.name}: gateway ${(g.rps / o.rps).toFixed(2)}x ${raw} requests/s (target >= 0.9x)`);
      }
    }
    // Issue 29, item 4 (>= 1.3x raw-ka on new connections and POSTs), and what bounds it.
    // Fresh connections: every process shares the same cores and the machine is busy, so
    // requests/s follows the CPU all of them spend per request, the load generator's
    // included: (client + upstream + raw) / (client + upstream + gateway), and a gateway that
    // cost nothing would reach (client + upstream + raw) / (client + upstream). Keep-alive: the
    // proxy's one thread is what saturates, so requests/s follows the proxy's CPU per request.
    for (const m of MODES) {
      for (const l of loads) {
        if (m === 'keepalive' && l.name !== 'post') continue;
        const g = r('gateway', l.name, m);
        const o = r('raw-ka', l.name, m);
        if (!g || !o) continue;
        const rest = (x: typeof g) => x.client_cpu_us_per_req + x.upstream_cpu_us_per_req;
        const bound = m !== 'keepalive'
          ? `all the machine's CPU per request: ${((rest(o) + o.proxy_cpu_us_per_req) / (rest(g) + g.proxy_cpu_us_per_req)).toFixed(2)}x, ` +
            `and a gateway that cost nothing would be ${((rest(o) + o.proxy_cpu_us_per_req) / rest(g)).toFixed(2)}x (the client spends ` +
            `${fmt(g.client_cpu_us_per_req)} µs a request)`
          : `the proxy's thread: ${(o.proxy_cpu_us_per_req / g.proxy_cpu_us_per_req).toFixed(2)}x`;
        checks.push(`${g.rps >= 1.3 * o.rps ? 'MET' : 'NOT MET'}: ${m} ${l.name}: gateway ${(g.rps / o.rps).toFixed(2)}x raw-ka requests/s (issue 29, item 4: >= 1.3x); ` +
          `proxy CPU µs a request, gateway ${fmt(g.proxy_cpu_us_per_req)} vs raw-ka ${fmt(o.proxy_cpu_us_per_req)}; what bounds the ratio, ${bound}`);
      }
    }
    const gl = r('gateway', 'large', 'keepalive');
    if (gl) checks.push(`INFO: 1 MiB GET through the gateway: max proxy RSS ${gl.proxy_rss_mib.toFixed(0)} MiB with ${CONCURRENCY} in flight (streamed; buffered would be >= ${CONCURRENCY} MiB of bodies)`);
  }

  // ---- audit: one entry per gateway request ----
  if (gateway && benchEnv && want('gateway')) {
    const t = targets.find((x) => x.name === 'gateway')!;
    const a = await gateway.call<{ entries: number; byReason: unknown[]; writer: { dropped: number; written: number; commits: number } }>('audit', { environmentId: benchEnv.id });
    checks.push(`${a.entries === t.completed ? 'MET' : 'NOT MET'}: audit entries for the gateway environment: ${a.entries} for ${t.completed} requests ` +
      `(writer dropped ${a.writer.dropped}; ${a.writer.written} entries in ${a.writer.commits} commits, ` +
      `${(a.writer.written / Math.max(1, a.writer.commits)).toFixed(1)} a commit over the whole run); by reason/status ${JSON.stringify(a.byReason)}`);
  }
  for (const t of targets) await t.keepAlive?.close();

  // ---- hold test ----
  let hold: Record<string, unknown> | null = null;
  if (gateway && HOLD > 0) {
    hold = { ...(await holdFloor(upstream, upCtx)), ...(await holdTest(gateway)) };
    print();
    print(`### Hold: ${HOLD} requests held for approval at once`);
    print();
    print('| measure | value |');
    print('|---|---:|');
    for (const [k, v] of Object.entries(hold)) print(`| ${k} | ${typeof v === 'number' ? fmt(v, Number.isInteger(v) ? 0 : 1) : String(v)} |`);
    const ok = (hold['released correctly'] as number) === HOLD;
    checks.push(`${(hold['gateway RSS while held, MiB'] as number) < 300 ? 'MET' : 'NOT MET'}: ${HOLD} held: gateway RSS ${fmt(hold['gateway RSS while held, MiB'] as number)} MiB (target < 300); ` +
      `a bare node:https server holding the same requests grows by ${fmt(hold['floor: bare node:https server, RSS growth per held request, KiB'] as number, 1)} KiB per request, the gateway by ` +
      `${fmt(hold['gateway RSS growth per held request, KiB'] as number, 1)} KiB`);
    checks.push(`${ok ? 'MET' : 'NOT MET'}: ${HOLD} held: ${hold['released correctly']} released correctly (approved 200 with the real key, denied 403 approval_denied)`);
  }

  print();
  print('### Targets');
  print();
  for (const c of checks) print(`- ${c}`);
  print();
  print(`total ${((performance.now() - started) / 1000).toFixed(0)} s`);

  if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ options: { ROUNDS, SLICE_MS, WARMUP_MS, CONCURRENCY, HOLD }, results, hold, checks }, null, 2));
}

// ---- hold test -------------------------------------------------------------------------

/** Sends `n` POSTs in waves of 500, each wave once `count()` says the previous ones arrived. */
async function inWaves(n: number, send: (i: number) => void, count: () => Promise<number>): Promise<number> {
  let arrived = 0;
  for (let sent = 0; sent < n;) {
    const k = Math.min(500, n - sent);
    for (let i = 0; i < k; i++) send(sent + i);
    sent += k;
    const deadline = performance.now() + 120_000;
    for (;;) {
      arrived = await count();
      if (arrived >= sent || performance.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (arrived < sent) break;
  }
  return arrived;
}

/**
 * The floor: the same number of requests held by a bare node:https server (the upstream
 * process, /park/*), sent straight to it by the same client. Whatever a TLS-terminating
 * Node process needs per held request, before any code of ours.
 */
async function holdFloor(upstream: Child<{ port: number }>, ca: SecureContext): Promise<Record<string, unknown>> {
  note(`hold floor: ${HOLD} requests parked at a bare node:https server`);
  const before = await upstream.stats();
  const agent = new Agent({ connections: HOLD, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, connect: { secureContext: ca } as never });
  const outcomes: Array<Promise<number>> = [];
  const parked = await inWaves(HOLD, (i) => outcomes.push(
    agent.request({ origin: `https://localhost:${upstream.info.port}`, path: `/park/${i}`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) })
      .then(async (res) => {
        await res.body.text();
        return res.statusCode;
      }, () => 0),
  ), () => upstream.call<number>('parked'));
  await new Promise((r) => setTimeout(r, 1000));
  const held = await upstream.stats();
  await upstream.call('release');
  const ok = (await Promise.all(outcomes)).filter((s) => s === 200).length;
  await agent.close();
  return {
    'floor: bare node:https server, held': `${parked} (${ok} answered 200 when released)`,
    'floor: bare node:https server, RSS before / while held, MiB': `${fmt(before.rss / MiB)} / ${fmt(held.rss / MiB)}`,
    'floor: bare node:https server, RSS growth per held request, KiB': (held.rss - before.rss) / parked / 1024,
  };
}

async function holdTest(gateway: Child): Promise<Record<string, unknown>> {
  note(`hold test: ${HOLD} requests`);
  const env = await gatewayEnvironment(gateway, 'hold.example', 'HOLD_KEY', [
    { connector: 'secret:HOLD_KEY', category: 'read', effect: 'allow' },
    { connector: 'secret:HOLD_KEY', category: 'write', effect: 'ask' },
  ]);
  const before = await gateway.stats();
  if (HEAP_PROFILE) await gateway.call('heapSampling');
  const secureContext = createSecureContext({ ca: env.ca });
  const agent = new ProxyAgent({
    uri: env.proxyUri, token: env.token, requestTls: { secureContext } as never,
    connections: HOLD, pipelining: 1, headersTimeout: 0, bodyTimeout: 0,
  });
  const t: Target = {
    name: 'hold', label: 'hold', origin: 'https://hold.example', authorization: `Bearer ${env.placeholder}`, proc: gateway, completed: 0,
    proxy: { uri: env.proxyUri, token: env.token }, secureContext, dispatcher: () => agent,
  };
  const outcomes: Array<Promise<string | null>> = [];
  const send = (i: number): Promise<string | null> =>
    agent.request({
      origin: t.origin, path: `/hold/${i}`, method: 'POST',
      headers: { authorization: t.authorization, 'content-type': 'application/json' }, body: JSON.stringify({ i }),
    }).then(async (res) => {
      const text = await res.body.text();
      if (i % 2 === 0) return res.statusCode === 200 && res.headers['x-auth'] === 'real' ? null : `approved #${i}: ${res.statusCode} ${text.slice(0, 100)}`;
      return res.statusCode === 403 && res.headers['x-gateway-error'] === 'approval_denied' ? null : `denied #${i}: ${res.statusCode} ${text.slice(0, 100)}`;
    }, (err: Error) => `#${i}: ${(err as { code?: string }).code ?? err.message}`);

  // In waves, so 10,000 TLS handshakes do not all hit the accept queue in the same instant.
  const t0 = performance.now();
  const pending = await inWaves(HOLD, (i) => outcomes.push(send(i)), () => gateway.call<number>('pending'));
  const heldSecs = (performance.now() - t0) / 1000;
  // RSS and CPU while everything waits (the approvals service polls the store for them).
  let rss = 0;
  let heap = 0;
  const s0 = await gateway.stats();
  const w0 = performance.now();
  for (let i = 0; i < 6; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const s = await gateway.stats();
    rss = Math.max(rss, s.rss);
    heap = Math.max(heap, s.heapUsed);
  }
  const s1 = await gateway.stats();
  if (HEAP_PROFILE) note(`heap profile: ${await gateway.call('heapProfile', { file: HEAP_PROFILE })}`);
  if (HEAP_SNAPSHOT) note(`heap snapshot: ${await gateway.call('heapSnapshot', { file: HEAP_SNAPSHOT })}`);
  const idleCpu = (s1.cpuUs - s0.cpuUs) / ((performance.now() - w0) * 10);
  const d0 = performance.now();
  const decided = await gateway.call<{ approved: number; denied: number; ms: number }>('decideHeld', { concurrency: 8 });
  const results = await Promise.all(outcomes);
  const releasedSecs = (performance.now() - d0) / 1000;
  const errors = results.filter((x) => x !== null) as string[];
  await agent.close();
  return {
    'held at once (pending approvals)': pending,
    'seconds to get all held': heldSecs,
    'gateway RSS before, MiB': before.rss / MiB,
    'gateway RSS while held, MiB': rss / MiB,
    'gateway RSS growth per held request, KiB': (rss - before.rss) / pending / 1024,
    'gateway heap used while held, MiB': heap / MiB,
    'gateway CPU while idle-held, % of a core': idleCpu,
    'approved / denied via approvals service': `${decided.approved} / ${decided.denied}`,
    'seconds to decide all': decided.ms / 1000,
    'seconds from first decision to last response': releasedSecs,
    'released correctly': results.length - errors.length,
    'released wrongly or failed': `${errors.length}${errors.length ? ` (${errors.slice(0, 3).join('; ')})` : ''}`,
  };
}

main()
  .catch((err) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    for (const c of children) {
      if (existsSync(c.logFile) && statSync(c.logFile).size > 0) {
        const text = readFileSync(c.logFile, 'utf8');
        const lines = text.trim().split('\n');
        note(`${c.name} log: ${lines.length} lines; last: ${lines.slice(-3).join(' | ').slice(0, 600)}`);
      }
    }
    if (PROFILE) note(`CPU profile of the gateway written to ${PROFILE}`);
    rmSync(dir, { recursive: true, force: true });
    if (gatewayDbUrl) {
      const target = parseDatabaseUrl(gatewayDbUrl) as Extract<DbTarget, { client: 'mysql' }>;
      const k = knexFactory({ client: 'mysql2', connection: { host: target.host, port: target.port, user: target.user, password: target.password }, pool: { min: 0, max: 1 } });
      for (const name of [target.database, ...(METRICS_AB ? [`${target.database}_nm`] : [])]) {
        await k.raw('DROP DATABASE IF EXISTS ??', [name]).catch((err: Error) => note(`could not drop ${name}: ${err.message}`));
      }
      await k.destroy();
    }
  });
