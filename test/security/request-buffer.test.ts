import { expect } from 'chai';
import { request, type Dispatcher } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';

/**
 * The service's memory, spent by one agent: a request held for approval is buffered whole
 * (up to 10 MiB), and nothing bounded how many an agent could keep waiting at once. A
 * thousand 10 MiB payments held asked the service for 10 GB, and its end was every
 * tenant's. Now the gateway keeps at most GATEWAY_REQUEST_BUFFER_MIB of one environment's
 * request bodies in memory (here 2 MiB) and GATEWAY_REQUEST_BUFFER_TOTAL_MIB of all (here
 * 3 MiB): a body to hold past either is refused 413 with Retry-After, before any approval
 * is asked for, and what a finished request buffered is given back (proxy/body-budget.ts).
 */
const STRIPE_KEY = 'sk_live_51BufferBudgetRealKey';
const BODY = `amount=100&currency=usd&description=${'x'.repeat(900 * 1024)}`; // ~900 KiB: two fit in 2 MiB, three do not

interface Env {
  id: string;
  gw: Gateway;
  ph: string;
}

describe('security: an agent cannot fill the service\'s memory with held request bodies', function () {
  this.timeout(60000);
  let w: AttackWorld;
  let a: Env;
  let b: Env;
  let c: Env;
  const inFlight: Array<{ abort: AbortController; dispatcher: Dispatcher }> = [];

  async function environment(): Promise<Env> {
    const created = await w.t.api.post('/v1/environments', {
      end_user_id: `buffer-${Math.random().toString(36).slice(2)}`,
      egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.body.id;
    const gw: Gateway = (await w.t.api.get(`/v1/environments/${id}/gateway`)).body;
    const ph: string = (await w.t.api.get(`/v1/environments/${id}/secrets`)).body.data[0].placeholder;
    return { id, gw, ph };
  }

  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] } },
      env: { GATEWAY_REQUEST_BUFFER_MIB: '2', GATEWAY_REQUEST_BUFFER_TOTAL_MIB: '3' },
    });
    a = { id: w.envId, gw: w.gw, ph: w.ph.STRIPE_KEY! };
    b = await environment();
    c = await environment();
  });
  after(async () => {
    for (const f of inFlight) f.abort.abort();
    await Promise.all(inFlight.map((f) => f.dispatcher.close().catch(() => undefined)));
    await w?.close();
  });

  /** A payment (category pay: held for approval by default), its body ~900 KiB. */
  function pay(env: Env): { status: Promise<number | 'held'>; abort: AbortController } {
    const abort = new AbortController();
    const dispatcher = proxyAgent(env.gw);
    inFlight.push({ abort, dispatcher });
    const answer = request('https://api.stripe.com/v1/charges', {
      dispatcher, signal: abort.signal, method: 'POST', body: BODY,
      headers: { authorization: `Bearer ${env.ph}`, 'content-type': 'application/x-www-form-urlencoded' },
    }).then(async (r) => {
      await r.body.dump();
      return { status: r.statusCode, headers: r.headers };
    });
    answer.catch(() => undefined);
    return {
      abort,
      // Not answered within 3 s: the request is held (waiting for a decision).
      status: Promise.race([answer.then((r) => { last = r.headers; return r.status; }), new Promise<'held'>((res) => setTimeout(() => res('held'), 3000))]),
    };
  }
  let last: Record<string, string | string[] | undefined> = {};

  async function pending(env: Env, n: number): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const r = await w.t.api.get(`/v1/approvals?status=pending&environment_id=${env.id}`);
      if (r.body.data.length >= n) {
        expect(r.body.data).to.have.length(n);
        return;
      }
      await new Promise((res) => setTimeout(res, 10));
    }
    throw new Error(`fewer than ${n} pending approvals`);
  }

  it('attack: a third held payment past the environment\'s share is 413 with Retry-After, no approval asked; another environment still holds', async () => {
    const first = pay(a);
    const second = pay(a);
    await pending(a, 2);
    await w.mark();
    const third = pay(a);
    expect(await third.status).to.equal(413);
    expect(last['x-gateway-error']).to.equal('payload_too_large');
    expect(last['retry-after']).to.equal('5');
    const [e] = await w.audited();
    expect(e).to.include({ connector: 'secret:STRIPE_KEY', category: 'pay', decision: 'deny', reason: 'request_buffer_full', status: 413, approval_id: null });
    await pending(a, 2);
    expect(w.up.seen).to.have.length(0);

    // Another environment's share is its own: its payment is held.
    const other = pay(b);
    await pending(b, 1);
    expect(await Promise.race([first.status, second.status, other.status])).to.equal('held');
  });

  it('attack: past the gateway\'s total (3 MiB) even an environment with its share left is refused', async () => {
    const r = pay(c);
    expect(await r.status).to.equal(413);
    expect(last['x-gateway-error']).to.equal('payload_too_large');
    const approvals = await w.t.api.get(`/v1/approvals?status=pending&environment_id=${c.id}`);
    expect(approvals.body.data).to.have.length(0);
  });

  it('what a request buffered is given back when it ends: the agent that left its holds may hold again', async () => {
    for (const f of inFlight) f.abort.abort(); // every request held so far: the agent went away
    // Its approvals stay pending (the agent's leaving does not decide them), but the bodies are gone.
    for (let i = 0; i < 500 && w.t.svc.gatewayRequests() > 0; i++) await new Promise((res) => setTimeout(res, 10));
    const again = pay(a);
    await pending(a, 3);
    expect(await again.status).to.equal('held');
  });
});
