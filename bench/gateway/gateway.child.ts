/**
 * OUR gateway: the real service (bin/service.ts startService: API, proxy, jobs, audit
 * writer) on SQLite in the bench's temp dir, exactly as `npm start` wires it, with the
 * upstream reached through GATEWAY_UPSTREAM_OVERRIDES and trusted through
 * GATEWAY_UPSTREAM_CA_FILE (as test/integration/gateway.test.ts does). The load generator
 * sets up environments, secrets and policies through the API like a developer would.
 *
 * IPC commands beyond `stats`: `pending` (approvals waiting), `decideHeld` (decides every
 * pending approval through the approvals service, as the decision endpoint does: paths
 * ending in an even number approved `once`, odd ones denied), `audit` (flushes the audit
 * writer and counts the entries of one environment), `heapSnapshot`, `heapSampling` and
 * `heapProfile` (memory investigations of the hold test), `exit`. BENCH_METRICS=off starts the
 * service with the no-op Metrics port (run.ts --metrics-ab).
 */
import { randomBytes } from 'node:crypto';
import { writeHeapSnapshot } from 'node:v8';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { loadConfig } from '../../config/config.js';
import { createLogger } from '../../lib/log.js';
import { startService } from '../../bin/service.js';
import { ready, serveIpc } from './ipc.js';

const dir = process.env.BENCH_DIR!;
const apiKey = `sk_${randomBytes(20).toString('hex')}`;
const up = `127.0.0.1:${process.env.BENCH_UPSTREAM_PORT}`;
const config = loadConfig({
  DATABASE_URL: process.env.BENCH_GATEWAY_DATABASE_URL || `sqlite:${path.join(dir, 'gateway.sqlite')}`,
  DATA_DIR: path.join(dir, 'gateway-data'),
  HOST: '127.0.0.1',
  API_PORT: '0',
  PROXY_PORT: '0',
  GATEWAY_RUNTIME: 'none',
  GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
  GATEWAY_BOOTSTRAP_API_KEY: apiKey,
  GATEWAY_UPSTREAM_OVERRIDES: `bench.example=${up},hold.example=${up}`,
  GATEWAY_UPSTREAM_CA_FILE: process.env.BENCH_UPSTREAM_CA_FILE!,
  LOG_LEVEL: process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info',
});
const log = createLogger(config.logLevel);
let inspector: Session | null = null;
// BENCH_METRICS=off: the no-op Metrics port (run.ts --metrics-ab, issue 25 item 2).
const svc = await startService(config, log, { metrics: process.env.BENCH_METRICS !== 'off' });

serveIpc({
  async pending() {
    const [row] = await svc.db('approvals').where({ status: 'pending' }).count({ n: '*' });
    return Number(row!.n);
  },
  async decideHeld(arg: { concurrency?: number }) {
    const rows: Array<{ id: string; path: string; developer_id: string }> = await svc.db('approvals')
      .where({ status: 'pending' })
      .select('id', 'path', 'developer_id');
    let approved = 0;
    let denied = 0;
    let next = 0;
    const started = performance.now();
    const worker = async () => {
      while (next < rows.length) {
        const r = rows[next++]!;
        const approve = Number(/(\d+)$/.exec(r.path)?.[1] ?? 1) % 2 === 0;
        const value = approve ? { decision: 'approve', scope: { kind: 'once' } } : { decision: 'deny' };
        await svc.approvals.decide(r.id, { via: 'api_key', developerId: r.developer_id }, { ok: true, value });
        if (approve) approved++;
        else denied++;
      }
    };
    await Promise.all(Array.from({ length: arg?.concurrency ?? 8 }, worker));
    return { approved, denied, ms: performance.now() - started };
  },
  async audit(arg: { environmentId: string }) {
    await svc.audit.flush();
    const [row] = await svc.db('audit_log').where({ environment_id: arg.environmentId }).count({ n: '*' });
    const reasons: Array<{ reason: string; status: number; n: number }> = await svc.db('audit_log')
      .where({ environment_id: arg.environmentId })
      .select('reason', 'status')
      .count({ n: '*' })
      .groupBy('reason', 'status');
    return { entries: Number(row!.n), byReason: reasons.map((r) => ({ ...r, n: Number(r.n) })), writer: svc.audit.stats() };
  },
  heapSnapshot(arg: { file: string }) {
    return writeHeapSnapshot(arg.file);
  },
  /** Sampling heap profile: start, then `heapProfile` writes what is live with its allocation stacks. */
  async heapSampling() {
    inspector ??= new Session();
    inspector.connect();
    await inspector.post('HeapProfiler.enable');
    await inspector.post('HeapProfiler.startSampling', { samplingInterval: 1024 });
  },
  async heapProfile(arg: { file: string }) {
    const { profile } = await inspector!.post('HeapProfiler.getSamplingProfile');
    await inspector!.post('HeapProfiler.stopSampling');
    writeFileSync(arg.file, JSON.stringify(profile));
    return arg.file;
  },
  async exit() {
    setTimeout(() => process.exit(0), 10_000).unref();
    await svc.close();
    setTimeout(() => process.exit(0), 20);
  },
});
ready({ apiUrl: svc.apiUrl, apiKey, proxyUrl: svc.proxyUrl });
