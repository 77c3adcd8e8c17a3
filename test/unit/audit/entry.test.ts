import { expect } from 'chai';
import { LIMITS, parseFacts, redactPath, sanitizeEntry, sanitizeFacts, toAuditEntry, type AuditEntryInput } from '../../../audit/entry.js';
import { chainRows, EMPTY_HEAD, entryHash, GENESIS_HASH, HASHED_FIELDS, verifyRows } from '../../../audit/chain.js';
import { createHash } from 'node:crypto';

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
        'developer_id', 'duration_ms', 'environment_id', 'facts', 'grant_id', 'host', 'id', 'matched_rules', 'method', 'path',
        'reason', 'redacted', 'status', 'tool', 'upstream_status',
      ]);
      expect(row.redacted).to.equal(false);
      expect(row.facts).to.equal(null);
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

    it('attack: a host named like a provider\'s token (ya29., xoxb-) is kept whole, so the audit says where data went (a fourth review); our own formats are still scrubbed there', () => {
      for (const host of ['ya29.exfil-collector.attacker.example', 'xoxb-0000000000.evil.example']) {
        const row = sanitizeEntry({ ...base, host, connector: `egress:${host}` }, 'aud_x', 1);
        expect([row.host, row.connector]).to.deep.equal([host, `egress:${host}`]);
      }
      expect(sanitizeEntry({ ...base, host: 'svcph_00112233445566778899aabbccddeeff.evil.example' }, 'aud_x', 1).host).to.include('[redacted]');
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
  describe('facts (issue 26): bounded, scrubbed, hashed only when present', () => {
    const placeholder = 'svcph_00112233445566778899aabbccddeeff';
    const standIn = 'svcst_AbCdEfGh12345678AbCdEfGh12345678';

    it('keeps amount, recipients and channel; nothing else; null when there are none', () => {
      expect(sanitizeFacts(null)).to.equal(null);
      expect(sanitizeFacts(undefined)).to.equal(null);
      expect(sanitizeFacts({})).to.equal(null);
      expect(sanitizeFacts([] as never)).to.equal(null);
      const text = sanitizeFacts({ amount: { currency: 'usd', minor_units: 1250 }, recipients: ['a@acme.com'], channel: 'C0123', extra: 'no' } as never);
      expect(JSON.parse(text!)).to.deep.equal({ amount: { currency: 'usd', minor_units: 1250 }, recipients: ['a@acme.com'], channel: 'C0123' });
      // null: the decoder could not read it; kept as null (unknown), not dropped.
      expect(JSON.parse(sanitizeFacts({ amount: null, recipients: null, channel: null })!)).to.deep.equal({ amount: null, recipients: null, channel: null });
    });

    it('a malformed amount is null; a non-string recipient or channel is [invalid]', () => {
      for (const amount of [{ currency: 5, minor_units: 1 }, { currency: 'usd', minor_units: 1.5 }, { currency: 'usd', minor_units: 2 ** 60 }, 'usd 5', [1]]) {
        expect(JSON.parse(sanitizeFacts({ amount } as never)!).amount, JSON.stringify(amount)).to.equal(null);
      }
      expect(JSON.parse(sanitizeFacts({ recipients: [5, { a: 1 }], channel: 7 } as never)!)).to.deep.equal({ recipients: ['[invalid]', '[invalid]'], channel: '[invalid]' });
      expect(JSON.parse(sanitizeFacts({ recipients: 'a@b.c' } as never)!)).to.deep.equal({ recipients: null });
    });

    it('10,000 recipients: the first 50 kept, recipients_total says how many; each address and the channel bounded', () => {
      const recipients = Array.from({ length: 10_000 }, (_, i) => `${'l'.repeat(i === 0 ? 5000 : 3)}${i}@example.com`);
      const text = sanitizeFacts({ recipients, channel: 'c'.repeat(1_000_000), amount: { currency: 'u'.repeat(500), minor_units: 1 } })!;
      expect(text.length).to.be.at.most(LIMITS.facts);
      const f = JSON.parse(text);
      expect(f.recipients).to.have.length(LIMITS.facts_recipients);
      expect(f.recipients_total).to.equal(10_000);
      expect(Array.from(f.recipients[0] as string)).to.have.length(LIMITS.facts_address);
      expect(Array.from(f.channel as string)).to.have.length(LIMITS.facts_channel);
      expect(Array.from(f.amount.currency as string)).to.have.length(LIMITS.facts_currency);
    });

    it('JSON escapes that would pass the cap keep fewer recipients, never an unbounded text', () => {
      const recipients = Array.from({ length: 50 }, () => '\u0001'.repeat(1) + '\u0001'.repeat(250));
      const text = sanitizeFacts({ recipients })!;
      expect(text.length).to.be.at.most(LIMITS.facts);
      const f = JSON.parse(text);
      expect(f.recipients.length).to.be.below(50);
      expect(f.recipients_total).to.equal(50);
    });

    it('a placeholder or stand-in anywhere in a value (any case, glued to other text) is replaced whole; other secrets scrubbed', () => {
      const values = [placeholder, `${placeholder}@evil.io`, `x${placeholder}@evil.io`, placeholder.toUpperCase(), `a_${standIn}@b.c`, 'svcph_@x.io'];
      const text = sanitizeFacts({ recipients: values, channel: `#${placeholder}` })!;
      const f = JSON.parse(text);
      expect(f.recipients).to.deep.equal(values.map(() => '[redacted]'));
      expect(f.channel).to.equal('[redacted]');
      for (const secret of [placeholder, placeholder.slice(6), standIn.slice(6)]) expect(text.toLowerCase()).to.not.include(secret.toLowerCase());
      const key = 'sk_0123456789abcdef0123456789abcdef01234567';
      expect(sanitizeFacts({ recipients: [`${key}@x.io`] })).to.not.include(key);
    });

    it('sanitizeEntry stores them as text; toAuditEntry shows them only when recorded, after redacted', () => {
      const at = Date.UTC(2026, 10, 22, 10);
      const row = sanitizeEntry({ ...base, facts: { amount: { currency: 'usd', minor_units: 5 } } }, 'aud_0123456789abcdef01234567', at);
      expect(row.facts).to.equal('{"amount":{"currency":"usd","minor_units":5}}');
      const [r] = chainRows(EMPTY_HEAD, [row]).rows;
      const e = toAuditEntry(r!);
      expect(Object.keys(e).slice(-4)).to.deep.equal(['duration_ms', 'facts', 'prev_hash', 'hash']);
      expect(e.facts).to.deep.equal({ amount: { currency: 'usd', minor_units: 5 } });
      expect(toAuditEntry({ ...r!, facts: 'not json' }).facts).to.equal(null);
      expect(parseFacts('[1]')).to.equal(null);
    });

    it('the hash covers facts when present; an entry without them hashes exactly as before the column', () => {
      const at = Date.UTC(2026, 10, 22, 10);
      const plain = sanitizeEntry(base, 'aud_0123456789abcdef01234567', at);
      const withFacts = sanitizeEntry({ ...base, facts: { channel: 'C1' } }, 'aud_0123456789abcdef01234567', at);
      const [p] = chainRows(EMPTY_HEAD, [plain]).rows;
      const [f] = chainRows(EMPTY_HEAD, [withFacts]).rows;
      // Before the column: sha256(prev + JSON of HASHED_FIELDS), nothing else.
      const old = createHash('sha256').update(GENESIS_HASH + JSON.stringify(Object.fromEntries(HASHED_FIELDS.map((k) => [k, p![k]])))).digest('hex');
      expect(p!.hash).to.equal(old);
      expect(entryHash(GENESIS_HASH, { ...p!, facts: undefined })).to.equal(old);
      expect(f!.hash).to.not.equal(p!.hash);
      expect(entryHash(GENESIS_HASH, { ...f!, facts: null })).to.not.equal(f!.hash);
      expect(entryHash(GENESIS_HASH, { ...f!, facts: '{"channel":"C2"}' })).to.not.equal(f!.hash);
      expect(entryHash(GENESIS_HASH, { ...p!, facts: '{}' })).to.not.equal(p!.hash);
      // A chain mixing old and new rows verifies; a row whose facts changed does not.
      const chain = chainRows(EMPTY_HEAD, [plain, withFacts, { ...plain, id: 'aud_0123456789abcdef01234568' }]);
      expect(verifyRows(chain.rows, chain.head).ok).to.equal(true);
      const tampered = chain.rows.map((r) => ({ ...r }));
      tampered[1]!.facts = '{"channel":"C9"}';
      expect(verifyRows(tampered, chain.head)).to.include({ ok: false, first_broken_id: withFacts.id, reason: 'hash_mismatch' });
    });
  });
});
