/**
 * The audit writer under concurrency and store failure, on the suite's engine (MySQL when
 * DATABASE_URL says so, SQLite otherwise): many appends at once from one service, two
 * services (two knex pools, as two processes would have) on one MySQL database, and a
 * store outage in the middle of a stream of entries. Each developer's chain must come out
 * contiguous (seq 1..n), verify ok, every entry exactly once.
 */
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { createDb, parseDatabaseUrl, type Db } from '../../store/db.js';
import { ServiceClock } from '../../lib/clock.js';
import { createLogger, silentLogger } from '../../lib/log.js';
import { freshDb, usingMysql, type FreshDb } from '../helpers/db.js';
import { createAuditService, type AuditEntryInput, type AuditService } from '../../audit/audit.service.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const mod = (p: string): string => pathToFileURL(join(ROOT, p)).href;

/** A writer process: `n` entries for one developer from 10 callers, half record(), half recordLater(). */
const CHILD = `
import { createDb, parseDatabaseUrl } from '${mod('store/db.ts')}';
import { ServiceClock } from '${mod('lib/clock.ts')}';
import { silentLogger } from '${mod('lib/log.ts')}';
import { createAuditService } from '${mod('audit/audit.service.ts')}';
const [url, dev, tag, n] = process.argv.slice(2);
const db = await createDb(parseDatabaseUrl(url));
const audit = createAuditService({ db, clock: new ServiceClock(), log: silentLogger });
await Promise.all(Array.from({ length: 10 }, async (_, c) => {
  for (let k = 0; k < Number(n) / 10; k++) {
    const e = { developer_id: dev, environment_id: null, method: 'GET', host: tag + '.example',
      path: '/' + c + '/' + k, credential: 'none', decision: 'allow', reason: 'rule', status: 200 };
    if (k % 2) await audit.record(e); else audit.recordLater(e);
  }
}));
const { abandoned } = await audit.close();
await db.destroy();
process.stdout.write(JSON.stringify({ tag, abandoned, stats: audit.stats() }));
`;

/** Fresh developer ids: the tests share one database, each works on chains of its own. */
function newDevs(): [string, string] {
  return [`dev_${randomBytes(12).toString('hex')}`, `dev_${randomBytes(12).toString('hex')}`];
}

function entry(developerId: string, i: number, extra: Partial<AuditEntryInput> = {}): AuditEntryInput {
  return {
    developer_id: developerId,
    environment_id: `env_${(i % 5).toString(16).padStart(24, '0')}`,
    method: 'POST',
    host: 'slack.com',
    path: `/api/chat.postMessage?channel=C${i}`,
    connector: 'slack',
    category: 'send',
    credential: 'connection',
    decision: 'ask',
    reason: 'high_risk',
    matched_rules: [],
    status: 200,
    upstream_status: 200,
    bytes_in: i,
    bytes_out: i,
    duration_ms: 1,
    ...extra,
  };
}

async function expectContiguous(db: Db, audit: AuditService, developerId: string, n: number): Promise<string[]> {
  const rows: Array<{ id: string; seq: number }> = await db('audit_log').where({ developer_id: developerId }).orderBy('seq').select('id', 'seq');
  expect(rows.map((r) => Number(r.seq))).to.deep.equal(Array.from({ length: n }, (_, i) => i + 1));
  expect(new Set(rows.map((r) => r.id)).size).to.equal(n);
  const head = await db('audit_chain_heads').where({ developer_id: developerId }).first();
  expect(Number(head.seq)).to.equal(n);
  expect(await audit.verify(developerId)).to.deep.equal({ ok: true, checked: n, first_broken_id: null, checked_from: rows[0]?.id ?? null });
  return rows.map((r) => r.id);
}

/** 20 callers, `perCaller` entries each, alternating record() and recordLater(), over both developers. */
async function hammer(services: AuditService[], perCaller: number, DEVS: [string, string]): Promise<string[]> {
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: 20 }, async (_, caller) => {
      const audit = services[caller % services.length]!;
      for (let k = 0; k < perCaller; k++) {
        const i = caller * perCaller + k;
        const e = entry(DEVS[i % 2]!, i);
        if ((caller + k) % 2 === 0) {
          ids.push((await audit.record(e)).id);
        } else {
          const id = audit.recordLater(e);
          expect(id).to.be.a('string');
          ids.push(id!);
          if (k % 5 === 0) await new Promise((r) => setImmediate(r));
        }
      }
    }),
  );
  await Promise.all(services.map((s) => s.flush()));
  return ids;
}

describe(`audit writer under concurrency (${usingMysql() ? 'MySQL' : 'SQLite'})`, function () {
  this.timeout(120_000);
  let f: FreshDb;

  let DEVS: [string, string];

  before(async () => {
    f = await freshDb();
  });
  beforeEach(() => {
    DEVS = newDevs();
  });
  after(async () => {
    await f?.cleanup();
  });

  it('500 entries from 20 parallel record/recordLater callers: contiguous chains, verify ok', async () => {
    const audit = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    const ids = await hammer([audit], 25, DEVS);
    expect(ids).to.have.length(500);
    const stored = [...(await expectContiguous(f.db, audit, DEVS[0]!, 250)), ...(await expectContiguous(f.db, audit, DEVS[1]!, 250))];
    expect(new Set(stored)).to.deep.equal(new Set(ids));
    expect(audit.stats()).to.include({ queued: 0, dropped: 0, failures: 0 });
    await audit.close();
  });

  it('two services (two connection pools) on one MySQL database: 500 entries, contiguous chains, verify ok', async function () {
    if (!usingMysql()) {
      // Two pools on one SQLite file in ONE process cannot both make progress: better-sqlite3
      // blocks the event loop while it waits for the file lock the other pool holds. Two
      // processes on one SQLite file are the next test.
      this.skip();
    }
    const second = await createDb(parseDatabaseUrl(f.url)!);
    try {
      const a = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
      const b = createAuditService({ db: second, clock: new ServiceClock(), log: silentLogger });
      const ids = await hammer([a, b], 25, DEVS);
      const stored = [...(await expectContiguous(f.db, a, DEVS[0]!, 250)), ...(await expectContiguous(second, b, DEVS[1]!, 250))];
      expect(new Set(stored)).to.deep.equal(new Set(ids));
      // Batches of both services landed interleaved in one chain.
      expect(a.stats().written + b.stats().written).to.be.greaterThan(0);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await second.destroy();
    }
  });

  it('verify during a stream of appends is ok every time (it checks up to the head it read)', async () => {
    const audit = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    const verifier = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    let done = false;
    const results: Array<{ ok: boolean }> = [];
    const verifying = (async () => {
      while (!done) {
        results.push(await verifier.verify(DEVS[0]!, { pageSize: 7 }));
        // An empty chain is read without a page, so without this the loop would be all
        // microtasks on SQLite and starve the writers' setImmediate.
        await new Promise((r) => setImmediate(r));
      }
    })();
    await hammer([audit], 10, DEVS);
    done = true;
    await verifying;
    expect(results.length).to.be.greaterThan(1);
    expect(results.filter((r) => !r.ok)).to.deep.equal([]);
    await expectContiguous(f.db, audit, DEVS[0]!, 100);
  });

  it('two processes on one database: 500 entries, one contiguous chain, verify ok', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-audit-'));
    try {
      const script = join(dir, 'writer.mts');
      writeFileSync(script, CHILD);
      const run = promisify(execFile);
      const outs = await Promise.all(['a', 'b'].map((tag) => run(process.execPath, ['--import', 'tsx', script, f.url, DEVS[0], tag, '250'], { cwd: ROOT })));
      for (const o of outs) expect(JSON.parse(o.stdout)).to.deep.include({ abandoned: 0 });
      const audit = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
      await expectContiguous(f.db, audit, DEVS[0]!, 500);
      const hosts: Array<{ host: string }> = await f.db('audit_log').where({ developer_id: DEVS[0] }).select('host');
      expect(hosts.filter((h) => h.host === 'a.example')).to.have.length(250);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the first appends of a new developer from many callers at once create one head, no deadlock', async () => {
    const second = usingMysql() ? await createDb(parseDatabaseUrl(f.url)!) : f.db;
    try {
      const services = [f.db, second].map((db) => createAuditService({ db, clock: new ServiceClock(), log: silentLogger }));
      const dev = DEVS[0];
      await Promise.all(Array.from({ length: 40 }, (_, i) => services[i % 2]!.record(entry(dev, i))));
      await expectContiguous(f.db, services[0]!, dev, 40);
      expect(await f.db('audit_chain_heads').where({ developer_id: dev }).count({ n: '*' }).first()).to.deep.include({ n: 1 });
    } finally {
      if (second !== f.db) await second.destroy();
    }
  });

  it('store outage: recordLater keeps queueing, nothing is lost, the chain is whole once the store is back', async () => {
    const lines: string[] = [];
    const log = createLogger('debug', new Writable({ write(c, _e, cb) { lines.push(String(c)); cb(); } }) as never);
    const audit = createAuditService({ db: f.db, clock: new ServiceClock(), log, batch: { retryBaseMs: 10, retryMaxMs: 50 } });
    const dev = DEVS[0]!;
    for (let i = 0; i < 10; i++) audit.recordLater(entry(dev, i));
    await audit.flush();
    // The store "goes away": its tables cannot be written.
    await f.db.schema.renameTable('audit_chain_heads', 'audit_chain_heads_away');
    const placeholder = 'svcph_0123456789abcdef0123456789abcdef';
    const during: string[] = [];
    try {
      for (let i = 10; i < 60; i++) during.push(audit.recordLater(entry(dev, i, { path: `/x?token=${placeholder}` }))!);
      let failed: unknown;
      await audit.flush().catch((err) => (failed = err));
      expect(failed, 'flush rejects while the store is down').to.not.equal(undefined);
      // Retries go on in the background: wait for the second failed attempt, not a fixed time.
      while (audit.stats().failures < 2) await new Promise((r) => setTimeout(r, 5));
      expect(audit.stats().queued).to.equal(50);
      expect(audit.stats().failures).to.be.at.least(2);
    } finally {
      await f.db.schema.renameTable('audit_chain_heads_away', 'audit_chain_heads');
    }
    const end = Date.now() + 10_000;
    while (audit.stats().queued > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(audit.stats()).to.include({ queued: 0, dropped: 0, failures: 0 });
    const ids = await expectContiguous(f.db, audit, dev, 60);
    expect(ids.slice(10)).to.deep.equal(during);
    const out = lines.join('');
    expect(out).to.include('batch write failed');
    expect(out).to.not.include(placeholder);
    expect(out).to.not.include('token=');
    await audit.close();
  });

  it('two writers taking turns on one developer: each chains onto the head the other moved (MySQL: the one-round-trip append notices and retries locked)', async () => {
    const a = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    const b = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    const dev = DEVS[0]!;
    for (let i = 0; i < 12; i++) await (i % 3 === 0 ? b : a).record(entry(dev, i));
    await expectContiguous(f.db, a, dev, 12);
    // A head moved without rows (tampering, or a bug): an append never commits rows whose
    // chain does not start at the head; verify tells what happened.
    await f.db('audit_chain_heads').where({ developer_id: dev }).update({ hash: 'f'.repeat(64) });
    await a.record(entry(dev, 12));
    const v = await a.verify(dev);
    expect(v.ok).to.equal(false);
    await a.close();
    await b.close();
  });

  it('close() writes what is queued before the pool goes away', async () => {
    const audit = createAuditService({ db: f.db, clock: new ServiceClock(), log: silentLogger });
    for (let i = 0; i < 7; i++) audit.recordLater(entry(DEVS[1]!, i));
    expect(await audit.close()).to.deep.equal({ abandoned: 0 });
    await expectContiguous(f.db, audit, DEVS[1]!, 7);
    expect(audit.recordLater(entry(DEVS[1]!, 8))).to.equal(null);
  });
});
