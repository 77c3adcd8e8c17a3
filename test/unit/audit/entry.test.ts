import { expect } from 'chai';
import { LIMITS, redactPath, sanitizeEntry, toAuditEntry, type AuditEntryInput } from '../../../audit/entry.js';
import { chainRows, EMPTY_HEAD, entryHash } from '../../../audit/chain.js';

const base: AuditEntryInput = {
  developer_id: 'dev_000000000000000000000001',
  environment_id: 'env_0123456789abcdef01234567',
  method: 'GET',
  host: 'gmail.googleapis.com',
  path: '/gmail/v1/users/me/messages',
  connector: 'gmail',
  category: 'read',
  credential: 'connection',
  decision: 'allow',
  reason: 'rule',
  matched_rules: [0, 3],
  status: 200,
  upstream_status: 200,
  bytes_in: 120,
  bytes_out: 4096,
  duration_ms: 37,
};

describe('audit entry (audit/entry)', () => {
  describe('redactPath: query values redacted, keys kept', () => {
    const cases: Array<[string, string]> = [
      ['/search?q=secret&x=1', '/search?q=[redacted]&x=[redacted]'],
      ['/p', '/p'],
      ['/', '/'],
      ['', ''],
      ['/p?', '/p?'],
      ['/p?flag', '/p?flag'],
      ['/p?flag&k=v', '/p?flag&k=[redacted]'],
      ['/p?k=', '/p?k=[redacted]'],
      ['/p?k=a=b=c', '/p?k=[redacted]'],
      ['/p?a=1&a=2', '/p?a=[redacted]&a=[redacted]'],
      ['/p?access_token=ya29.abc&alt=json', '/p?access_token=[redacted]&alt=[redacted]'],
      ['/p?q=x#frag', '/p?q=[redacted]#[redacted]'],
      ['/p#frag?x=1', '/p#[redacted]'],
      ['/p#', '/p#'],
      ['/a;jsessionid=ABC123/b?x=1', '/a;jsessionid=[redacted]/b?x=[redacted]'],
      ['/files/a%20b?name=%2Fetc%2Fpasswd', '/files/a%20b?name=[redacted]'],
    ];
    for (const [input, want] of cases) {
      it(`${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => {
        expect(redactPath(input)).to.equal(want);
      });
    }
  });

  describe('sanitizeEntry', () => {
    it('keeps exactly the entry fields, redacts the path and stores matched_rules as JSON text', () => {
      const input = { ...base, path: '/x?q=hello', headers: { authorization: 'Bearer abc' }, body: 'secret body' } as AuditEntryInput;
      const row = sanitizeEntry(input, 'aud_000000000000000000000001', 1000);
      expect(Object.keys(row).sort()).to.deep.equal([
        'approval_id', 'bytes_in', 'bytes_out', 'category', 'connector', 'created_at', 'credential', 'decision',
        'developer_id', 'duration_ms', 'environment_id', 'grant_id', 'host', 'id', 'matched_rules', 'method', 'path',
        'reason', 'redacted', 'status', 'upstream_status',
      ]);
      expect(row.redacted).to.equal(false);
      expect(row.path).to.equal('/x?q=[redacted]');
      expect(row.matched_rules).to.equal('[0,3]');
      expect(row.created_at).to.equal(1000);
      expect(row.approval_id).to.equal(null);
    });

    it('scrubs placeholders, stand-in tokens, API keys and bearer tokens from every string field', () => {
      const placeholder = 'svcph_00112233445566778899aabbccddeeff';
      const standIn = 'svcst_AbCdEfGh12345678';
      const apiKey = 'sk_0123456789abcdef0123456789abcdef01234567';
      const row = sanitizeEntry({
        ...base,
        host: `${placeholder}.evil.example`,
        path: `/v1/${placeholder}/x/${apiKey}?${standIn}`,
        reason: `Bearer abcdefghijklmnop`,
        connector: `secret:${standIn}`,
        matched_rules: [{ note: placeholder }],
      }, 'aud_000000000000000000000001', 1000);
      const text = JSON.stringify(row);
      for (const s of [placeholder, standIn, apiKey, 'abcdefghijklmnop']) expect(text, s).to.not.include(s);
      expect(text).to.include('[redacted]');
    });

    it('truncates over-long strings to the column sizes (in code points) instead of failing the batch', () => {
      const row = sanitizeEntry({ ...base, host: 'h'.repeat(1000), method: 'M'.repeat(50), path: `/${'😀'.repeat(5000)}` }, 'aud_x', 1);
      expect(row.host).to.have.length(LIMITS.host);
      expect(row.method).to.have.length(LIMITS.method);
      expect(Array.from(row.path)).to.have.length(LIMITS.path);
      expect(row.path.endsWith('…')).to.equal(true);
      expect(row.path).to.not.match(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    });

    it('replaces lone surrogates, which could not round-trip through utf8mb4', () => {
      const row = sanitizeEntry({ ...base, path: '/a\uD800b' }, 'aud_x', 1);
      expect(row.path).to.equal('/a\uFFFDb');
    });

    it('refuses a programming error at the call site (unknown decision, credential, status)', () => {
      expect(() => sanitizeEntry({ ...base, decision: 'maybe' as never }, 'aud_x', 1)).to.throw(TypeError, /decision/);
      expect(() => sanitizeEntry({ ...base, credential: 'token' as never }, 'aud_x', 1)).to.throw(TypeError, /credential/);
      expect(() => sanitizeEntry({ ...base, status: 42 }, 'aud_x', 1)).to.throw(TypeError, /status/);
      expect(() => sanitizeEntry({ ...base, bytes_in: Number.NaN }, 'aud_x', 1)).to.throw(TypeError, /bytes_in/);
      expect(() => sanitizeEntry({ ...base, developer_id: '' }, 'aud_x', 1)).to.throw(TypeError, /developer_id/);
      expect(() => sanitizeEntry({ ...base, created_at: Number.NaN }, 'aud_x', 1)).to.throw(TypeError, /created_at/);
    });

    it('counts are non-negative integers; absent optional fields are null', () => {
      const row = sanitizeEntry({ ...base, bytes_in: -5, bytes_out: 3.7, duration_ms: undefined, upstream_status: undefined, connector: '', category: null }, 'aud_x', 1);
      expect([row.bytes_in, row.bytes_out, row.duration_ms, row.upstream_status, row.connector, row.category]).to.deep.equal([0, 3, 0, null, null, null]);
    });
  });

  it('toAuditEntry: exactly the decisions.md fields, in order, RFC 3339 ms timestamps', () => {
    const { rows } = chainRows(EMPTY_HEAD, [sanitizeEntry(base, 'aud_0123456789abcdef01234567', Date.UTC(2026, 10, 22, 10))]);
    const e = toAuditEntry(rows[0]!);
    expect(Object.keys(e)).to.deep.equal([
      'id', 'created_at', 'environment_id', 'method', 'host', 'path', 'connector', 'category', 'credential', 'decision',
      'reason', 'matched_rules', 'approval_id', 'grant_id', 'status', 'upstream_status', 'bytes_in', 'bytes_out',
      'duration_ms', 'prev_hash', 'hash',
    ]);
    expect(e.created_at).to.equal('2026-11-22T10:00:00.000Z');
    expect(e.matched_rules).to.deep.equal([0, 3]);
    expect(e.prev_hash).to.equal('0'.repeat(64));
    expect(e.hash).to.match(/^[0-9a-f]{64}$/);
  });

  it('toAuditEntry: a redacted entry adds redacted: true after duration_ms; its hash covers it, an unredacted one hashes as before', () => {
    const at = Date.UTC(2026, 10, 22, 10);
    const plain = sanitizeEntry(base, 'aud_0123456789abcdef01234567', at);
    const redacted = sanitizeEntry({ ...base, redacted: true }, 'aud_0123456789abcdef01234567', at);
    const [p] = chainRows(EMPTY_HEAD, [plain]).rows;
    const [r] = chainRows(EMPTY_HEAD, [redacted]).rows;
    const e = toAuditEntry(r!);
    expect(Object.keys(e).slice(-4)).to.deep.equal(['duration_ms', 'redacted', 'prev_hash', 'hash']);
    expect(e.redacted).to.equal(true);
    expect(toAuditEntry(p!)).to.not.have.property('redacted');
    // The same entry with the flag flipped no longer matches its hash, in both directions.
    expect(r!.hash).to.not.equal(p!.hash);
    expect(entryHash(p!.prev_hash, { ...p!, redacted: false })).to.equal(p!.hash);
    expect(entryHash(p!.prev_hash, { ...p!, redacted: true })).to.not.equal(p!.hash);
    expect(entryHash(r!.prev_hash, { ...r!, redacted: 0 })).to.not.equal(r!.hash);
  });
});
