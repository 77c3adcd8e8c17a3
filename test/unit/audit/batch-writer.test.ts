import { expect } from 'chai';
import { Writable } from 'node:stream';
import { createLogger } from '../../../lib/log.js';
import { AuditBatchWriter, ONE_MORE_TURN_BELOW, type AuditSink } from '../../../audit/batch-writer.js';
import { sanitizeEntry, type UnchainedRow } from '../../../audit/entry.js';

const PLACEHOLDER = 'svcph_00112233445566778899aabbccddeeff';

function row(i: number, dev = 'dev_a'): UnchainedRow {
  return sanitizeEntry(
    {
      developer_id: dev, environment_id: null, method: 'GET', host: 'api.example.com',
      path: `/items/${i}?token=${PLACEHOLDER}`, credential: 'none', decision: 'allow', reason: 'rule', status: 200,
    },
    `aud_${i.toString(16).padStart(24, '0')}`,
    i,
  );
}

/** An in-memory store that can be taken down. */
class FakeSink implements AuditSink {
  stored: UnchainedRow[] = [];
  batches: number[] = [];
  down = false;
  /** Commit the next batch, then fail as if the reply was lost. */
  commitThenFail = false;
  attempts = 0;
  async writeBatch(rows: UnchainedRow[]): Promise<void> {
    this.attempts++;
    await new Promise((r) => setImmediate(r));
    if (this.down) {
      // Drivers put values in messages (knex inlines bindings): the writer must not log it.
      throw Object.assign(new Error(`connect ECONNREFUSED while inserting ${rows[0]?.path}`), { code: 'ECONNREFUSED' });
    }
    const ids = new Set(this.stored.map((r) => r.id));
    if (rows.some((r) => ids.has(r.id))) throw Object.assign(new Error('duplicate'), { code: 'ER_DUP_ENTRY' });
    this.stored.push(...rows);
    this.batches.push(rows.length);
    if (this.commitThenFail) {
      this.commitThenFail = false;
      throw Object.assign(new Error('Connection lost: The server closed the connection.'), { code: 'PROTOCOL_CONNECTION_LOST' });
    }
  }
  async existingIds(ids: string[]): Promise<Set<string>> {
    if (this.down) throw Object.assign(new Error('down'), { code: 'ECONNREFUSED' });
    const have = new Set(this.stored.map((r) => r.id));
    return new Set(ids.filter((id) => have.has(id)));
  }
}

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: createLogger('debug', stream as never), lines };
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const fast = { retryBaseMs: 5, retryMaxMs: 20 };

describe('audit batched writer (audit/batch-writer)', () => {
  it('writes what is queued in batches of at most maxBatch, in order, once each', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, { ...fast, maxBatch: 200 });
    for (let i = 1; i <= 450; i++) expect(w.enqueue(row(i))).to.equal(true);
    await w.flush();
    expect(sink.stored.map((r) => r.id)).to.deep.equal(Array.from({ length: 450 }, (_, i) => row(i + 1).id));
    expect(Math.max(...sink.batches)).to.be.at.most(200);
    expect(sink.batches.length).to.be.at.most(4);
    expect(w.stats()).to.include({ queued: 0, written: 450, commits: sink.batches.length, dropped: 0, failures: 0 });
  });

  it('writes a lone entry on the next turn of the event loop, with no timer and no flush', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, fast);
    w.enqueue(row(1));
    expect(sink.stored).to.have.length(0);
    await new Promise((r) => setImmediate(r));
    expect(sink.attempts).to.equal(1); // started at once
    await until(() => sink.stored.length === 1);
    expect(sink.batches).to.deep.equal([1]);
  });

  it('under load, a commit waits one more turn of the event loop: the next turn\'s entries share it', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, fast);
    const waits = [w.commit(row(1)), w.commit(row(2))];
    // Answers completed on the next turn (after the writer's first look at its queue).
    setImmediate(() => waits.push(w.commit(row(3)), w.commit(row(4)), w.commit(row(5))));
    await until(() => sink.stored.length === 5);
    await Promise.all(waits);
    expect(sink.batches).to.deep.equal([5]);
    expect(w.stats()).to.include({ written: 5, commits: 1 });
  });

  it('a batch already large does not wait the turn', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, fast);
    for (let i = 1; i <= ONE_MORE_TURN_BELOW; i++) w.enqueue(row(i));
    await new Promise((r) => setImmediate(r));
    expect(sink.attempts).to.equal(1); // started on the first turn
    setImmediate(() => w.enqueue(row(ONE_MORE_TURN_BELOW + 1)));
    await until(() => sink.stored.length === ONE_MORE_TURN_BELOW + 1);
    expect(sink.batches).to.deep.equal([ONE_MORE_TURN_BELOW, 1]);
  });

  describe('commit(): the answer waits for its entry (issue 10, item 3)', () => {
    it('resolves only once the entry is stored', async () => {
      const sink = new FakeSink();
      const w = new AuditBatchWriter(sink, capture().log, fast);
      let done = false;
      const p = w.commit(row(1)).then(() => (done = true));
      expect(done).to.equal(false);
      await p;
      expect(sink.stored.map((r) => r.id)).to.deep.equal([row(1).id]);
    });

    it('group commit: entries that arrive while a commit is in flight all go into the next one, at once', async () => {
      const sink = new FakeSink();
      const w = new AuditBatchWriter(sink, capture().log, fast);
      const first = w.commit(row(1));
      await new Promise((r) => setImmediate(r)); // the first commit is in flight
      expect(sink.attempts).to.equal(1);
      const rest = Array.from({ length: 20 }, (_, i) => w.commit(row(i + 2)));
      await Promise.all([first, ...rest]);
      expect(sink.batches).to.deep.equal([1, 20]);
    });

    it('a failed attempt rejects its waiters at once; the entries stay queued and are written when the store is back', async () => {
      const sink = new FakeSink();
      const w = new AuditBatchWriter(sink, capture().log, fast);
      sink.down = true;
      const results = await Promise.allSettled([1, 2, 3].map((i) => w.commit(row(i))));
      expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected', 'rejected']);
      expect(((results[0] as PromiseRejectedResult).reason as { code: string }).code).to.equal('ECONNREFUSED');
      expect(w.stats().queued).to.equal(3);
      sink.down = false;
      await w.commit(row(4));
      expect(sink.stored.map((r) => r.id)).to.deep.equal([1, 2, 3, 4].map((i) => row(i).id));
    });

    it('a store that hangs: the waiter gives up after commitWaitMs (the entry stays queued)', async () => {
      const hanging: AuditSink = { writeBatch: () => new Promise(() => {}), existingIds: async () => new Set() };
      const w = new AuditBatchWriter(hanging, capture().log, { ...fast, commitWaitMs: 30 });
      const started = Date.now();
      const code = await w.commit(row(1)).then(() => 'ok', (e: { code: string }) => e.code);
      expect(code).to.equal('timeout');
      expect(Date.now() - started).to.be.within(25, 1000);
      expect(w.stats().queued).to.equal(1);
    });

    it('a full queue or a closed writer rejects at once', async () => {
      const sink = new FakeSink();
      const w = new AuditBatchWriter(sink, capture().log, { ...fast, maxQueue: 2 });
      sink.down = true;
      w.enqueue(row(1));
      w.enqueue(row(2));
      const full = await w.commit(row(3)).then(() => 'ok', (e: { code: string }) => e.code);
      expect(full).to.equal('queue_full');
      sink.down = false;
      await w.close(1000);
      const closed = await w.commit(row(4)).then(() => 'ok', (e: { code: string }) => e.code);
      expect(closed).to.equal('closed');
    });

    it('close() rejects the waiters of what it could not write', async () => {
      const sink = new FakeSink();
      const w = new AuditBatchWriter(sink, capture().log, { ...fast, retryBaseMs: 1000, retryMaxMs: 1000 });
      sink.down = true;
      await w.commit(row(1)).catch(() => {});
      const waiting = w.commit(row(2)).then(() => 'ok', (e: { code: string }) => e.code);
      await w.close(50);
      expect(await waiting).to.be.oneOf(['closed', 'ECONNREFUSED']);
    });
  });

  it('flush resolves at once when nothing is queued', async () => {
    const w = new AuditBatchWriter(new FakeSink(), capture().log, fast);
    await w.flush();
  });

  it('store outage: entries stay queued and are written once it is back, none lost, no secret or value in the log', async () => {
    const sink = new FakeSink();
    const { log, lines } = capture();
    const w = new AuditBatchWriter(sink, log, fast);
    sink.down = true;
    for (let i = 1; i <= 30; i++) w.enqueue(row(i));
    let failed: unknown;
    await w.flush().catch((err) => (failed = err));
    expect((failed as { code?: string })?.code).to.equal('ECONNREFUSED');
    await until(() => w.stats().failures >= 4); // the background retry keeps going
    for (let i = 31; i <= 40; i++) w.enqueue(row(i));
    expect(w.stats()).to.include({ queued: 40, written: 0, last_error: 'ECONNREFUSED' });
    expect(w.stats().failures).to.be.at.least(2);
    sink.down = false;
    await until(() => w.stats().queued === 0);
    expect(sink.stored.map((r) => r.id)).to.deep.equal(Array.from({ length: 40 }, (_, i) => row(i + 1).id));
    expect(w.stats()).to.include({ written: 40, dropped: 0, failures: 0 });
    const out = lines.join('');
    expect(out).to.include('ECONNREFUSED');
    expect(out).to.include('batch write failed');
    expect(out).to.include('writing again');
    expect(out).to.not.include(PLACEHOLDER);
    expect(out).to.not.include('/items/');
  });

  it('a commit whose reply was lost is not written twice', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, fast);
    for (let i = 1; i <= 5; i++) w.enqueue(row(i));
    sink.commitThenFail = true;
    await w.flush().catch(() => {});
    for (let i = 6; i <= 8; i++) w.enqueue(row(i));
    await until(() => w.stats().queued === 0);
    await w.flush();
    expect(sink.stored.map((r) => r.id)).to.deep.equal(Array.from({ length: 8 }, (_, i) => row(i + 1).id));
    expect(w.stats()).to.include({ written: 8, queued: 0 });
  });

  it('is bounded: beyond maxQueue new entries are refused and counted, earlier ones kept', async () => {
    const sink = new FakeSink();
    const { log, lines } = capture();
    const w = new AuditBatchWriter(sink, log, { ...fast, maxQueue: 5 });
    sink.down = true;
    const accepted = Array.from({ length: 8 }, (_, i) => w.enqueue(row(i + 1)));
    expect(accepted).to.deep.equal([true, true, true, true, true, false, false, false]);
    expect(w.stats()).to.include({ queued: 5, dropped: 3 });
    expect(lines.join('')).to.include('entries dropped');
    sink.down = false;
    await until(() => w.stats().queued === 0);
    expect(sink.stored.map((r) => r.id)).to.deep.equal([1, 2, 3, 4, 5].map((i) => row(i).id));
  });

  it('close writes what is queued, then refuses entries', async () => {
    const sink = new FakeSink();
    const w = new AuditBatchWriter(sink, capture().log, fast);
    for (let i = 1; i <= 3; i++) w.enqueue(row(i));
    expect(await w.close(1000)).to.deep.equal({ abandoned: 0 });
    expect(sink.stored).to.have.length(3);
    expect(w.enqueue(row(4))).to.equal(false);
    expect(w.stats().dropped).to.equal(1);
  });

  it('close gives up after its timeout while the store is down, and says how many entries were lost', async () => {
    const sink = new FakeSink();
    const { log, lines } = capture();
    const w = new AuditBatchWriter(sink, log, fast);
    sink.down = true;
    for (let i = 1; i <= 3; i++) w.enqueue(row(i));
    const started = Date.now();
    expect(await w.close(100)).to.deep.equal({ abandoned: 3 });
    expect(Date.now() - started).to.be.lessThan(1000);
    expect(lines.join('')).to.match(/"abandoned":3/);
  });
});
