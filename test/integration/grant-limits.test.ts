import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';

/**
 * Spending mandates on grants (issue 26, item 2; docs/policies-approvals.md, Spending
 * mandates), through the real proxy: Stripe charges are `pay`, and the policy asks for
 * them. A grant approved with limits lets through only charges within them; the approved
 * charge is its first use; a charge over the per-request limit, past the total or the
 * number of uses, in another currency, or whose amount cannot be read asks again as a new
 * approval. Each attack here goes red with its defence switched off (the limit checks of
 * the policy engine and of approvals.consumeGrant).
 */
describe('spending mandates on grants (issue 26, item 2)', function () {
  this.timeout(120_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_mandatemandatemandate', allowed_hosts: ['api.stripe.com'] } },
      rules: [{ category: 'pay', effect: 'ask' }],
    });
  });
  after(async () => {
    await w?.close();
  });

  type Answer = { status: number; error: string | null };
  let n = 0;
  /** Approvals already seen (decided or pending), so a new one is recognised. */
  const known = new Set<string>();

  /** A Stripe charge (a form, as Stripe takes it) through the gateway. */
  function charge(body: string, task: string): { path: string; answer: Promise<Answer> } {
    const path = `/v1/charges?n=${++n}`;
    const agent = proxyAgent(w.gw);
    const answer = request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body,
      headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded', 'x-service-task-id': task },
    }).then(async (r) => {
      const text = await r.body.text();
      return { status: r.statusCode, error: r.statusCode >= 400 ? (JSON.parse(text) as { error: string }).error : null };
    }).finally(() => agent.close().catch(() => {}));
    return { path, answer };
  }

  /** The charge's fate: answered without asking, or held for a new approval (its id). */
  async function fate(answer: Promise<Answer>): Promise<{ answered: Answer } | { held: string }> {
    let done: Answer | null = null;
    void answer.then((a) => (done = a), () => {});
    for (let i = 0; i < 2000; i++) {
      if (done) return { answered: done };
      const pending = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data as Array<{ id: string }>;
      const fresh = pending.find((a) => !known.has(a.id));
      if (fresh) {
        known.add(fresh.id);
        return { held: fresh.id };
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('the charge was neither answered nor held');
  }

  const amount = (minor: number, currency = 'usd') => `amount=${minor}&currency=${currency}&source=tok_visa`;
  const forwarded = (path: string) => w.up.seen.filter((s) => s.url === path).length;

  /** Holds a charge and approves it with these limits for the task; returns the grant id. */
  async function approveWith(body: string, task: string, limits: unknown): Promise<string> {
    const c = charge(body, task);
    const f = await fate(c.answer);
    expect(f, 'the first charge asks').to.have.property('held');
    const id = (f as { held: string }).held;
    const decided = await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: task }, limits });
    expect(decided.status, decided.text).to.equal(200);
    expect(await c.answer).to.deep.equal({ status: 200, error: null });
    expect(forwarded(c.path)).to.equal(1);
    return decided.body.grant_id as string;
  }

  /** The charge passes on the grant: forwarded, no approval. Returns its path. */
  async function passes(body: string, task: string, why: string): Promise<string> {
    const c = charge(body, task);
    const f = await fate(c.answer);
    expect(f, why).to.deep.equal({ answered: { status: 200, error: null } });
    expect(forwarded(c.path), why).to.equal(1);
    return c.path;
  }

  /** The charge asks again: a new approval holds it (denied here), nothing is forwarded. */
  async function asksAgain(body: string, task: string, why: string): Promise<void> {
    const c = charge(body, task);
    const f = await fate(c.answer);
    expect(f, why).to.have.property('held');
    const id = (f as { held: string }).held;
    expect((await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'deny' })).status).to.equal(200);
    expect(await c.answer, why).to.deep.equal({ status: 403, error: 'approval_denied' });
    expect(forwarded(c.path), why).to.equal(0);
  }

  async function grant(id: string): Promise<{ limits: unknown; used: { minor_units: number; uses: number } }> {
    const all = (await w.t.api.get(`/v1/grants?environment_id=${w.envId}&limit=200`)).body.data as Array<{ id: string; limits: unknown; used: { minor_units: number; uses: number } }>;
    return all.find((g) => g.id === id)!;
  }

  it('per request $50, total $80 (USD): the approved $30 passes, $60 asks (per request), $40 passes, $20 asks (only $10 left)', async () => {
    const g = await approveWith(amount(3000), 'scenario', { per_request_minor_units: 5000, total_minor_units: 8000, currency: 'USD' });
    expect(await grant(g)).to.deep.include({ limits: { per_request_minor_units: 5000, total_minor_units: 8000, currency: 'usd' }, used: { minor_units: 3000, uses: 1 } });
    await asksAgain(amount(6000), 'scenario', '$60 is over the per-request limit');
    await passes(amount(4000), 'scenario', '$40 fits ($70 of $80)');
    expect((await grant(g)).used).to.deep.equal({ minor_units: 7000, uses: 2 });
    // The audit entry names the grant that let it through.
    await w.t.svc.audit.flush();
    const log = (await w.t.api.get(`/v1/audit-log?environment_id=${w.envId}&limit=200`)).body.data as Array<{ decision: string; reason: string; grant_id: string | null }>;
    expect(log.filter((e) => e.grant_id === g && e.reason === 'grant').map((e) => e.decision)).to.deep.equal(['allow']);
    await asksAgain(amount(2000), 'scenario', '$20 would pass the total');
    await passes(amount(1000), 'scenario', 'the last $10 fits exactly');
    expect((await grant(g)).used).to.deep.equal({ minor_units: 8000, uses: 3 });
    await asksAgain(amount(1), 'scenario', 'nothing is left');
  });

  it('an agent splitting a payment into small charges gets exactly the total through, then asks', async () => {
    const task = 'split';
    const g = await approveWith(amount(3000), task, { total_minor_units: 8000, currency: 'usd' });
    for (let i = 0; i < 5; i++) await passes(amount(1000), task, `split charge ${i + 1} of $10 fits`);
    await asksAgain(amount(1000), task, 'the sixth $10 would make $90 of $80');
    expect((await grant(g)).used).to.deep.equal({ minor_units: 8000, uses: 6 });
  });

  it('a charge whose amount cannot be read, or in another currency, asks again (an amount limit covers only what it can count)', async () => {
    const task = 'unreadable';
    const g = await approveWith(amount(100), task, { per_request_minor_units: 5000, total_minor_units: 100_000, currency: 'usd' });
    await asksAgain('amount=100&amount=100&currency=usd', task, 'amount twice: the provider may take either');
    await asksAgain('amount=100', task, 'no currency');
    await asksAgain('currency=usd&source=tok_visa', task, 'no amount');
    await asksAgain(amount(100, 'eur'), task, 'another currency');
    await asksAgain(amount(100, 'jpy'), task, 'a zero-decimal currency, another currency still');
    await passes(amount(100), task, 'the same charge in USD fits');
    expect((await grant(g)).used).to.deep.equal({ minor_units: 200, uses: 2 });
  });

  it('max_uses: the approved request is the first use; the grant takes max_uses requests in all', async () => {
    const task = 'uses';
    const g = await approveWith(amount(500), task, { max_uses: 3 });
    await passes(amount(999_999, 'eur'), task, 'no amount limit: any amount, any currency');
    await passes('amount=1&amount=2', task, 'no amount limit: even one that cannot be read');
    await asksAgain(amount(500), task, 'the fourth request');
    expect(await grant(g)).to.deep.include({ limits: { max_uses: 3 }, used: { minor_units: 0, uses: 3 } });
  });

  it('a grant without limits is unchanged: covers every charge of its task, spends nothing, shows limits null and used 0', async () => {
    const task = 'unlimited';
    const c = charge(amount(100_000), task);
    const f = await fate(c.answer);
    const id = (f as { held: string }).held;
    const decided = await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'task', task_id: task } });
    expect(decided.status).to.equal(200);
    expect((await c.answer).status).to.equal(200);
    await passes(amount(100_000), task, 'no limits');
    await passes('amount=1&amount=2', task, 'no limits');
    expect(await grant(decided.body.grant_id)).to.deep.include({ limits: null, used: { minor_units: 0, uses: 0 } });
  });

  it('decision bodies: limits on deny, on once, unknown fields, negative or fractional amounts, a currency missing: 400 invalid_decision, the approval stays pending', async () => {
    const c = charge(amount(3000), 'bodies');
    const id = (await fate(c.answer) as { held: string }).held;
    const bad: unknown[] = [
      { decision: 'deny', limits: { max_uses: 1 } },
      { decision: 'approve', scope: { kind: 'once' }, limits: { max_uses: 1 } },
      { decision: 'approve', scope: { kind: 'permanent' }, limits: { max_uses: 1, per_request: 5 } },
      { decision: 'approve', scope: { kind: 'permanent' }, limits: { per_request_minor_units: -5, currency: 'usd' } },
      { decision: 'approve', scope: { kind: 'permanent' }, limits: { total_minor_units: 10.5, currency: 'usd' } },
      { decision: 'approve', scope: { kind: 'permanent' }, limits: { total_minor_units: 8000 } },
      { decision: 'approve', scope: { kind: 'permanent' }, limits: 'lots' },
    ];
    for (const body of bad) {
      const r = await w.t.api.post(`/v1/approvals/${id}/decision`, body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error, JSON.stringify(body)).to.equal('invalid_decision');
    }
    // Unchanged: without limits the old errors keep their codes.
    expect((await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'approve', limits: { max_uses: 1 } })).body.error).to.equal('missing_scope');
    expect((await w.t.api.get(`/v1/approvals/${id}`)).body.status).to.equal('pending');
    // Limits that leave out the very charge being approved: refused, so no grant is born outside its limits.
    for (const limits of [
      { per_request_minor_units: 2000, currency: 'usd' },
      { total_minor_units: 2999, currency: 'usd' },
      { per_request_minor_units: 5000, currency: 'eur' },
      { recipients_within: ['acme.com'] },
    ]) {
      const r = await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'approve', scope: { kind: 'permanent' }, limits });
      expect(r.status, JSON.stringify(limits)).to.equal(400);
      expect(r.body.error).to.equal('invalid_decision');
      expect(r.body.message).to.match(/request being approved/);
    }
    expect((await w.t.api.get(`/v1/approvals/${id}`)).body.status).to.equal('pending');
    expect((await w.t.api.post(`/v1/approvals/${id}/decision`, { decision: 'deny' })).status).to.equal(200);
    expect(await c.answer).to.deep.equal({ status: 403, error: 'approval_denied' });
  });

  it('a grant revoked meanwhile is spent no more: the next charge asks', async () => {
    const task = 'revoked';
    const g = await approveWith(amount(100), task, { total_minor_units: 10_000, currency: 'usd' });
    await passes(amount(100), task, 'within the total');
    expect((await w.t.api.delete(`/v1/grants/${g}`)).status).to.equal(204);
    await asksAgain(amount(100), task, 'the grant is revoked');
  });

  it('limits on an egress (connect) approval: 400 invalid_decision, since its grant is never spent', async () => {
    const apr = await w.t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID, environmentId: w.envId, connector: 'egress:api.example.org', category: 'connect' as never, method: 'CONNECT',
      host: 'api.example.org', path: '/', max_scope: 'permanent',
    });
    known.add(apr.id);
    const r = await w.t.api.post(`/v1/approvals/${apr.id}/decision`, { decision: 'approve', scope: { kind: 'permanent' }, limits: { max_uses: 2 } });
    expect(r.status).to.equal(400);
    expect(r.body.error).to.equal('invalid_decision');
    expect((await w.t.api.post(`/v1/approvals/${apr.id}/decision`, { decision: 'deny' })).status).to.equal(200);
  });

  it('recipients_within (service level): the grant covers a send only when every recipient is within, and never one it cannot read', async () => {
    const a = w.t.svc.approvals;
    const base = {
      developerId: DEFAULT_DEVELOPER_ID, environmentId: w.envId, connector: 'gmail', category: 'send' as const, method: 'POST',
      host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', max_scope: 'permanent' as const,
    };
    const apr = await a.requestApproval({ ...base, facts: { recipients: ['ann@acme.com', 'bo@eu.acme.com'] } });
    known.add(apr.id);
    const outside = await w.t.api.post(`/v1/approvals/${apr.id}/decision`, { decision: 'approve', scope: { kind: 'permanent' }, limits: { recipients_within: ['eu.acme.com'] } });
    expect(outside.status).to.equal(400);
    expect(outside.body.error).to.equal('invalid_decision');
    const decided = await w.t.api.post(`/v1/approvals/${apr.id}/decision`, { decision: 'approve', scope: { kind: 'permanent' }, limits: { recipients_within: ['acme.com'], max_uses: 3 } });
    expect(decided.status, decided.text).to.equal(200);
    const g = decided.body.grant_id as string;
    const spend = (recipients: string[] | null) => a.consumeGrant(DEFAULT_DEVELOPER_ID, g, { recipients });
    expect(await spend(['x@acme.com.evil.io']), 'a look-alike domain').to.equal(false);
    expect(await spend(['x@acme.com', 'y@evil.io']), 'one recipient outside').to.equal(false);
    expect(await spend(null), 'recipients that cannot be read').to.equal(false);
    expect(await spend([]), 'no recipient').to.equal(false);
    expect(await spend(['x@sales.acme.com'])).to.equal(true);
    expect(await spend(['x@acme.com'])).to.equal(true);
    expect(await spend(['x@acme.com']), 'max_uses 3 reached').to.equal(false);
    expect((await grant(g)).used).to.deep.equal({ minor_units: 0, uses: 3 });
    expect((await w.t.api.delete(`/v1/grants/${g}`)).status).to.equal(204);
  });
});
