/**
 * Leaf certificate timings: `npx tsx bench/certs/leaf.bench.ts [misses] [hits]`.
 * Prints numbers; asserts nothing (ARCHITECTURE.md: benchmarks are printed comparisons).
 *
 * Measures: CA generation, issuer creation (the one leaf key), a leaf on a cache miss
 * (build + sign), a cached lookup, the SNI callback on a miss (createSecureContext) and a
 * hit, and, for comparison, what http-mitm-proxy does per host when left to itself
 * (its CA.generateServerCertificateKeys: a new RSA key and a forge signature per host).
 */
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SecureContext } from 'node:tls';
import { generateCa } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { createSniCallback } from '../../certs/mitm.js';

const misses = Number(process.argv[2] ?? 1000);
const hits = Number(process.argv[3] ?? 200_000);

function summary(samplesMs: number[]): string {
  const s = [...samplesMs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const pct = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return `mean ${fmt(mean)}  p50 ${fmt(pct(0.5))}  p99 ${fmt(pct(0.99))}  max ${fmt(s[s.length - 1]!)}  (n=${s.length})`;
}

function fmt(ms: number): string {
  return ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(1)} µs`;
}

async function timeAsync<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const v = await fn();
  return [v, performance.now() - t];
}

const rows: Array<[string, string]> = [];

const caTimes: number[] = [];
let ca = await generateCa();
for (let i = 0; i < 3; i++) {
  const [c, ms] = await timeAsync(() => generateCa());
  ca = c;
  caTimes.push(ms);
}
rows.push(['generateCa (RSA 2048 + self-signed cert)', summary(caTimes)]);

const issuerTimes: number[] = [];
let issuer = await createLeafIssuer(ca, { cacheSize: misses + 1000 });
for (let i = 0; i < 3; i++) {
  const [iss, ms] = await timeAsync(() => createLeafIssuer(ca, { cacheSize: misses + 1000 }));
  issuer = iss;
  issuerTimes.push(ms);
}
rows.push(['createLeafIssuer (the one leaf key, once)', summary(issuerTimes)]);

for (let i = 0; i < 50; i++) issuer.getLeaf(`jit-warmup-${i}.example.com`); // let V8 optimise first
const hosts = Array.from({ length: misses }, (_, i) => `host-${i}.bench.example.com`);
const missTimes: number[] = [];
for (const h of hosts) {
  const t = performance.now();
  issuer.getLeaf(h);
  missTimes.push(performance.now() - t);
}
rows.push(['getLeaf, cache miss (build + sign)', summary(missTimes)]);

const ipTimes: number[] = [];
for (let i = 0; i < Math.min(misses, 250); i++) {
  const t = performance.now();
  issuer.getLeaf(`10.0.${i >> 8}.${i & 255}`);
  ipTimes.push(performance.now() - t);
}
rows.push(['getLeaf, cache miss, IPv4 literal', summary(ipTimes)]);

{
  const t = performance.now();
  for (let i = 0; i < hits; i++) issuer.getLeaf(hosts[i % hosts.length]!);
  const per = (performance.now() - t) / hits;
  rows.push(['getLeaf, cache hit', `mean ${fmt(per)}  (n=${hits})`]);
}

const sni = createSniCallback(issuer, { cacheSize: misses });
const sniCall = (name: string): SecureContext => {
  let out: SecureContext | undefined;
  sni(name, (err, ctx) => {
    if (err) throw err;
    out = ctx;
  });
  return out!;
};
const sniMiss: number[] = [];
for (const h of hosts.slice(0, Math.min(misses, 500))) {
  const t = performance.now();
  sniCall(h); // leaf cached already: this is createSecureContext
  sniMiss.push(performance.now() - t);
}
rows.push(['SNI callback, context miss (leaf cached)', summary(sniMiss)]);
{
  const n = Math.min(hits, 100_000);
  const t = performance.now();
  for (let i = 0; i < n; i++) sniCall(hosts[i % sniMiss.length]!);
  rows.push(['SNI callback, context hit', `mean ${fmt((performance.now() - t) / n)}  (n=${n})`]);
}

// What http-mitm-proxy does per new host without our hooks (a synchronous RSA key
// generation plus a pure-JS forge signature, and three files written in clear).
{
  const dir = await fs.mkdtemp(path.join(tmpdir(), 'gw-bench-mitm-'));
  try {
    const { default: LibraryCa } = (await import('http-mitm-proxy/dist/lib/ca.js')) as unknown as {
      default: { create(dir: string, cb: (err: Error | null, ca: { generateServerCertificateKeys(hosts: string[], cb: () => void): void }) => void): void };
    };
    const libCa = await new Promise<{ generateServerCertificateKeys(hosts: string[], cb: () => void): void }>((resolve, reject) =>
      LibraryCa.create(dir, (err, c) => (err ? reject(err) : resolve(c))),
    );
    const lib: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      libCa.generateServerCertificateKeys([`lib-${i}.example.com`], () => {});
      lib.push(performance.now() - t);
    }
    rows.push(['(comparison) http-mitm-proxy default, per new host', summary(lib)]);
    await new Promise((r) => setTimeout(r, 100)); // its file writes are fire-and-forget
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

const width = Math.max(...rows.map((r) => r[0].length));
console.log(`certs leaf bench: node ${process.version}, ${misses} misses, ${hits} hits\n`);
for (const [name, value] of rows) console.log(`${name.padEnd(width)}  ${value}`);
console.log(`\nissuer stats: ${JSON.stringify(issuer.stats())}`);
