/**
 * Webhook delivery: sustained deliveries per second to a local receiver, and the latency
 * from an event's creation (its transaction commits) to its first attempt arriving at the
 * receiver. The delivery worker (webhooks/delivery.service.ts) runs exactly as in the
 * service: outbox rows, the commit signal, atomic claims, one signed POST per event, one
 * outcome transaction per attempt. The receiver runs on its own thread (a worker_thread),
 * so it does not share the worker's event loop. Printed, never asserted (ARCHITECTURE.md
 * "bench/"). SQLite always; MySQL too when DATABASE_URL names one.
 *
 *   npx tsx bench/webhooks/delivery.bench.ts
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/gw_bench npx tsx bench/webhooks/delivery.bench.ts
 *
 * BENCH_RATE (default 500) is the fixed offered rate of the sustained run and BENCH_SECONDS
 * (default 10) its length; BENCH_DEVELOPERS (default 4) the number of developers the events
 * are spread over; BENCH_SKIP_SQLITE=1 runs MySQL only; BENCH_DEBUG=1 logs the worker's
 * warnings and errors.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import knexFactory from 'knex';
import { createDb, parseDatabaseUrl, withTx, type Db, type DbTarget } from '../../store/db.js';
import { migrateLatest } from '../../store/migrate.js';
import { ServiceClock } from '../../lib/clock.js';
import { Keyring } from '../../lib/crypto.js';
import { createLogger, silentLogger } from '../../lib/log.js';
import { createAccountsService } from '../../accounts/accounts.service.js';
import { createWebhookEndpointsService } from '../../webhooks/endpoints.service.js';
import { createWebhookDeliveryService } from '../../webhooks/delivery.service.js';
import { enqueueEvent } from '../../webhooks/outbox.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const DEVELOPERS = Number(process.env.BENCH_DEVELOPERS ?? 4);
const PRODUCERS = 16;
/** The fixed offered rate of the sustained run (events per second). */
const RATE = Number(process.env.BENCH_RATE ?? 500);

/** The receiver: answers 200 at once, counts, and keeps creation→arrival latencies. */
const RECEIVER = `
const { parentPort } = require('node:worker_threads');
const http = require('node:http');
let count = 0;
let lat = [];
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const now = Date.now();
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
    count++;
    try { lat.push(now - Date.parse(JSON.parse(Buffer.concat(chunks).toString()).created)); } catch {}
  });
});
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
parentPort.on('message', (m) => {
  if (m === 'stats') parentPort.postMessage({ count, lat: lat });
  if (m === 'reset') { lat = []; }
  if (m === 'close') server.close(() => process.exit(0));
});
`;

interface Receiver {
  url: string;
  stats(): Promise<{ count: number; lat: number[] }>;
  reset(): void;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const w = new Worker(RECEIVER, { eval: true });
  const port = await new Promise<number>((r) => w.once('message', (m: { port: number }) => r(m.port)));
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    stats: () => new Promise((r) => {
      w.once('message', r);
      w.postMessage('stats');
    }),
    reset: () => w.postMessage('reset'),
    close: async () => {
      w.postMessage('close');
      await new Promise((r) => w.once('exit', r));
    },
  };
}

async function freshTarget(kind: 'sqlite' | 'mysql'): Promise<{ name: string; db: Db; cleanup(): Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'gw-wh-bench-'));
    const db = await createDb({ client: 'sqlite', filename: join(dir, 'bench.sqlite') });
    await migrateLatest(db);
    return { name: 'SQLite (WAL, synchronous=NORMAL)', db, async cleanup() { await db.destroy(); rmSync(dir, { recursive: true, force: true }); } };
  }
  const base = parseDatabaseUrl(process.env.DATABASE_URL!) as Extract<DbTarget, { client: 'mysql' }>;
  const target = { ...base, database: `${base.database.slice(0, 30)}_${randomBytes(4).toString('hex')}` };
  const db = await createDb(target);
  await migrateLatest(db);
  const version = (await db.raw('SELECT VERSION() AS v'))[0][0].v;
  return {
    name: `MySQL ${version}`,
    db,
    async cleanup() {
      await db.destroy();
      const k = knexFactory({ client: 'mysql2', connection: { host: target.host, port: target.port, user: target.user, password: target.password }, pool: { min: 0, max: 1 } });
      await k.raw('DROP DATABASE IF EXISTS ??', [target.database]);
      await k.destroy();
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function latencyLine(label: string, lat: number[]): string {
  const s = [...lat].sort((a, b) => a - b);
  return `${label.padEnd(44)} p50 ${String(pct(s, 50)).padStart(4)} ms  p95 ${String(pct(s, 95)).padStart(4)} ms  p99 ${String(pct(s, 99)).padStart(4)} ms  max ${String(s[s.length - 1]).padStart(5)} ms  (n=${s.length})`;
}

async function bench(kind: 'sqlite' | 'mysql'): Promise<void> {
  const t = await freshTarget(kind);
  const rx = await startReceiver();
  const clock = new ServiceClock();
  const keyring = new Keyring([randomBytes(32)]);
  const accounts = createAccountsService({ db: t.db, clock });
  const endpoints = createWebhookEndpointsService({ db: t.db, clock, keyring, allowPrivateDestinations: true });
  const devs: string[] = [];
  for (let i = 0; i < DEVELOPERS; i++) {
    const id = `dev_${i.toString(16).padStart(24, '0')}`;
    await accounts.ensureDeveloper(id, `bench ${i}`);
    await endpoints.set(id, rx.url);
    devs.push(id);
  }
  // The second half of the developers are mid-rotation: two v1 values per webhook.
  for (const id of devs.slice(Math.ceil(devs.length / 2))) await endpoints.rotate(id);
  const delivery = createWebhookDeliveryService(
    { db: t.db, clock, log: process.env.BENCH_DEBUG ? createLogger('warn') : silentLogger, target: (id) => endpoints.deliveryTarget(id) },
    { allowPrivateDestinations: true },
  );
  delivery.start();
  let seq = 0;
  const produce = (dev: string) =>
    withTx(t.db, (trx) =>
      enqueueEvent(trx, {
        developerId: dev,
        type: 'approval.requested',
        environmentId: 'env_000000000000000000000001',
        data: { approval_id: `apr_${(seq++).toString(16).padStart(24, '0')}`, summary: 'POST gmail.googleapis.com /gmail/v1/users/me/messages/send', expires_at: 1_800_000_000 },
        createdAtMs: clock.nowMs(),
      }),
    );
  const delivered = async () => (await rx.stats()).count;

  try {
    console.log(`\n== ${t.name}; ${DEVELOPERS} developers`);
    // Warm-up: pools, keep-alive connections, statement caches.
    await Promise.all(Array.from({ length: 200 }, (_, i) => produce(devs[i % devs.length]!)));
    while ((await delivered()) < 200) await sleep(20);

    // 1. Latency with an idle worker: one event at a time.
    rx.reset();
    for (let i = 0; i < 100; i++) {
      await produce(devs[i % devs.length]!);
      await sleep(20);
    }
    await sleep(200);
    console.log(latencyLine('creation → first attempt, one at a time', (await rx.stats()).lat));

    // 2. Offered load at fixed rates: does delivery keep up, and with what latency?
    for (const rate of [200, RATE]) {
      rx.reset();
      const before = await delivered();
      const seconds = rate === 200 ? 5 : SECONDS;
      const n = rate * seconds;
      const paced = Date.now();
      const inflight: Promise<unknown>[] = [];
      for (let i = 0; i < n; i++) {
        inflight.push(produce(devs[i % devs.length]!));
        // Every 10 ms, the events due by then.
        if (i % Math.max(1, rate / 100) === 0) {
          const due = paced + ((i + 1) * 1000) / rate;
          if (due > Date.now()) await sleep(due - Date.now());
          else await new Promise((r) => setImmediate(r));
        }
      }
      await Promise.all(inflight);
      const offeredMs = Date.now() - paced;
      const inWindow = (await delivered()) - before;
      while ((await delivered()) - before < n) await sleep(10);
      const lastMs = Date.now() - paced;
      console.log(
        `offered ${rate}/s for ${seconds} s: queued at ${Math.round((n / offeredMs) * 1000)}/s; delivered ${inWindow} during, all ${n} after ${(lastMs / 1000).toFixed(2)} s ` +
        `(${Math.round((n / lastMs) * 1000)} deliveries/s sustained)`,
      );
      console.log(latencyLine(`creation → first attempt, at ${rate} events/s`, (await rx.stats()).lat));
    }

    // 3. Saturation: 16 producers queue as fast as they can for SECONDS s (the database and
    // both CPUs are shared by producers, worker and receiver), then the rest drains.
    rx.reset();
    const before = await delivered();
    const startedAt = Date.now();
    let produced = 0;
    let stop = false;
    const producers = Array.from({ length: PRODUCERS }, async (_, p) => {
      while (!stop) {
        await produce(devs[(p + produced) % devs.length]!);
        produced++;
        // better-sqlite3 answers synchronously: without this the producers would run on
        // microtasks alone and starve timers and sockets.
        await new Promise((r) => setImmediate(r));
      }
    });
    await sleep(SECONDS * 1000);
    stop = true;
    await Promise.all(producers);
    const windowMs = Date.now() - startedAt;
    const inWindow = (await delivered()) - before;
    // Drain what is left, and time it (pure delivery, no producers).
    const backlog = produced - inWindow;
    const drainStart = Date.now();
    while ((await delivered()) - before < produced && Date.now() - drainStart < 60_000) await sleep(10);
    const drainMs = Date.now() - drainStart;
    const lat = (await rx.stats()).lat;
    console.log(`saturation: queued ${Math.round((produced / windowMs) * 1000)}/s, delivered ${Math.round((inWindow / windowMs) * 1000)} deliveries/s over ${(windowMs / 1000).toFixed(1)} s (${inWindow} of ${produced}; backlog ${backlog})`);
    if (backlog > 50) console.log(`drain of the backlog: ${Math.round((backlog / drainMs) * 1000)} deliveries/s (${backlog} in ${drainMs} ms)`);
    console.log(latencyLine('creation → first attempt, saturation run', lat));

    while (delivery.stats().inFlight > 0) await sleep(10);
    // Every event delivered exactly once here (a redelivery needs a lost lease or a crash).
    const dups = (await t.db('webhook_deliveries').select('event_id').count({ n: '*' }).groupBy('event_id').having(t.db.raw('count(*) > 1'))) as unknown[];
    const byStatus = (await t.db('webhook_events').select('status').count({ n: '*' }).groupBy('status')) as Array<{ status: string; n: number | string }>;
    const errors = (await t.db('webhook_deliveries').select('error').count({ n: '*' }).groupBy('error')) as Array<{ error: string | null; n: number | string }>;
    console.log(`check: events by status ${JSON.stringify(byStatus.map((r) => [r.status, Number(r.n)]))}; attempts by error ${JSON.stringify(errors.map((r) => [r.error, Number(r.n)]))}; events attempted twice ${dups.length}`);
  } finally {
    await delivery.close();
    await rx.close();
    await t.cleanup();
  }
}

console.log(`node ${process.version}; ${cpus().length} CPUs; sustained run ${SECONDS} s with ${PRODUCERS} producers`);
if (!process.env.BENCH_SKIP_SQLITE) await bench('sqlite');
if (/^(mysql|mariadb):\/\//.test(process.env.DATABASE_URL ?? '')) await bench('mysql');
else console.log('\n(set DATABASE_URL=mysql://... to run the MySQL comparison too)');
