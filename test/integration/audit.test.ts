/**
 * The audit log API (decisions.md: `audit log`, `audit chain check`, "Audit entry"):
 * listing newest first with filters and keyset pages, only the caller's own entries,
 * chain verification against tampering through the store, and no secret in the table.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, client, type TestService, type ApiClient } from '../helpers/service.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import type { AuditEntryInput } from '../../audit/audit.service.js';

const AUD_ID = /^aud_[0-9a-f]{24}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const FIELDS = [
  'id', 'created_at', 'environment_id', 'method', 'host', 'path', 'connector', 'category', 'credential', 'decision',
  'reason', 'matched_rules', 'approval_id', 'grant_id', 'status', 'upstream_status', 'bytes_in', 'bytes_out',
  'duration_ms', 'prev_hash', 'hash',
];

const ENVS = ['env_00000000000000000000000a', 'env_00000000000000000000000b', 'env_00000000000000000000000c'];
const CONNECTORS = ['gmail', 'slack', null];
const DECISIONS = ['allow', 'deny', 'ask'] as const;

function entry(developerId: string, i: number, extra: Partial<AuditEntryInput> = {}): AuditEntryInput {
  const decision = DECISIONS[i % 3]!;
  return {
    developer_id: developerId,
    environment_id: ENVS[i % ENVS.length]!,
    method: i % 2 ? 'POST' : 'GET',
    host: 'api.example.com',
    path: `/v1/items/${i}`,
    connector: CONNECTORS[i % 4 % 3] ?? null,
    category: 'read',
    credential: i % 4 === 2 ? 'none' : 'connection',
    decision,
    reason: decision === 'allow' ? 'rule' : decision === 'deny' ? 'deny_rule' : 'ask_rule',
    matched_rules: [i % 7],
    approval_id: decision === 'ask' ? `apr_${i.toString(16).padStart(24, '0')}` : null,
    grant_id: null,
    status: decision === 'allow' ? 200 : 403,
    upstream_status: decision === 'allow' ? 200 : null,
    bytes_in: 100 + i,
    bytes_out: decision === 'allow' ? 1000 + i : 0,
    duration_ms: i % 40,
    ...extra,
  };
}

async function getAll(api: ApiClient, query: string, limit: number): Promise<{ items: any[]; pages: number }> {
  const items: any[] = [];
  let after: string | null = null;
  let pages = 0;
  for (;;) {
    const res: any = await api.get(`/v1/audit-log?${query}${query ? '&' : ''}limit=${limit}${after ? `&after=${after}` : ''}`);
    expect(res.status, res.text).to.equal(200);
    expect(Object.keys(res.body).sort()).to.deep.equal(['data', 'next']);
    pages++;
    items.push(...res.body.data);
    expect(res.body.data.length).to.be.at.most(limit);
    if (res.body.next === null) break;
    expect(res.body.next).to.equal(res.body.data[res.body.data.length - 1].id);
    after = res.body.next;
    if (pages > 500) throw new Error('runaway pagination');
  }
  return { items, pages };
}

describe('audit log API', function () {
  this.timeout(60_000);
  let t: TestService;
  /** Everything recorded for the default developer, oldest first. */
  const recorded: any[] = [];

  /** A developer of its own with `n` entries (tampering tests break only their own chain). */
  async function freshChain(n: number): Promise<{ api: ApiClient; developerId: string; ids: string[] }> {
    const developerId = `dev_${randomBytes(12).toString('hex')}`;
    await t.accounts.ensureDeveloper(developerId, 'tamper');
    const { key } = await t.accounts.createApiKey(developerId);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await t.svc.audit.record(entry(developerId, i))).id);
    return { api: client(t.url, key), developerId, ids };
  }

  async function verifyOf(api: ApiClient): Promise<any> {
    const res = await api.get('/v1/audit-log/verify');
    expect(res.status, res.text).to.equal(200);
    expect(Object.keys(res.body).sort()).to.deep.equal(['checked', 'checked_from', 'first_broken_id', 'ok']);
    return res.body;
  }

  before(async () => {
    t = await startTestService();
    // Half directly, half through the batched writer, as the proxy does.
    for (let i = 0; i < 30; i++) recorded.push(await t.svc.audit.record(entry(DEFAULT_DEVELOPER_ID, i)));
    const later = Array.from({ length: 30 }, (_, k) => t.svc.audit.recordLater(entry(DEFAULT_DEVELOPER_ID, 30 + k)));
    await t.svc.audit.flush();
    const page = await t.svc.audit.list(DEFAULT_DEVELOPER_ID, { limit: 200 });
    const byId = new Map(page.map((e) => [e.id, e]));
    for (const id of later) {
      expect(id).to.match(AUD_ID);
      recorded.push(byId.get(id!));
    }
  });
  after(async () => {
    await t?.close();
  });

  describe('GET /v1/audit-log', () => {
    it('lists the caller\'s entries newest first, each exactly the decisions.md record', async () => {
      const res = await t.api.get('/v1/audit-log?limit=200');
      expect(res.status).to.equal(200);
      expect(res.body.next).to.equal(null);
      expect(res.body.data.map((e: any) => e.id)).to.deep.equal([...recorded].reverse().map((e) => e.id));
      for (const e of res.body.data) {
        expect(Object.keys(e)).to.deep.equal(FIELDS);
        expect(e.id).to.match(AUD_ID);
        expect(e.created_at).to.match(TIMESTAMP);
        expect(e.hash).to.match(/^[0-9a-f]{64}$/);
        expect(e.prev_hash).to.match(/^[0-9a-f]{64}$/);
        expect(e.matched_rules).to.be.an('array');
        expect(['connection', 'secret', 'none']).to.include(e.credential);
      }
      // The chain is visible in the records: each entry's prev_hash is the older one's hash.
      const oldestFirst = [...res.body.data].reverse();
      expect(oldestFirst[0].prev_hash).to.equal('0'.repeat(64));
      for (let i = 1; i < oldestFirst.length; i++) expect(oldestFirst[i].prev_hash).to.equal(oldestFirst[i - 1].hash);
    });

    it('returns what was recorded, nulls where absent', async () => {
      const res = await t.api.get('/v1/audit-log?limit=200');
      const e = res.body.data.find((x: any) => x.id === recorded[2].id);
      expect(e).to.deep.equal(recorded[2]);
      expect(e).to.include({
        environment_id: ENVS[2], method: 'GET', host: 'api.example.com', path: '/v1/items/2', connector: null,
        category: 'read', credential: 'none', decision: 'ask', reason: 'ask_rule', grant_id: null, status: 403,
        upstream_status: null, bytes_in: 102, bytes_out: 0, duration_ms: 2,
      });
      expect(e.approval_id).to.equal(`apr_${'2'.padStart(24, '0')}`);
      expect(e.matched_rules).to.deep.equal([2]);
    });

    it('walks keyset pages without gaps or repeats; next is null on the last page', async () => {
      const { items, pages } = await getAll(t.api, '', 7);
      expect(items.map((e) => e.id)).to.deep.equal([...recorded].reverse().map((e) => e.id));
      expect(pages).to.equal(Math.ceil(recorded.length / 7));
    });

    it('a full last page has next null (no empty trailing page)', async () => {
      const res = await t.api.get(`/v1/audit-log?limit=${recorded.length}`);
      expect(res.body.data).to.have.length(recorded.length);
      expect(res.body.next).to.equal(null);
    });

    for (const [name, query, pick] of [
      ['environment_id', `environment_id=${ENVS[1]}`, (e: any) => e.environment_id === ENVS[1]],
      ['decision', 'decision=deny', (e: any) => e.decision === 'deny'],
      ['connector', 'connector=slack', (e: any) => e.connector === 'slack'],
      ['all three', `environment_id=${ENVS[0]}&decision=allow&connector=gmail`, (e: any) => e.environment_id === ENVS[0] && e.decision === 'allow' && e.connector === 'gmail'],
    ] as const) {
      it(`filters by ${name}, pages included`, async () => {
        const want = [...recorded].reverse().filter(pick).map((e) => e.id);
        expect(want.length).to.be.greaterThan(0);
        const { items } = await getAll(t.api, query, 4);
        expect(items.map((e) => e.id)).to.deep.equal(want);
      });
    }

    it('an empty filter is no filter; a filter that matches nothing is an empty page', async () => {
      const all = await t.api.get('/v1/audit-log?limit=200&connector=&environment_id=&decision=');
      expect(all.body.data).to.have.length(recorded.length);
      const none = await t.api.get('/v1/audit-log?connector=GMAIL');
      expect(none.body).to.deep.equal({ data: [], next: null });
    });

    it('an unknown after is an empty page, not the first page', async () => {
      for (const after of ['aud_ffffffffffffffffffffffff', 'nonsense']) {
        const res = await t.api.get(`/v1/audit-log?after=${after}`);
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal({ data: [], next: null });
      }
    });

    it('limit: default 50, clamped to 1..200; not an integer → 400 invalid_request', async () => {
      expect((await t.api.get('/v1/audit-log')).body.data).to.have.length(50);
      expect((await t.api.get('/v1/audit-log?limit=0')).body.data).to.have.length(1);
      expect((await t.api.get('/v1/audit-log?limit=-5')).body.data).to.have.length(1);
      expect((await t.api.get('/v1/audit-log?limit=100000')).body.data).to.have.length(recorded.length);
      for (const bad of ['abc', '1.5', '10x']) {
        const res = await t.api.get(`/v1/audit-log?limit=${bad}`);
        expect(res.status, bad).to.equal(400);
        expect(res.body).to.have.keys(['error', 'message']);
        expect(res.body.error).to.equal('invalid_request');
      }
    });

    it('decision outside allow/deny/ask → 400 invalid_request', async () => {
      for (const bad of ['maybe', 'ALLOW', 'allow,deny']) {
        const res = await t.api.get(`/v1/audit-log?decision=${bad}`);
        expect(res.status, bad).to.equal(400);
        expect(res.body.error).to.equal('invalid_request');
      }
      const twice = await t.api.get('/v1/audit-log?decision=allow&decision=deny');
      expect(twice.status).to.equal(400);
      expect(twice.body.error).to.equal('invalid_request');
    });

    it('needs an API key', async () => {
      const res = await t.raw('GET', '/v1/audit-log');
      expect(res.status).to.equal(401);
      expect(res.body.error).to.equal('unauthorized');
    });

    it('another developer sees none of these entries, and its own cursor space is separate', async () => {
      const other = await t.otherDeveloper();
      expect((await other.get('/v1/audit-log')).body).to.deep.equal({ data: [], next: null });
      expect((await other.get(`/v1/audit-log?environment_id=${ENVS[0]}`)).body).to.deep.equal({ data: [], next: null });
      // Paging with the first developer's id as the cursor finds nothing.
      expect((await other.get(`/v1/audit-log?after=${recorded[10].id}`)).body).to.deep.equal({ data: [], next: null });
      expect(await verifyOf(other)).to.deep.equal({ ok: true, checked: 0, first_broken_id: null, checked_from: null });
    });
  });

  describe('GET /v1/audit-log/verify', () => {
    it('an untouched chain is ok, every entry checked', async () => {
      expect(await verifyOf(t.api)).to.deep.equal({ ok: true, checked: recorded.length, first_broken_id: null, checked_from: recorded[0].id });
    });

    it('an altered field is reported by id', async () => {
      const { api, ids } = await freshChain(8);
      await t.svc.db('audit_log').where({ id: ids[4] }).update({ path: '/v1/innocent' });
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 5, first_broken_id: ids[4], checked_from: ids[0] });
    });

    it('an altered row with a replaced hash is reported by id', async () => {
      const { api, ids } = await freshChain(8);
      await t.svc.db('audit_log').where({ id: ids[2] }).update({ decision: 'allow', hash: 'f'.repeat(64) });
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 3, first_broken_id: ids[2], checked_from: ids[0] });
    });

    it('a deleted middle row: the row after the gap is reported', async () => {
      const { api, ids } = await freshChain(8);
      await t.svc.db('audit_log').where({ id: ids[3] }).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 4, first_broken_id: ids[4], checked_from: ids[0] });
    });

    it('deleted last rows are detected against the chain head (the last row left is reported)', async () => {
      const { api, ids } = await freshChain(8);
      await t.svc.db('audit_log').whereIn('id', [ids[6], ids[7]]).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 6, first_broken_id: ids[5], checked_from: ids[0] });
    });

    it('every row deleted: not ok, nothing to name', async () => {
      const { api, developerId } = await freshChain(3);
      await t.svc.db('audit_log').where({ developer_id: developerId }).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 0, first_broken_id: null, checked_from: null });
    });

    it('reordered rows (seq values swapped) are detected', async () => {
      const { api, developerId, ids } = await freshChain(8);
      const db = t.svc.db;
      await db('audit_log').where({ id: ids[2] }).update({ seq: -1 });
      await db('audit_log').where({ id: ids[3] }).update({ seq: 3 });
      await db('audit_log').where({ id: ids[2] }).update({ seq: 4 });
      const rows = await db('audit_log').where({ developer_id: developerId }).orderBy('seq').select('id');
      expect(rows.map((r: any) => r.id).slice(2, 4)).to.deep.equal([ids[3], ids[2]]);
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 3, first_broken_id: ids[3], checked_from: ids[0] });
    });

    it('a row moved in from another developer\'s chain is detected', async () => {
      const a = await freshChain(3);
      const b = await freshChain(3);
      await t.svc.db('audit_log').where({ id: b.ids[2] }).update({ developer_id: a.developerId, seq: 4 });
      await t.svc.db('audit_chain_heads').where({ developer_id: a.developerId }).update({ seq: 4 });
      expect(await verifyOf(a.api)).to.deep.equal({ ok: false, checked: 4, first_broken_id: b.ids[2], checked_from: a.ids[0] });
      // And b's chain now misses its last row.
      expect(await verifyOf(b.api)).to.deep.equal({ ok: false, checked: 2, first_broken_id: b.ids[1], checked_from: b.ids[0] });
    });

    it('a row added beyond the chain head (around the writer) is detected', async () => {
      const { api, developerId, ids } = await freshChain(3);
      const last = await t.svc.db('audit_log').where({ id: ids[2] }).first();
      await t.svc.db('audit_log').insert({ ...last, id: 'aud_0000000000000000000000ee', seq: 4, prev_hash: last.hash });
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 3, first_broken_id: 'aud_0000000000000000000000ee', checked_from: ids[0] });
      void developerId;
    });

    it('verify walks long chains page by page', async () => {
      const { developerId, ids } = await freshChain(25);
      expect(await t.svc.audit.verify(developerId, { pageSize: 4 })).to.deep.equal({ ok: true, checked: 25, first_broken_id: null, checked_from: ids[0] });
      await t.svc.db('audit_log').where({ id: ids[21] }).update({ status: 500 });
      expect(await t.svc.audit.verify(developerId, { pageSize: 4 })).to.deep.equal({ ok: false, checked: 22, first_broken_id: ids[21], checked_from: ids[0] });
    });

    it('appends after a tampered head still verify as broken (the break is never healed by new rows)', async () => {
      const { api, developerId, ids } = await freshChain(4);
      await t.svc.db('audit_log').where({ id: ids[3] }).delete();
      await t.svc.audit.record(entry(developerId, 99));
      const res = await verifyOf(api);
      expect(res.ok).to.equal(false);
      expect(res.first_broken_id).to.not.equal(null);
    });
  });

  describe('no secret reaches the table', () => {
    it('a placeholder, stand-in token, API key or query value in the request is not stored anywhere', async () => {
      const placeholder = `svcph_${randomBytes(16).toString('hex')}`;
      const standIn = `svcst_${randomBytes(12).toString('hex')}`;
      const apiKey = `sk_${randomBytes(20).toString('hex')}`;
      const queryValue = `hunter2-${randomBytes(6).toString('hex')}`;
      const e = await t.svc.audit.record(entry(DEFAULT_DEVELOPER_ID, 1000, {
        host: 'api.stripe.com',
        path: `/v1/charges/${placeholder}?api_key=${apiKey}&password=${queryValue}&q=${placeholder}`,
        reason: `upstream said Bearer ${standIn}`,
        connector: 'secret:STRIPE_KEY',
        credential: 'secret',
        matched_rules: [{ note: standIn }],
      }));
      recorded.push(e);
      expect(e.path).to.equal('/v1/charges/svcph_[redacted]?api_key=[redacted]&password=[redacted]&q=[redacted]');
      const rows = await t.svc.db('audit_log').select('*');
      const heads = await t.svc.db('audit_chain_heads').select('*');
      const dump = JSON.stringify([rows, heads]);
      expect(dump).to.include('/v1/charges/');
      for (const s of [placeholder, standIn, apiKey, queryValue, placeholder.slice(6), standIn.slice(6), apiKey.slice(3)]) {
        expect(dump, s).to.not.include(s);
      }
      expect(await verifyOf(t.api)).to.deep.equal({ ok: true, checked: recorded.length, first_broken_id: null, checked_from: recorded[0].id });
    });
  });
});
