/**
 * Audit append throughput: the batched writer (recordLater: one transaction per batch of up
 * to 200) versus one transaction per entry (record), on SQLite, and on MySQL too when
 * DATABASE_URL names one. Also verify's walk speed. Printed comparison, never a timed
 * assertion (ARCHITECTURE.md "bench/").
 *
 *   npx tsx bench/audit/record.bench.ts
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/gw_bench npx tsx bench/audit/record.bench.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { createDb, parseDatabaseUrl, type Db, type DbTarget } from '../../store/db.js';
import { migrateLatest } from '../../store/migrate.js';
import { ServiceClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createAuditService, type AuditEntryInput } from '../../audit/audit.service.js';

const N_SINGLE = Number(process.env.BENCH_SINGLE ?? 2000);
const N_BATCH = Number(process.env.BENCH_BATCH ?? 20000);

function entry(developerId: string, i: number): AuditEntryInput {
  return {
    developer_id: developerId,
    environment_id: `env_${(i % 50).toString(16).padStart(24, '0')}`,
    method: i % 3 ? 'GET' : 'POST',
    host: 'gmail.googleapis.com',
    path: `/gmail/v1/users/me/messages/${i}?format=full&fields=id,payload`,
    connector: 'gmail',
    category: i % 3 ? 'read' : 'send',
    credential: 'connection',
    decision: i % 3 ? 'allow' : 'ask',
    reason: i % 3 ? 'rule' : 'high_risk',
    matched_rules: [i % 7, 12],
    approval_id: null,
    grant_id: null,
    status: 200,
    upstream_status: 200,
    bytes_in: 512,
    bytes_out: 20_000 + i,
    duration_ms: 40 + (i % 100),
  };
}

async function freshTarget(kind: 'sqlite' | 'mysql'): Promise<{ name: string; db: Db; cleanup(): Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'gw-audit-bench-'));
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

function rate(n: number, ms: number): string {
  return `${Math.round((n / ms) * 1000).toLocaleString('en-US').padStart(9)} entries/s  (${n.toLocaleString('en-US')} in ${ms.toFixed(0)} ms)`;
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

async function bench(kind: 'sqlite' | 'mysql'): Promise<void> {
  const t = await freshTarget(kind);
  try {
    const audit = createAuditService({ db: t.db, clock: new ServiceClock(), log: silentLogger });
    const dev = (tag: string) => `dev_${tag.padEnd(24, '0')}`;
    console.log(`\n== ${t.name}`);

    // Warm-up (pool, statement cache, the head row).
    for (let i = 0; i < 50; i++) await audit.record(entry(dev('warm'), i));

    const seqMs = await timed(async () => {
      for (let i = 0; i < N_SINGLE; i++) await audit.record(entry(dev('a'), i));
    });
    console.log(`one transaction per entry, 1 caller       ${rate(N_SINGLE, seqMs)}`);

    const concMs = await timed(async () => {
      let next = 0;
      await Promise.all(Array.from({ length: 20 }, async () => {
        while (next < N_SINGLE) await audit.record(entry(dev('b'), next++));
      }));
    });
    console.log(`one transaction per entry, 20 callers     ${rate(N_SINGLE, concMs)}`);

    const batchMs = await timed(async () => {
      for (let i = 0; i < N_BATCH; i++) audit.recordLater(entry(dev('c'), i));
      await audit.flush();
    });
    console.log(`batched recordLater (≤200 per tx)         ${rate(N_BATCH, batchMs)}`);

    // A stream: 20 callers each queueing then yielding, as proxy responses finish.
    const streamMs = await timed(async () => {
      let next = 0;
      await Promise.all(Array.from({ length: 20 }, async () => {
        while (next < N_BATCH) {
          audit.recordLater(entry(dev(`d${next % 20}`), next++));
          if (next % 10 === 0) await new Promise((r) => setImmediate(r));
        }
      }));
      await audit.flush();
    });
    console.log(`batched, stream from 20 callers, 20 devs  ${rate(N_BATCH, streamMs)}`);

    const best = Math.max(N_SINGLE / seqMs, N_SINGLE / concMs);
    console.log(`speed-up batched vs best per-entry: ${((N_BATCH / batchMs) / best).toFixed(1)}x`);

    let checked = 0;
    const verifyMs = await timed(async () => {
      const r = await audit.verify(dev('c'));
      if (!r.ok) throw new Error(`chain broken: ${JSON.stringify(r)}`);
      checked = r.checked;
    });
    console.log(`verify (1,000-row pages)                  ${rate(checked, verifyMs).replace('entries', '   rows')}`);
    const s = audit.stats();
    if (s.queued !== 0 || s.dropped !== 0) throw new Error(`writer left ${s.queued} queued, dropped ${s.dropped}`);
    await audit.close();
  } finally {
    await t.cleanup();
  }
}

console.log(`node ${process.version}; ${N_SINGLE} entries per one-tx-per-entry run, ${N_BATCH} per batched run`);
await bench('sqlite');
if (/^(mysql|mariadb):\/\//.test(process.env.DATABASE_URL ?? '')) await bench('mysql');
else console.log('\n(set DATABASE_URL=mysql://... to run the MySQL comparison too)');
