import { expect } from 'chai';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { GENESIS_HASH, HASHED_FIELDS, canonicalJson, chainRows, entryHash, verifyRows, EMPTY_HEAD, type ChainHead } from '../../../audit/chain.js';
import { sanitizeEntry, type AuditRow, type UnchainedRow } from '../../../audit/entry.js';

const DEV = 'dev_000000000000000000000001';

function entry(i: number, dev = DEV): UnchainedRow {
  return sanitizeEntry(
    {
      developer_id: dev,
      environment_id: `env_${i.toString(16).padStart(24, '0')}`,
      method: i % 2 ? 'POST' : 'GET',
      host: 'api.example.com',
      path: `/v1/things/${i}?page=${i}`,
      connector: i % 3 ? 'slack' : null,
      category: 'read',
      credential: i % 3 ? 'connection' : 'none',
      decision: (['allow', 'deny', 'ask'] as const)[i % 3]!,
      reason: 'rule',
      matched_rules: [i % 5],
      status: 200,
      upstream_status: i % 3 === 1 ? null : 200,
      bytes_in: i,
      bytes_out: i * 10,
      duration_ms: i % 50,
    },
    `aud_${i.toString(16).padStart(24, '0')}`,
    1_700_000_000_000 + i,
  );
}

function chainOf(n: number): { rows: AuditRow[]; head: ChainHead } {
  return chainRows(EMPTY_HEAD, Array.from({ length: n }, (_, i) => entry(i + 1)));
}

const clone = (rows: AuditRow[]): AuditRow[] => rows.map((r) => ({ ...r }));

describe('audit chain (audit/chain)', () => {
  describe('hash', () => {
    it('is sha256(prev_hash + canonical JSON of the fields in a fixed order)', () => {
      const [row] = chainOf(1).rows;
      const fields = Object.fromEntries(HASHED_FIELDS.map((f) => [f, row![f]]));
      const expected = createHash('sha256').update(GENESIS_HASH + JSON.stringify(fields)).digest('hex');
      expect(row!.hash).to.equal(expected);
      expect(row!.prev_hash).to.equal(GENESIS_HASH);
      expect(row!.seq).to.equal(1);
    });

    it('is deterministic: same fields → same hash, whatever the key order or number/string form of the row', () => {
      const [row] = chainOf(1).rows;
      const reordered = Object.fromEntries(Object.entries(row!).reverse()) as unknown as AuditRow;
      // mysql2 may return BIGINT columns as strings; SQLite as numbers.
      const stringy = { ...row!, seq: String(row!.seq), created_at: String(row!.created_at), bytes_in: String(row!.bytes_in) } as unknown as AuditRow;
      expect(canonicalJson(reordered)).to.equal(canonicalJson(row!));
      expect(entryHash(GENESIS_HASH, stringy)).to.equal(row!.hash);
      expect(chainOf(20).rows.map((r) => r.hash)).to.deep.equal(chainOf(20).rows.map((r) => r.hash));
    });

    it('canonical JSON is exactly JSON.stringify of the fields in order, for any values (the string-built form agrees with the definition)', () => {
      const NUMERIC = new Set(['seq', 'created_at', 'status', 'upstream_status', 'bytes_in', 'bytes_out', 'duration_ms']);
      const reference = (row: Record<string, unknown>): string =>
        JSON.stringify(Object.fromEntries(HASHED_FIELDS.map((f) => [f, row[f] == null ? null : NUMERIC.has(f) ? Number(row[f]) : String(row[f])])));
      const value = fc.oneof(
        fc.constant(null),
        fc.constant(undefined),
        fc.string({ unit: 'binary' }),
        fc.string({ unit: 'grapheme' }),
        fc.integer(),
        fc.double(),
        fc.integer().map(String),
      );
      fc.assert(
        fc.property(fc.array(value, { minLength: HASHED_FIELDS.length, maxLength: HASHED_FIELDS.length }), (values) => {
          const row = Object.fromEntries(HASHED_FIELDS.map((f, i) => [f, values[i]]));
          expect(canonicalJson(row as unknown as AuditRow)).to.equal(reference(row));
        }),
        { numRuns: 500 },
      );
    });

    it('changes with every hashed field, with the previous hash, and between null and ""', () => {
      const row = chainOf(2).rows[1];
      expect(row!.upstream_status).to.equal(200);
      for (const f of HASHED_FIELDS) {
        const changed = { ...row!, [f]: typeof row![f] === 'number' ? Number(row![f]) + 1 : `${row![f] ?? ''}x` };
        expect(entryHash(row!.prev_hash, changed), f).to.not.equal(row!.hash);
      }
      expect(entryHash(row!.prev_hash, row!)).to.equal(row!.hash);
      expect(entryHash('f'.repeat(64), row!)).to.not.equal(row!.hash);
      expect(entryHash(row!.prev_hash, { ...row!, approval_id: '' })).to.not.equal(row!.hash);
    });

    it('chains appends from a head: two batches equal one', () => {
      const all = Array.from({ length: 10 }, (_, i) => entry(i + 1));
      const once = chainRows(EMPTY_HEAD, all);
      const first = chainRows(EMPTY_HEAD, all.slice(0, 4));
      const second = chainRows(first.head, all.slice(4));
      expect([...first.rows, ...second.rows]).to.deep.equal(once.rows);
      expect(second.head).to.deep.equal(once.head);
      expect(once.head).to.deep.equal({ seq: 10, hash: once.rows[9]!.hash });
    });
  });

  describe('verification', () => {
    const { rows, head } = chainOf(10);

    it('an intact chain is ok, and every row is checked', () => {
      expect(verifyRows(rows, head)).to.deep.equal({ ok: true, checked: 10, first_broken_id: null, checked_from: rows[0]!.id, reason: null });
      expect(verifyRows([], EMPTY_HEAD)).to.deep.equal({ ok: true, checked: 0, first_broken_id: null, checked_from: null, reason: null });
    });

    it('detects an altered field (the altered row)', () => {
      const t = clone(rows);
      t[4]!.path = '/v1/something-else';
      expect(verifyRows(t, head)).to.deep.equal({ ok: false, checked: 5, first_broken_id: rows[4]!.id, checked_from: rows[0]!.id, reason: 'hash_mismatch' });
    });

    it('detects an altered row whose hash was recomputed (the next row no longer follows it)', () => {
      const t = clone(rows);
      t[4]!.decision = 'allow';
      t[4]!.hash = entryHash(t[4]!.prev_hash, t[4]!);
      expect(verifyRows(t, head)).to.include({ ok: false, first_broken_id: rows[5]!.id, reason: 'prev_hash_mismatch' });
    });

    it('detects a deleted middle row (the row after the gap)', () => {
      const t = clone(rows);
      t.splice(3, 1);
      expect(verifyRows(t, head)).to.deep.equal({ ok: false, checked: 4, first_broken_id: rows[4]!.id, checked_from: rows[0]!.id, reason: 'seq_gap' });
    });

    it('detects a deleted middle row even when later seqs were renumbered (prev_hash no longer matches)', () => {
      const t = clone(rows);
      t.splice(3, 1);
      t.forEach((r, i) => (r.seq = i + 1));
      expect(verifyRows(t, head)).to.include({ ok: false, first_broken_id: rows[4]!.id, reason: 'prev_hash_mismatch' });
    });

    it('detects a deleted first row', () => {
      expect(verifyRows(clone(rows).slice(1), head)).to.include({ ok: false, first_broken_id: rows[1]!.id, reason: 'seq_gap' });
    });

    it('detects deleted last rows only against the chain head (names the last row left)', () => {
      const t = clone(rows).slice(0, 7);
      // The rows alone are a consistent, shorter chain: that is what a head is for.
      expect(verifyRows(t, null).ok).to.equal(true);
      expect(verifyRows(t, head)).to.deep.equal({ ok: false, checked: 7, first_broken_id: rows[6]!.id, checked_from: rows[0]!.id, reason: 'tail_missing' });
      expect(verifyRows([], head)).to.deep.equal({ ok: false, checked: 0, first_broken_id: null, checked_from: null, reason: 'tail_missing' });
    });

    it('detects a head that does not match the last row', () => {
      expect(verifyRows(rows, { seq: 10, hash: 'a'.repeat(64) })).to.include({ ok: false, first_broken_id: rows[9]!.id, reason: 'head_mismatch' });
    });

    it('detects reordered rows (rows keep their seq but come in another order)', () => {
      const t = clone(rows);
      [t[2], t[3]] = [t[3]!, t[2]!];
      expect(verifyRows(t, head)).to.include({ ok: false, first_broken_id: rows[3]!.id, reason: 'seq_gap' });
    });

    it('detects reordered rows (seq values swapped, so the walk order changes)', () => {
      const t = clone(rows);
      [t[2]!.seq, t[3]!.seq] = [t[3]!.seq, t[2]!.seq];
      t.sort((a, b) => a.seq - b.seq);
      expect(verifyRows(t, head)).to.include({ ok: false, first_broken_id: rows[3]!.id, reason: 'prev_hash_mismatch' });
    });

    it('detects a row moved to the chain of another developer (developer_id is hashed)', () => {
      const t = clone(rows);
      t[0]!.developer_id = 'dev_000000000000000000000002';
      expect(verifyRows(t, head)).to.include({ ok: false, first_broken_id: rows[0]!.id, reason: 'hash_mismatch' });
    });

    describe('from a retention anchor (the last pruned entry)', () => {
      const anchor = { seq: 4, hash: rows[3]!.hash };

      it('a pruned prefix recorded in the anchor verifies, checked from the first kept row', () => {
        expect(verifyRows(clone(rows).slice(4), head, anchor)).to.deep.equal({ ok: true, checked: 6, first_broken_id: null, checked_from: rows[4]!.id, reason: null });
      });

      it('everything pruned (anchor = head): ok, nothing checked', () => {
        expect(verifyRows([], head, head)).to.deep.equal({ ok: true, checked: 0, first_broken_id: null, checked_from: null, reason: null });
      });

      it('a row missing past the anchor (deleted without moving it) is a gap', () => {
        expect(verifyRows(clone(rows).slice(5), head, anchor)).to.include({ ok: false, first_broken_id: rows[5]!.id, reason: 'seq_gap' });
      });

      it('a deleted middle row is still a gap', () => {
        const t = clone(rows).slice(4);
        t.splice(2, 1);
        expect(verifyRows(t, head, anchor)).to.include({ ok: false, first_broken_id: rows[7]!.id, checked_from: rows[4]!.id, reason: 'seq_gap' });
      });

      it('an anchor whose hash is not the first kept row\'s prev_hash breaks at that row', () => {
        expect(verifyRows(clone(rows).slice(4), head, { seq: 4, hash: 'b'.repeat(64) })).to.include({ ok: false, first_broken_id: rows[4]!.id, reason: 'prev_hash_mismatch' });
      });

      it('rows pruned and the anchor not moved: the first kept row is a gap', () => {
        expect(verifyRows(clone(rows).slice(4), head)).to.include({ ok: false, first_broken_id: rows[4]!.id, reason: 'seq_gap' });
      });
    });

    it('cannot detect a chain rewritten whole with a matching head (docs/audit.md: anchor the head elsewhere)', () => {
      const t = clone(rows).slice(0, 9);
      t[8]!.path = '/rewritten';
      const rewritten = chainRows(EMPTY_HEAD, t.map(({ seq: _s, prev_hash: _p, hash: _h, ...r }) => r));
      expect(verifyRows(rewritten.rows, rewritten.head).ok).to.equal(true);
    });
  });
});
