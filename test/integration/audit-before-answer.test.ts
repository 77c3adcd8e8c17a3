import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * No answer completes without its audit entry (issue 10, item 3): the last byte of a
 * forwarded answer, or a refusal, goes to the agent only after the entry is committed, so
 * a reader who looks right after finds it (no flush, no wait); and when the audit store
 * cannot take it, the gateway fails closed.
 */
describe('audit: the entry is committed before the answer completes (issue 10)', function () {
  this.timeout(30_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.example.com', 'api.stripe.com'],
      egress: ['api.example.com', 'api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_realkeyrealkey', allowed_hosts: ['api.stripe.com'] } },
    });
  });
  after(async () => {
    await w.close();
  });

  /** The newest entries of the environment, read straight after, with no flush. */
  async function newest(limit = 5): Promise<Array<{ path: string; status: number; reason: string }>> {
    const r = await w.t.api.get(`/v1/audit-log?environment_id=${w.envId}&limit=${limit}`);
    expect(r.status).to.equal(200);
    return r.body.data;
  }

  it('a forwarded request, then GET /v1/audit-log at once: its entry is there, 100 times in a row', async () => {
    const agent = proxyAgent(w.gw);
    for (let i = 0; i < 100; i++) {
      const path = `/v1/items/${i}`;
      const r = await request(`https://api.example.com${path}`, { dispatcher: agent });
      expect(r.statusCode).to.equal(200);
      await r.body.arrayBuffer();
      const [entry] = await newest(1);
      expect(entry?.path, `request ${i}`).to.equal(path);
      expect(entry?.status).to.equal(200);
    }
    await agent.close();
  });

  it('a refusal, then GET /v1/audit-log at once: its entry is there, 100 times in a row', async () => {
    const agent = proxyAgent(w.gw);
    for (let i = 0; i < 100; i++) {
      const path = `/refused/${i}`;
      const r = await request(`https://not-allowed.example.org${path}`, { dispatcher: agent }).catch((err: Error) => err);
      // A CONNECT to a host off the allowlist may be refused on the tunnel itself.
      if (!(r instanceof Error)) {
        expect(r.statusCode).to.equal(403);
        await r.body.arrayBuffer();
      }
      const [entry] = await newest(1);
      expect(entry?.path, `refusal ${i}`).to.equal(path);
      expect(entry?.reason).to.equal('egress_denied');
    }
    await agent.close();
  });

  describe('the audit store cannot take the entry: fail closed', () => {
    async function storeAway<T>(fn: () => Promise<T>): Promise<T> {
      const db = w.t.svc.db;
      await db.schema.renameTable('audit_chain_heads', 'audit_chain_heads_away');
      try {
        return await fn();
      } finally {
        await db.schema.renameTable('audit_chain_heads_away', 'audit_chain_heads');
      }
    }

    it('a refusal becomes 503 gateway_unavailable', async () => {
      const agent = proxyAgent(w.gw);
      const r = await storeAway(async () => {
        const res = await request('https://api.example.com/secret-path', {
          dispatcher: agent, method: 'POST', headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}` }, body: '{}',
        });
        return { status: res.statusCode, body: (await res.body.json()) as { error: string } };
      });
      expect(r.status).to.equal(503);
      expect(r.body.error).to.equal('gateway_unavailable');
      await agent.close();
    });

    it('a forwarded answer is cut, never completed; the upstream got it and the entry is written once the store is back', async () => {
      await w.mark();
      const agent = proxyAgent(w.gw);
      w.up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true, pad: 'p'.repeat(100) }));
      };
      const outcome = await storeAway(async () => {
        try {
          const res = await request('https://api.example.com/v1/forwarded-while-down', { dispatcher: agent });
          await res.body.text();
          return 'complete';
        } catch {
          return 'cut';
        }
      });
      expect(outcome).to.equal('cut');
      expect(w.up.seen.some((s) => s.url === '/v1/forwarded-while-down')).to.equal(true);
      // Retried in the background: once the store is back, the entry is there.
      const end = Date.now() + 10_000;
      let found = false;
      while (!found && Date.now() < end) {
        found = (await newest(20)).some((e) => e.path === '/v1/forwarded-while-down');
        if (!found) await new Promise((r) => setTimeout(r, 20));
      }
      expect(found).to.equal(true);
      const verify = await w.t.api.get('/v1/audit-log/verify');
      expect(verify.body.ok).to.equal(true);
      await agent.close();
    });
  });
});
