import { expect } from 'chai';
import knex, { type Knex } from 'knex';
import { connect as netConnect } from 'node:net';
import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * A node stopping (issue 25, item 7): listening ends at once; a request held for approval
 * is answered 503 `gateway_unavailable` with Retry-After (its approval stays decidable); a
 * request still sending its body when the stop began finishes and is answered; the audit
 * batch is written before the store closes. A request still under way when the grace ends
 * is cut, and the stop goes on.
 */
describe('graceful stop (issue 25)', function () {
  this.timeout(60_000);

  async function world(graceSecs: string): Promise<{ w: AttackWorld; reader: Knex }> {
    const w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_gracefulstopgraceful', allowed_hosts: ['api.stripe.com'] } },
      rules: [{ category: 'pay', effect: 'ask' }],
      env: { GATEWAY_SHUTDOWN_GRACE_SECS: graceSecs },
    });
    // A second handle on the same store: the service's own is closed by the stop.
    const reader = knex({ ...(w.t.svc.db.client as { config: Knex.Config }).config });
    return { w, reader };
  }

  async function untilGatewayRequests(w: AttackWorld, n: number): Promise<void> {
    for (let i = 0; i < 500 && w.t.svc.gatewayRequests() !== n; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.t.svc.gatewayRequests()).to.equal(n);
  }

  const refused = (url: string): Promise<string> => new Promise((resolve) => {
    const u = new URL(url);
    const s = netConnect(Number(u.port), u.hostname);
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });

  it('a held request gets 503 gateway_unavailable with Retry-After; one mid-body finishes; nothing new is accepted; both audited', async () => {
    const { w, reader } = await world('20');
    try {
      const agent = proxyAgent(w.gw);
      const held = request('https://api.stripe.com/v1/charges', {
        dispatcher: agent, method: 'POST', body: 'amount=100',
        headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
      }).then(async (r) => ({ status: r.statusCode, retryAfter: r.headers['retry-after'], body: await r.body.json() as { error: string } }));
      let approvalId = '';
      for (let i = 0; i < 500 && !approvalId; i++) {
        approvalId = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data[0]?.id ?? '';
        if (!approvalId) await new Promise((r) => setTimeout(r, 10));
      }
      expect(approvalId).to.match(/^apr_/);

      // A write (allowed) whose body is half sent when the stop begins.
      const body = new PassThrough();
      const whole = `name=${'x'.repeat(5000)}`;
      body.write(whole.slice(0, 2000));
      const midBody = request('https://api.stripe.com/v1/customers', {
        dispatcher: proxyAgent(w.gw), method: 'POST', body,
        headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(whole.length) },
      }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));
      await untilGatewayRequests(w, 2);

      const stopping = w.t.svc.close();
      const h = await held.catch((err) => { throw new Error(`held: ${err}`); });
      expect(h.status).to.equal(503);
      expect(h.body.error).to.equal('gateway_unavailable');
      expect(h.retryAfter).to.equal('5');
      // Listening has stopped: the proxy and the API refuse new connections.
      expect(await refused(w.gw.proxy_url)).to.equal('ECONNREFUSED');
      expect(await refused(w.t.url)).to.equal('ECONNREFUSED');
      // The request under way goes on: the rest of its body, forwarded whole, answered.
      body.end(whole.slice(2000));
      const m = await midBody.catch((err) => { throw new Error(`midBody: ${err}`); });
      expect(m.status, m.text).to.equal(200);
      expect(w.up.seen.find((s) => s.url === '/v1/customers')?.body.toString()).to.equal(whole);
      expect(w.up.seen.some((s) => s.url === '/v1/charges')).to.equal(false);
      await stopping;

      // The audit batch was written before the store closed.
      const entries = await reader('audit_log').where({ environment_id: w.envId }).whereIn('path', ['/v1/charges', '/v1/customers']).select('path', 'status', 'reason', 'approval_id');
      expect(entries).to.have.length(2);
      expect(entries.find((e) => e.path === '/v1/charges')).to.deep.include({ status: 503, reason: 'gateway_stopping', approval_id: approvalId });
      expect(entries.find((e) => e.path === '/v1/customers')).to.deep.include({ status: 200 });
      // The approval stays decidable (by another node, or this one when it is back).
      expect((await reader('approvals').where({ id: approvalId }).first()).status).to.equal('pending');
      await agent.close();
    } finally {
      await reader.destroy();
      await w.close();
    }
  });

  it('a request still under way when the grace ends is cut; the stop goes on', async () => {
    const { w, reader } = await world('1');
    try {
      w.up.respond = (s, res) => {
        if (s.url === '/v1/customers/slow') return; // never answers
        res.end('{}');
      };
      const slow = request('https://api.stripe.com/v1/customers/slow', {
        dispatcher: proxyAgent(w.gw), headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}` },
      }).then((r) => r.body.text().then(() => r.statusCode), () => 'cut');
      for (let i = 0; i < 500 && !w.up.seen.some((s) => s.url === '/v1/customers/slow'); i++) await new Promise((r) => setTimeout(r, 10));
      const t0 = performance.now();
      await w.t.svc.close();
      const took = performance.now() - t0;
      expect(took).to.be.at.least(900);
      expect(took).to.be.below(10_000);
      expect(await slow).to.equal('cut');
    } finally {
      await reader.destroy();
      await w.close();
    }
  });
});
