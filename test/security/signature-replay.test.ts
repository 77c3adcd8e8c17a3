import { expect } from 'chai';
import knexFactory from 'knex';
import { startTestService, type ApiResponse, type TestService } from '../helpers/service.js';
import { signatureHeader } from '../../webhooks/signing.js';
import { createApprovalsService } from '../../approvals/approvals.service.js';
import { silentLogger } from '../../lib/log.js';
import type { Db } from '../../store/db.js';

/**
 * Hole 6 (medium): a signed decision could be replayed to another approval. The contract's
 * signature covers `t.` + body and the body names no approval, so one captured
 * `{"decision":"approve","scope":{"kind":"permanent"}}` approved every pending approval of
 * the developer for 300 s. A signature now decides once, shared through the store: any
 * second use is 401 invalid_signature.
 */
const APPROVE = '{"decision":"approve","scope":{"kind":"permanent"}}';

describe('security: a signed decision is good once (hole 6)', function () {
  this.timeout(30000);
  let t: TestService;
  let secret: string;
  let envId: string;
  let developerId: string;

  before(async () => {
    // No webhook URL is reachable (private upstreams refused): decisions only, no deliveries.
    t = await startTestService();
    envId = (await t.api.post('/v1/environments', { end_user_id: 'replay-victim' })).body.id;
    secret = (await t.api.put('/v1/webhook-endpoint', { url: 'https://hooks.example.test/approvals' })).body.secret;
    developerId = (await t.accounts.authenticate(t.api.key))!.id;
  });
  after(async () => t?.close());

  const nowSecs = () => Math.floor(t.svc.clock.nowMs() / 1000);
  const pending = async (): Promise<string> =>
    (await t.svc.approvals.requestApproval({ developerId, environmentId: envId, connector: 'secret:STRIPE', category: 'pay', method: 'POST', host: 'api.stripe.com', path: '/v1/charges', max_scope: 'permanent' })).id;
  const post = (id: string, body: string, header: string): Promise<ApiResponse> =>
    t.raw('POST', `/v1/approvals/${id}/decision`, { body, headers: { 'content-type': 'application/json', 'service-signature': header } });

  async function stillPending(id: string): Promise<void> {
    const r = await t.api.get(`/v1/approvals/${id}`);
    expect(r.body).to.include({ status: 'pending', grant_id: null });
  }

  it('attack: a captured approve-permanent replayed verbatim to another approval, and to the same one', async () => {
    const [a, b] = [await pending(), await pending()];
    const captured = signatureHeader([secret], nowSecs(), APPROVE);
    const first = await post(a, APPROVE, captured);
    expect(first.status, first.text).to.equal(200);
    const replay = await post(b, APPROVE, captured);
    expect([replay.status, replay.body.error]).to.deep.equal([401, 'invalid_signature']);
    await stillPending(b);
    expect((await t.api.get(`/v1/grants?environment_id=${envId}`)).body.data.filter((g: { approval_id: string }) => g.approval_id === b)).to.deep.equal([]);
    const again = await post(a, APPROVE, captured);
    expect([again.status, again.body.error]).to.deep.equal([401, 'invalid_signature']);
  });

  it('attack: during a rotation, the two-v1 header replayed with one v1 stripped, or a bogus one added', async () => {
    const rotated = (await t.api.post('/v1/webhook-endpoint/rotate')).body.secret as string;
    const old = secret;
    secret = rotated;
    const [a, b, c] = [await pending(), await pending(), await pending()];
    const ts = nowSecs() - 7;
    const both = signatureHeader([rotated, old], ts, APPROVE);
    expect((await post(a, APPROVE, both)).status).to.equal(200);
    const onlyOld = signatureHeader([old], ts, APPROVE);
    const onlyNew = signatureHeader([rotated], ts, APPROVE);
    expect((await post(b, APPROVE, onlyOld)).body.error).to.equal('invalid_signature');
    expect((await post(b, APPROVE, onlyNew)).body.error).to.equal('invalid_signature');
    expect((await post(c, APPROVE, `${onlyNew},v1=${'0'.repeat(64)}`)).body.error).to.equal('invalid_signature');
    await stillPending(b);
    await stillPending(c);
  });

  it('attack: a signature used once, then replayed through another API process sharing the store', async () => {
    const [a, b] = [await pending(), await pending()];
    const ts = nowSecs() - 11;
    const header = signatureHeader([secret], ts, APPROVE);
    expect((await post(a, APPROVE, header)).status).to.equal(200);
    // A second process: its own connection pool and approvals service, no shared memory.
    const db2 = knexFactory((t.svc.db as unknown as { client: { config: object } }).client.config) as unknown as Db;
    try {
      const other = createApprovalsService({ db: db2, clock: t.svc.clock, log: silentLogger, baseUrl: () => '', signingSecrets: async () => [secret] });
      let err: { code?: string } | null = null;
      try {
        await other.decide(b, { via: 'signature', rawBody: Buffer.from(APPROVE), signature: header }, { ok: true, value: JSON.parse(APPROVE) });
      } catch (e) {
        err = e as { code?: string };
      }
      expect(err?.code).to.equal('invalid_signature');
      other.close();
    } finally {
      await db2.destroy();
    }
    await stillPending(b);
  });

  it('attack: ten copies of one fresh signature at once, to ten approvals: exactly one decides', async () => {
    const ids = await Promise.all(Array.from({ length: 10 }, () => pending()));
    const header = signatureHeader([secret], nowSecs() - 13, APPROVE);
    const results = await Promise.all(ids.map((id) => post(id, APPROVE, header)));
    expect(results.map((r) => r.status).sort()).to.deep.equal([200, 401, 401, 401, 401, 401, 401, 401, 401, 401]);
  });

  it('a fresh signature (its own t) still decides; a 404 does not use up a signature', async () => {
    const a = await pending();
    const header = signatureHeader([secret], nowSecs() - 17, '{"decision":"deny"}');
    expect((await post('apr_000000000000000000000000', '{"decision":"deny"}', header)).status).to.equal(404);
    expect((await post(a, '{"decision":"deny"}', header)).status).to.equal(200);
  });

  it('used signatures are kept while either clock is within their window, and pruned once both are past it (bounded table)', async () => {
    const before = Number((await t.svc.db('used_signatures').count({ n: '*' }).first())?.n);
    expect(before).to.be.greaterThan(0);
    await t.advance(3600); // service clock past every t + tolerance; the sweep job prunes
    let after = before;
    for (let i = 0; i < 100 && after > 0; i++) {
      after = Number((await t.svc.db('used_signatures').count({ n: '*' }).first())?.n);
      if (after > 0) await new Promise((r) => setTimeout(r, 20));
    }
    // The wall clock has not moved an hour: rows stay until both clocks passed their window.
    expect(after).to.equal(before);
    await t.svc.approvals.pruneUsedSignatures();
    expect(Number((await t.svc.db('used_signatures').count({ n: '*' }).first())?.n)).to.equal(before);
    // With both clocks an hour on, every row is past t + tolerance: pruned.
    const later = Date.now() + 3600_000 + 600_000;
    const sweeper = createApprovalsService({ db: t.svc.db, clock: { nowMs: () => later } as never, wallNowMs: () => later, log: silentLogger, baseUrl: () => '', signingSecrets: async () => [] });
    expect(await sweeper.pruneUsedSignatures()).to.equal(before);
    sweeper.close();
    expect(Number((await t.svc.db('used_signatures').count({ n: '*' }).first())?.n)).to.equal(0);
  });
});
