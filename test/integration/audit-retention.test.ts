/**
 * Audit retention (issue 10, item 6; docs/audit.md "Retention"): pruning takes a prefix of
 * the chain, records where the kept chain starts (the anchor), and verify checks from
 * there. Deletions other than that prefix still break the chain. Time is the service's
 * injected clock; nothing sleeps.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, client, type TestService, type ApiClient } from '../helpers/service.js';
import type { AuditEntryInput } from '../../audit/audit.service.js';
import { GENESIS_HASH } from '../../audit/chain.js';

const DAY = 24 * 3600_000;

function entry(developerId: string, i: number): AuditEntryInput {
  return {
    developer_id: developerId, environment_id: 'env_00000000000000000000000a', method: 'GET', host: 'api.example.com',
    path: `/v1/items/${i}`, connector: 'gmail', category: 'read', credential: 'connection', decision: 'allow', reason: 'rule',
    matched_rules: [0], approval_id: null, grant_id: null, status: 200, upstream_status: 200, bytes_in: i, bytes_out: 0, duration_ms: 1,
  };
}

describe('audit retention', function () {
  this.timeout(60_000);
  let t: TestService;

  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t?.close();
  });

  /**
   * A developer of its own: `old` entries, then the clock moves 10 days, then `recent`
   * entries. Returns the ids oldest first and the cutoff between the two groups.
   */
  async function chain(old: number, recent: number): Promise<{ api: ApiClient; developerId: string; ids: string[]; cutoff: number }> {
    const developerId = `dev_${randomBytes(12).toString('hex')}`;
    await t.accounts.ensureDeveloper(developerId, 'retention');
    const { key } = await t.accounts.createApiKey(developerId);
    const ids: string[] = [];
    for (let i = 0; i < old; i++) ids.push((await t.svc.audit.record(entry(developerId, i))).id);
    t.svc.clock.advance(10 * DAY);
    const cutoff = t.svc.clock.nowMs() - 5 * DAY;
    for (let i = 0; i < recent; i++) ids.push((await t.svc.audit.record(entry(developerId, old + i))).id);
    return { api: client(t.url, key), developerId, ids, cutoff };
  }

  async function verifyOf(api: ApiClient): Promise<any> {
    const res = await api.get('/v1/audit-log/verify');
    expect(res.status, res.text).to.equal(200);
    return res.body;
  }

  const kept = async (developerId: string) =>
    (await t.svc.db('audit_log').where({ developer_id: developerId }).orderBy('seq').select('id')).map((r: { id: string }) => r.id);
  const headRow = (developerId: string) => t.svc.db('audit_chain_heads').where({ developer_id: developerId }).first();

  it('prunes the entries older than the window, a prefix; verify is ok from the oldest kept id', async () => {
    const { api, developerId, ids, cutoff } = await chain(7, 4);
    const pruneStarted = t.svc.clock.nowMs();
    expect(await t.svc.audit.prune(cutoff)).to.be.at.least(7);
    expect(await kept(developerId)).to.deep.equal(ids.slice(7));
    expect(await verifyOf(api)).to.deep.equal({ ok: true, checked: 4, first_broken_id: null, checked_from: ids[7] });
    // The anchor is the last pruned entry: its seq and hash, and when.
    const head = await headRow(developerId);
    const first = await t.svc.db('audit_log').where({ id: ids[7] }).first();
    expect(Number(head.pruned_seq)).to.equal(7);
    expect(head.pruned_hash).to.equal(first.prev_hash);
    expect(Number(head.pruned_at)).to.be.within(pruneStarted, t.svc.clock.nowMs());
    // Appends go on from the head as before, and the chain still verifies.
    const next = await t.svc.audit.record(entry(developerId, 99));
    expect(await verifyOf(api)).to.deep.equal({ ok: true, checked: 5, first_broken_id: null, checked_from: ids[7] });
    expect((await kept(developerId)).at(-1)).to.equal(next.id);
  });

  it('keeps entries inside the window (not pruned before their time), and a chain with nothing old is untouched', async () => {
    const { api, developerId, ids } = await chain(3, 3);
    // Cutoff before every entry: nothing goes.
    await t.svc.audit.prune(t.svc.clock.nowMs() - 30 * DAY);
    expect(await kept(developerId)).to.deep.equal(ids);
    const head = await headRow(developerId);
    expect([Number(head.pruned_seq), head.pruned_hash, head.pruned_at]).to.deep.equal([0, GENESIS_HASH, null]);
    expect(await verifyOf(api)).to.deep.equal({ ok: true, checked: 6, first_broken_id: null, checked_from: ids[0] });
  });

  it('prunes a long prefix in bounded batches, one transaction each, and may prune everything', async () => {
    // Other tests' developers first, so that only this chain's batches are counted below.
    await t.svc.audit.prune(t.svc.clock.nowMs() + 1);
    const { api, developerId } = await chain(10, 0);
    let batches = 0;
    const deleted = await t.svc.audit.prune(t.svc.clock.nowMs() + 1, { batchSize: 3, onBatch: () => void batches++ });
    expect(deleted).to.equal(10);
    expect(batches).to.equal(3); // 3 + 3 + 3 + 1: a pause after each full batch
    expect(await kept(developerId)).to.deep.equal([]);
    const head = await headRow(developerId);
    expect([Number(head.pruned_seq), head.pruned_hash]).to.deep.equal([Number(head.seq), head.hash]);
    expect(await verifyOf(api)).to.deep.equal({ ok: true, checked: 0, first_broken_id: null, checked_from: null });
  });

  describe('deletions other than a pruned prefix still fail verify', () => {
    it('a deleted middle entry after pruning', async () => {
      const { api, developerId, ids, cutoff } = await chain(4, 6);
      await t.svc.audit.prune(cutoff);
      await t.svc.db('audit_log').where({ id: ids[6] }).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 3, first_broken_id: ids[7], checked_from: ids[4] });
      void developerId;
    });

    it('the newest entries deleted after pruning (the head says they existed)', async () => {
      const { api, ids, cutoff } = await chain(4, 6);
      await t.svc.audit.prune(cutoff);
      await t.svc.db('audit_log').whereIn('id', ids.slice(8)).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 4, first_broken_id: ids[7], checked_from: ids[4] });
    });

    it('more of the prefix deleted without moving the anchor (the oldest kept entry gone)', async () => {
      const { api, ids, cutoff } = await chain(4, 6);
      await t.svc.audit.prune(cutoff);
      await t.svc.db('audit_log').whereIn('id', ids.slice(4, 6)).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 1, first_broken_id: ids[6], checked_from: ids[6] });
    });

    it('a prefix deleted by hand, no retention involved', async () => {
      const { api, ids } = await chain(4, 2);
      await t.svc.db('audit_log').whereIn('id', ids.slice(0, 2)).delete();
      expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 1, first_broken_id: ids[2], checked_from: ids[2] });
    });
  });

  it('never prunes past an entry that does not verify: the tampered entry and everything after it are kept', async () => {
    const { api, developerId, ids, cutoff } = await chain(6, 2);
    await t.svc.db('audit_log').where({ id: ids[3] }).update({ path: '/v1/innocent' });
    await t.svc.audit.prune(cutoff);
    expect(await kept(developerId)).to.deep.equal(ids.slice(3));
    expect(await verifyOf(api)).to.deep.equal({ ok: false, checked: 1, first_broken_id: ids[3], checked_from: ids[3] });
  });

  it('a gap in the old part stops pruning at the gap; verify still names the entry after it', async () => {
    const { api, developerId, ids, cutoff } = await chain(6, 2);
    await t.svc.db('audit_log').where({ id: ids[2] }).delete();
    await t.svc.audit.prune(cutoff);
    expect(await kept(developerId)).to.deep.equal(ids.slice(3));
    expect(await verifyOf(api)).to.deep.include({ ok: false, first_broken_id: ids[3] });
  });

  it('a verify running while retention prunes is not fooled into a break (it checks again from the new anchor)', async () => {
    const { developerId, ids, cutoff } = await chain(60, 5);
    const [verified] = await Promise.all([
      t.svc.audit.verify(developerId, { pageSize: 2 }),
      t.svc.audit.prune(cutoff, { batchSize: 5, onBatch: () => new Promise((r) => setImmediate(r)) }),
    ]);
    expect(verified).to.deep.include({ ok: true, first_broken_id: null });
    expect(await t.svc.audit.verify(developerId)).to.deep.equal({ ok: true, checked: 5, first_broken_id: null, checked_from: ids[60] });
  });

  it('each developer\'s chain is pruned on its own anchor', async () => {
    const a = await chain(3, 1);
    const b = await chain(2, 2);
    // a's entries are all older than the cutoff (its "recent" one is b's "old" time); b keeps its recent two.
    await t.svc.audit.prune(t.svc.clock.nowMs() - 5 * DAY);
    expect(await verifyOf(a.api)).to.deep.equal({ ok: true, checked: 0, first_broken_id: null, checked_from: null });
    expect(Number((await headRow(a.developerId)).pruned_seq)).to.equal(4);
    expect(await verifyOf(b.api)).to.deep.equal({ ok: true, checked: 2, first_broken_id: null, checked_from: b.ids[2] });
    expect(Number((await headRow(b.developerId)).pruned_seq)).to.equal(2);
  });
});
