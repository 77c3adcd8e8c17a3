/**
 * What the Metrics port costs one gateway request, in-process (issue 25, item 2): the calls a
 * forwarded request makes (requestDone, the audit commit's timing wrapper and its histogram
 * observe), with prom-client against the no-op port, CPU time per request. The whole-gateway
 * A/B is `run.ts --metrics-ab=1`; on a busy 2-core machine its noise (±5 %) is larger than
 * the effect, so this isolates the effect. Printed, never asserted.
 *
 *   npx tsx bench/gateway/metrics-cost.ts
 */
import { createPrometheusMetrics } from '../../metrics/prometheus.js';
import { noopMetrics, type Metrics } from '../../lib/metrics.js';

const prom = createPrometheusMetrics({ defaultMetrics: false });
const N = Number(process.env.BENCH_N ?? 2_000_000);
/** The gateway's whole CPU per keep-alive small GET, to put the cost in proportion (bench/gateway/run.ts). */
const REQUEST_US = Number(process.env.BENCH_REQUEST_US ?? 160);

/** ns of CPU per request: the pipeline's calls (two performance.now() as finish() takes them, requestDone). */
function pipelineCalls(m: Metrics, n: number): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    m.requestDone('allow', 'read', 'secret', (performance.now() - started) / 1000 + 0.0003);
  }
  const d = process.cpuUsage(t0);
  return ((d.user + d.system) * 1000) / n;
}

/** ns of CPU per commit: audit.service's commit() with the wrapper (a .then and an observe) against without. */
async function auditWrapper(timed: boolean, n: number): Promise<number> {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const committed = Promise.resolve();
    if (timed) {
      const handedAt = performance.now();
      await committed.then(() => prom.metrics.auditCommitted((performance.now() - handedAt) / 1000));
    } else await committed;
  }
  const d = process.cpuUsage(t0);
  return ((d.user + d.system) * 1000) / n;
}

for (let k = 0; k < 3; k++) {
  pipelineCalls(noopMetrics, 200_000);
  pipelineCalls(prom.metrics, 200_000);
  await auditWrapper(false, 200_000);
  await auditWrapper(true, 200_000);
}
const off = pipelineCalls(noopMetrics, N);
const on = pipelineCalls(prom.metrics, N);
const bare = await auditWrapper(false, N / 2);
const wrapped = await auditWrapper(true, N / 2);
const total = on - off + (wrapped - bare);
process.stdout.write(`pipeline calls: ${on.toFixed(0)} ns with prom-client, ${off.toFixed(0)} ns with the no-op port (+${(on - off).toFixed(0)} ns)\n`);
process.stdout.write(`audit commit wrapper: ${wrapped.toFixed(0)} ns vs ${bare.toFixed(0)} ns bare (+${(wrapped - bare).toFixed(0)} ns)\n`);
process.stdout.write(`per forwarded request: +${total.toFixed(0)} ns = ${((total / 1000 / REQUEST_US) * 100).toFixed(2)} % of ${REQUEST_US} µs (the gateway's CPU per keep-alive small GET; BENCH_REQUEST_US)\n`);
