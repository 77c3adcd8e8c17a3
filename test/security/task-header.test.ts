import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * X-Service-Task-Id and X-Service-Session-Id go into approval requests and grants, whose
 * columns hold 255 characters. Longer ones threw inside approvals and reached the agent as
 * 503 "store down" (issue 10, item 9): the agent's own malformed header is a 400 refusal of
 * its own, audited, with nothing forwarded and no approval created.
 */
describe('task and session headers the store cannot hold (issue 10)', function () {
  this.timeout(20_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_taskheadertaskheader', allowed_hosts: ['api.stripe.com'] } },
      // Writes are held for approval: the path that stores the task id.
      rules: [{ category: 'write', effect: 'ask' }],
    });
  });
  after(async () => {
    await w.close();
  });

  const cases: Array<[string, Record<string, string>]> = [
    ['a 256-character task id', { 'x-service-task-id': 't'.repeat(256) }],
    ['a 5,000-character task id', { 'x-service-task-id': 't'.repeat(5000) }],
    ['a 300-character session id', { 'x-service-session-id': 's'.repeat(300) }],
    ['a task id with a tab', { 'x-service-task-id': 'task\tone' }],
  ];
  for (const [name, headers] of cases) {
    it(`${name}: 400 invalid_task_header, audited, nothing forwarded, no approval`, async () => {
      await w.mark();
      const agent = proxyAgent(w.gw);
      const r = await request('https://api.stripe.com/v1/charges', {
        dispatcher: agent, method: 'POST', body: 'amount=100',
        headers: { ...headers, authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(r.statusCode).to.equal(400);
      expect(r.headers['x-gateway-error']).to.equal('invalid_task_header');
      const body = (await r.body.json()) as { error: string; message: string };
      expect(body.error).to.equal('invalid_task_header');
      expect(body.message).to.match(/X-Service-(Task|Session)-Id/);
      const [entry] = await w.audited(1);
      expect(entry).to.include({ status: 400, reason: 'invalid_task_header', decision: 'deny' });
      expect(w.up.seen).to.have.length(0);
      const pending = await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`);
      expect(pending.body.data).to.have.length(0);
      await agent.close();
    });
  }

  it('a 255-character task id is fine: the request is held for approval with it', async () => {
    await w.mark();
    const agent = proxyAgent(w.gw);
    const task = 'k'.repeat(255);
    const sent = request('https://api.stripe.com/v1/charges', {
      dispatcher: agent, method: 'POST', body: 'amount=100',
      headers: { 'x-service-task-id': task, authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
    });
    let approval: { id: string; task_id: string } | undefined;
    for (let i = 0; i < 200 && !approval; i++) {
      approval = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data[0];
      if (!approval) await new Promise((r) => setTimeout(r, 10));
    }
    expect(approval?.task_id).to.equal(task);
    expect((await w.t.api.post(`/v1/approvals/${approval!.id}/decision`, { decision: 'deny' })).status).to.equal(200);
    const r = await sent;
    expect(r.statusCode).to.equal(403);
    await r.body.dump();
    await agent.close();
  });
});
