import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';
import { APPROVAL_LIFETIME_MS } from '../../approvals/approvals.service.js';

/**
 * A held request whose decision lands at the same moment as something else (issue 10,
 * item 9): its expiry (the test clock moved to expires_at while the decision is sent), the
 * agent going away, or a decision made by another process and found by the poll. Whatever
 * wins, the request is forwarded at most once, the agent's answer and the approval agree,
 * and the request has exactly one audit entry saying what happened. Timing is controlled
 * with the injected clock and by racing the two calls, not with sleeps.
 */
describe('held requests: a decision racing expiry, a disconnect, a poll (issue 10)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_heldraceheldrace', allowed_hosts: ['api.stripe.com'] } },
      rules: [{ category: 'pay', effect: 'ask' }],
    });
  });
  after(async () => {
    await w.close();
  });

  let n = 0;
  /** Sends a held request (a charge is `pay`); resolves once its approval is pending. */
  async function hold(): Promise<{ path: string; approvalId: string; answer: Promise<{ status: number; error: string | null } | 'gone'>; abort: AbortController }> {
    const path = `/v1/charges?race=${++n}`;
    const abort = new AbortController();
    const agent = proxyAgent(w.gw);
    const answer = request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body: 'amount=100', signal: abort.signal,
      headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
    }).then(
      async (r) => {
        const text = await r.body.text();
        return { status: r.statusCode, error: r.statusCode >= 400 ? (JSON.parse(text) as { error: string }).error : null };
      },
      () => 'gone' as const,
    ).finally(() => agent.close().catch(() => {}));
    for (let i = 0; i < 500; i++) {
      const pending = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data as Array<{ id: string; path: string }>;
      const mine = pending[0];
      if (mine) return { path, approvalId: mine.id, answer, abort };
      await new Promise((r) => setImmediate(r));
    }
    throw new Error('the request was never held');
  }

  const forwarded = (path: string) => w.up.seen.filter((s) => s.url === path).length;

  it('a decision sent as the clock reaches expires_at: approved and forwarded once, or expired and never forwarded', async () => {
    const seen = { approved: 0, expired: 0 };
    for (let i = 0; i < 12; i++) {
      await w.mark();
      const h = await hold();
      const a = (await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body as { expires_at: string; created_at: string };
      const toExpiry = (Date.parse(a.expires_at) - (await w.t.svc.clock.nowMs())) / 1000;
      const [decided] = await Promise.all([
        w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'approve', scope: { kind: 'once' } }),
        w.t.advance(toExpiry),
      ]);
      const answer = await h.answer;
      expect(answer).to.not.equal('gone');
      const final = (await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body as { status: string };
      if (decided.status === 200) {
        seen.approved++;
        expect(final.status).to.equal('approved');
        expect(answer).to.deep.include({ status: 200 });
        expect(forwarded(h.path)).to.equal(1);
      } else {
        seen.expired++;
        expect(decided.status).to.equal(409);
        expect(final.status).to.equal('expired');
        expect(answer).to.deep.equal({ status: 403, error: 'approval_expired' });
        expect(forwarded(h.path)).to.equal(0);
      }
      const entries = (await w.audited(1)).filter((e) => e.approval_id === h.approvalId);
      expect(entries, 'one audit entry').to.have.length(1);
      expect(entries[0]!.reason).to.equal(decided.status === 200 ? 'ask_rule' : 'approval_expired');
    }
    expect(seen.approved + seen.expired).to.equal(12);
    expect(APPROVAL_LIFETIME_MS).to.be.above(0);
  });

  it('the agent goes away as the approval lands: forwarded at most once, one audit entry that says which', async () => {
    for (let i = 0; i < 12; i++) {
      await w.mark();
      const h = await hold();
      await Promise.all([
        w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'approve', scope: { kind: 'once' } }),
        Promise.resolve().then(() => h.abort.abort()),
      ]);
      await h.answer;
      const entries = (await w.audited(1)).filter((e) => e.approval_id === h.approvalId);
      expect(entries, 'one audit entry').to.have.length(1);
      const times = forwarded(h.path);
      expect(times).to.be.at.most(1);
      // Not forwarded: the agent had left (if the request was already on its way out, the
      // entry says it may have gone out). Forwarded: never a plain client_disconnected.
      if (times === 0) expect(entries[0]!.reason).to.be.oneOf(['client_disconnected', 'client_disconnected_after_forward']);
      // Forwarded: either the answer came back (the policy's reason) or the agent had left by
      // then, and the entry says the request went out anyway.
      else expect(entries[0]!.reason).to.be.oneOf(['ask_rule', 'client_disconnected_after_forward']);
    }
  });

  it('a decision made by another process (found by the poll) as the clock reaches expiry: the agent and the store agree', async () => {
    for (let i = 0; i < 6; i++) {
      await w.mark();
      const h = await hold();
      const a = (await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body as { expires_at: string };
      const expiresMs = Date.parse(a.expires_at);
      // Another process decides: a conditional write to the shared store, no in-process announcement.
      const otherProcess = w.t.svc.db('approvals').where({ id: h.approvalId, status: 'pending' }).where('expires_at', '>', await w.t.svc.clock.nowMs())
        .update({ status: 'approved', scope: JSON.stringify({ kind: 'once' }), decided_via: 'api_key', decided_at: await w.t.svc.clock.nowMs(), grant_id: null });
      const [changed] = await Promise.all([otherProcess, w.t.advance((expiresMs - (await w.t.svc.clock.nowMs())) / 1000)]);
      const answer = await h.answer;
      const final = (await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body as { status: string };
      expect(answer).to.not.equal('gone');
      if (final.status === 'approved') {
        expect(changed).to.equal(1);
        expect(answer).to.deep.include({ status: 200 });
        expect(forwarded(h.path)).to.equal(1);
      } else {
        expect(final.status).to.equal('expired');
        expect(answer).to.deep.equal({ status: 403, error: 'approval_expired' });
        expect(forwarded(h.path)).to.equal(0);
      }
      expect((await w.audited(1)).filter((e) => e.approval_id === h.approvalId)).to.have.length(1);
    }
  });
});
