/**
 * What redacting an answer costs (proxy/redact.ts), without the network: a 1 MiB body in
 * 64 KiB chunks (undici's usual size) through a StreamRedactor holding one credential's
 * spellings (what a request with one swapped secret gets), next to the same bytes merely
 * passed through chunk by chunk as the gateway does without a swap. Printed comparison;
 * no assertion.
 *
 *   npx tsx bench/proxy/redact.bench.ts
 */
import { randomBytes } from 'node:crypto';
import { StreamRedactor } from '../../proxy/redact.js';
import { redactionsFor } from '../../proxy/credentials.js';

const MIB = 1024 * 1024;
const CHUNK = 64 * 1024;
const VALUE = 'sk_live_51BenchRealKey0123456789abcdefghijklmnopqrstuvwxyz';
const TOKEN = 'svcph_0123456789abcdef0123456789abcdef';

function body(kind: 'random' | 'json' | 'echoes'): Buffer {
  if (kind === 'random') return Buffer.from(randomBytes(MIB * 0.75).toString('base64'));
  const row = kind === 'json' ? '{"id":"cus_123","email":"a@b.c","metadata":{"k":"sk_live_"},"n":42},' : `{"echo":"${VALUE}"},`;
  return Buffer.from(row.repeat(Math.ceil(MIB / row.length))).subarray(0, MIB);
}

function run(buf: Buffer, redact: boolean): number {
  const r = redact ? new StreamRedactor(redactionsFor(VALUE, TOKEN)) : null;
  let n = 0;
  for (let at = 0; at < buf.length; at += CHUNK) {
    const chunk = buf.subarray(at, at + CHUNK);
    if (r) for (const p of r.push(chunk)) n += p.length;
    else n += chunk.length; // what the gateway does without a swap: the chunk as it came
  }
  if (r) for (const p of r.end()) n += p.length;
  return n;
}

function time(buf: Buffer, redact: boolean, iterations: number): number {
  for (let i = 0; i < 20; i++) run(buf, redact);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) run(buf, redact);
  return Number(process.hrtime.bigint() - t0) / 1000 / iterations;
}

console.log('| body (1 MiB, 64 KiB chunks) | pass through µs | redact µs | redaction cost µs/MiB |');
console.log('|---|---:|---:|---:|');
for (const kind of ['random', 'json', 'echoes'] as const) {
  const buf = body(kind);
  const copy = time(buf, false, 200);
  const redact = time(buf, true, 200);
  console.log(`| ${kind} | ${copy.toFixed(0)} | ${redact.toFixed(0)} | ${(redact - copy).toFixed(0)} |`);
}
