import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';
import { blockActionsPayload, signedInteraction, startFakeSlack, type FakeSlack, type PressInput, type SlackMessage } from '../helpers/fake-slack.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';

/**
 * Slack approval cards (issue 27): a card per held request, decisions from its buttons,
 * and a card that always tells the truth about its approval. Against a local
 * Slack-compatible server (test/helpers/fake-slack.ts) speaking the official client's shapes,
 * with interactivity requests signed exactly as Slack signs them.
 */
describe('Slack approval cards (issue 27)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  let slack: FakeSlack;
  const SECRET = 'slack-signing-secret-0123456789abcdef';
  let alice: { id: string; name: string };

  before(async () => {
    slack = await startFakeSlack();
    w = await startAttackWorld({
      hosts: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_slackcardsslackcards', allowed_hosts: ['api.stripe.com'] } },
      rules: [{ category: 'pay', effect: 'ask', max_scope: 'time_limited' }],
      // The fake Slack listens on loopback: Slack calls go through the egress guard, which honours this.
      env: { GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1' },
    });
    const put = await w.t.api.put('/v1/approval-channels/slack', { bot_token: slack.token, signing_secret: SECRET, channel_id: 'C0APPROVALS', api_base_url: slack.apiBase });
    expect(put.status, put.text).to.equal(200);
    const created = await w.t.api.post('/v1/team-members', { email: 'alice@example.com', name: 'Alice <!here>' });
    expect(created.status, created.text).to.equal(201);
    const patched = await w.t.api.patch(`/v1/team-members/${created.body.id}`, { slack_user_id: 'U0ALICE' });
    expect(patched.status, patched.text).to.equal(200);
    expect(patched.body.slack_user_id).to.equal('U0ALICE');
    alice = patched.body;
  });
  after(async () => {
    await w?.close();
    await slack?.close();
  });

  let n = 0;
  interface Held { path: string; approvalId: string; answer: Promise<{ status: number; error: string | null }> }
  /** A held Stripe charge (category pay, asked); resolves once its approval is pending. */
  async function hold(opts: { body?: string; headers?: Record<string, string> } = {}): Promise<Held> {
    const before = new Set(((await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&limit=200`)).body.data as Array<{ id: string }>).map((a) => a.id));
    const path = `/v1/charges?n=${++n}`;
    const agent = proxyAgent(w.gw);
    const answer = request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body: opts.body ?? 'amount=1000&currency=usd',
      headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded', ...opts.headers },
    }).then(async (r) => {
      const text = await r.body.text();
      return { status: r.statusCode, error: r.statusCode >= 400 ? (JSON.parse(text) as { error: string }).error : null };
    }).finally(() => agent.close().catch(() => {}));
    for (let i = 0; i < 500; i++) {
      const pending = (await w.t.api.get(`/v1/approvals?environment_id=${w.envId}&status=pending`)).body.data as Array<{ id: string }>;
      const mine = pending.find((a) => !before.has(a.id));
      if (mine) return { path, approvalId: mine.id, answer };
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('the request was never held');
  }

  const cardOf = (approvalId: string, pred: (m: SlackMessage) => boolean = () => true) =>
    slack.waitForMessage((m) => JSON.stringify(m.blocks).includes(approvalId) && pred(m));
  const actions = (m: SlackMessage) => m.blocks.filter((b) => b.type === 'actions').flatMap((b) => b.elements as Array<{ action_id: string; value: string }>);
  const textOf = (m: SlackMessage) => JSON.stringify(m.blocks);

  async function press(p: Omit<PressInput, 'userId'> & { userId?: string }, opts: { secret?: string; ts?: number } = {}) {
    const payload = blockActionsPayload({ userId: 'U0ALICE', ...p });
    const signed = signedInteraction(payload, opts.secret ?? SECRET, opts.ts);
    return { ...(await w.t.raw('POST', '/v1/slack/interactivity', { body: signed.body, headers: signed.headers })), signed };
  }

  it('configures the channel: secrets sealed and never returned; GET, validation, 404 after DELETE is tested on another developer', async () => {
    const got = await w.t.api.get('/v1/approval-channels/slack');
    expect(got.status).to.equal(200);
    expect(got.body).to.deep.include({ type: 'slack', channel_id: 'C0APPROVALS', api_base_url: slack.apiBase });
    expect(got.text).to.not.include(slack.token);
    expect(got.text).to.not.include(SECRET);
    const row = await w.t.svc.db('slack_channels').where({ developer_id: DEFAULT_DEVELOPER_ID }).first();
    expect(JSON.stringify(row)).to.not.include(slack.token);
    expect(JSON.stringify(row)).to.not.include(SECRET);
    expect((await w.t.api.put('/v1/approval-channels/slack', { bot_token: 'not-a-token', signing_secret: SECRET, channel_id: 'C1' })).status).to.equal(400);
    expect((await w.t.api.put('/v1/approval-channels/slack', { bot_token: slack.token, channel_id: 'C1' })).body.error).to.equal('invalid_body');
    expect((await w.t.api.put('/v1/approval-channels/slack', { bot_token: slack.token, signing_secret: SECRET, channel_id: 'C1', api_base_url: 'ftp://x' })).status).to.equal(400);
    const withUser = await w.t.api.put('/v1/approval-channels/slack', { bot_token: slack.token, signing_secret: SECRET, channel_id: 'C1', api_base_url: 'https://user:hunter2@slack.example/api' });
    expect(withUser.status).to.equal(400);
    expect(withUser.body.error).to.equal('invalid_request');
    expect(withUser.text).to.not.include('hunter2');
    const other = await w.t.otherDeveloper();
    expect((await other.get('/v1/approval-channels/slack')).status).to.equal(404);
    expect((await other.put('/v1/approval-channels/slack', { bot_token: 'xoxb-other', signing_secret: 'other-secret-123', channel_id: 'C2' })).status).to.equal(200);
    expect((await other.delete('/v1/approval-channels/slack')).status).to.equal(204);
    expect((await other.get('/v1/approval-channels/slack')).status).to.equal(404);
    // slack_user_id: format, uniqueness per developer, null unlinks.
    expect((await w.t.api.patch(`/v1/team-members/${alice.id}`, { slack_user_id: 'not valid!' })).status).to.equal(400);
    const bob = (await w.t.api.post('/v1/team-members', { email: 'bob@example.com', name: 'Bob' })).body;
    expect((await w.t.api.patch(`/v1/team-members/${bob.id}`, { slack_user_id: 'U0ALICE' })).status).to.equal(400);
    expect((await w.t.api.patch(`/v1/team-members/${bob.id}`, { slack_user_id: null })).body.slack_user_id).to.equal(null);
    expect((await w.t.api.patch('/v1/team-members/mem_000000000000000000000000', { slack_user_id: 'U0X1' })).status).to.equal(404);
  });

  it('attack on the operator\'s own secrets: a token or secret pasted with a stray space or newline is 400 without the value in the answer (a fourth review)', async () => {
    const badToken = `${slack.token} `;
    const badSecret = `${SECRET}\n`;
    const r = await w.t.api.put('/v1/approval-channels/slack', { bot_token: badToken, signing_secret: badSecret, channel_id: 'C1' });
    expect(r.status).to.equal(400);
    expect(r.body.error).to.equal('invalid_request');
    expect(r.text).to.not.include(slack.token);
    expect(r.text).to.not.include(SECRET);
    expect(r.body.message).to.include('bot_token');
  });

  it('posts a card on hold with the decoded details, escaped: the agent cannot inject a mention or a link', async () => {
    const hostile = 'Refund <!channel> <@U0BOSS> <http://evil.example|click here> & `code` *bold*';
    const h = await hold({ body: `amount=4200&currency=usd&description=${encodeURIComponent(hostile)}`, headers: { 'x-service-task-id': 'task <!everyone>' } });
    const card = await cardOf(h.approvalId);
    const call = slack.calls.find((c) => c.method === 'chat.postMessage' && JSON.stringify(c.args).includes(h.approvalId))!;
    expect(call.authorization).to.equal(`Bearer ${slack.token}`);
    expect(call.contentType).to.equal('application/x-www-form-urlencoded');
    expect(JSON.stringify(call.args)).to.not.include(slack.token);
    expect(card.channel).to.equal('C0APPROVALS');
    const text = textOf(card);
    expect(text).to.include('42.00 USD');
    expect(text).to.include('Description');
    expect(text).to.include('&lt;!channel&gt;');
    expect(text).to.include('&lt;@U0BOSS&gt;');
    expect(text).to.include('&lt;http://evil.example|click here&gt;');
    for (const bad of ['<!channel>', '<@U0BOSS>', '<http', '<!everyone>']) expect(text, bad).to.not.include(bad);
    expect(text).to.include(w.envId);
    expect(text).to.include('attacker-'); // the end user
    // Buttons up to max_scope (time_limited): once, task (the request has a task id), one hour; and deny.
    expect(actions(card).map((a) => a.action_id)).to.deep.equal(['approve:once', 'approve:task', 'approve:until', 'deny']);
    expect(actions(card).every((a) => a.value === h.approvalId)).to.equal(true);
    // Clean up: deny it through the API.
    expect((await w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'deny' })).status).to.equal(200);
    await h.answer;
  });

  it('approve from the card: the held request completes, decided_via slack with the member, and the card shows it without buttons', async () => {
    const h = await hold();
    const card = await cardOf(h.approvalId);
    const r = await press({ approvalId: h.approvalId, actionId: 'approve:once', messageTs: card.ts, responseUrl: slack.responseUrl('approve') });
    expect(r.status, r.text).to.equal(200);
    expect(await h.answer).to.deep.equal({ status: 200, error: null });
    expect(w.up.seen.filter((s) => s.url === h.path)).to.have.length(1);
    const a = (await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body;
    expect(a).to.include({ status: 'approved', scope: 'once', decided_via: 'slack' });
    expect((await w.t.svc.db('approvals').where({ id: h.approvalId }).first()).decided_by).to.equal(alice.id);
    const updated = await cardOf(h.approvalId, (m) => m.updates > 0);
    expect(actions(updated)).to.deep.equal([]);
    expect(textOf(updated)).to.include('Approved');
    expect(textOf(updated)).to.include('Slack: Alice &lt;!here&gt;');
    expect(updated.ts).to.equal(card.ts);
    expect(slack.responses.filter((x) => x.id === 'approve')).to.deep.equal([]);
  });

  it('deny from the card: the agent is refused and the card says denied', async () => {
    const h = await hold();
    const card = await cardOf(h.approvalId);
    expect((await press({ approvalId: h.approvalId, actionId: 'deny', messageTs: card.ts })).status).to.equal(200);
    expect(await h.answer).to.deep.equal({ status: 403, error: 'approval_denied' });
    const updated = await cardOf(h.approvalId, (m) => m.updates > 0);
    expect(textOf(updated)).to.include('Denied');
    expect(actions(updated)).to.deep.equal([]);
  });

  it('a decision through the API rewrites the card within seconds; a later press gets an ephemeral "already decided" and changes nothing', async () => {
    const h = await hold();
    await cardOf(h.approvalId);
    expect((await w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'approve', scope: { kind: 'once' } })).status).to.equal(200);
    const updated = await cardOf(h.approvalId, (m) => m.updates > 0);
    expect(textOf(updated)).to.include('API key');
    expect(actions(updated)).to.deep.equal([]);
    await h.answer;
    const r = await press({ approvalId: h.approvalId, actionId: 'deny', responseUrl: slack.responseUrl('late') });
    expect(r.status).to.equal(200);
    const reply = await slack.waitFor(() => slack.responses.find((x) => x.id === 'late'));
    expect(reply.body).to.deep.include({ response_type: 'ephemeral', replace_original: false });
    expect(reply.body.text).to.match(/already decided or has expired/);
    expect((await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body.status).to.equal('approved');
  });

  it('a decision in the console updates the card', async () => {
    const h = await hold();
    await cardOf(h.approvalId);
    const member = (await w.t.api.post('/v1/team-members', { email: 'carol@example.com', name: 'Carol' })).body;
    const jar: string[] = [];
    const signIn = await fetch(`${w.t.url}${new URL(member.sign_in_url).pathname}`, { redirect: 'manual' });
    jar.push(signIn.headers.getSetCookie()[0]!.split(';')[0]!);
    const page = await (await fetch(`${w.t.url}/console/approvals`, { headers: { cookie: jar.join('; ') } })).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    const done = await fetch(`${w.t.url}/console/approvals/${h.approvalId}/decide`, {
      method: 'POST', redirect: 'manual',
      headers: { cookie: jar.join('; '), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, decision: 'deny' }).toString(),
    });
    expect(done.status).to.be.oneOf([200, 303]);
    const updated = await cardOf(h.approvalId, (m) => m.updates > 0);
    expect(textOf(updated)).to.include('Denied');
    expect(textOf(updated)).to.include('the console: Carol');
    await h.answer;
  });

  it('expiry updates the card', async () => {
    const h = await hold();
    await cardOf(h.approvalId);
    await w.t.advance(11 * 60);
    expect(await h.answer).to.deep.equal({ status: 403, error: 'approval_expired' });
    const updated = await cardOf(h.approvalId, (m) => m.updates > 0);
    expect(textOf(updated)).to.include('Expired');
    expect(actions(updated)).to.deep.equal([]);
  });

  describe('refused presses change nothing', () => {
    let h: Held;
    before(async () => {
      h = await hold();
      await cardOf(h.approvalId);
    });
    after(async () => {
      await w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'deny' });
      await h.answer;
    });
    const stillPending = async () => expect((await w.t.api.get(`/v1/approvals/${h.approvalId}`)).body.status).to.equal('pending');

    it('a forged signature: 401 invalid_signature', async () => {
      const r = await press({ approvalId: h.approvalId, actionId: 'approve:once' }, { secret: 'not-the-secret-at-all' });
      expect(r.status).to.equal(401);
      expect(r.body.error).to.equal('invalid_signature');
      await stillPending();
    });

    it('a body changed after signing: 401', async () => {
      const signed = signedInteraction(blockActionsPayload({ approvalId: h.approvalId, actionId: 'deny', userId: 'U0ALICE' }), SECRET);
      const tampered = signedInteraction(blockActionsPayload({ approvalId: h.approvalId, actionId: 'approve:until', userId: 'U0ALICE' }), SECRET);
      const r = await w.t.raw('POST', '/v1/slack/interactivity', { body: tampered.body, headers: { ...tampered.headers, 'x-slack-signature': signed.headers['x-slack-signature']! } });
      expect(r.status).to.equal(401);
      await stillPending();
    });

    it('a stale timestamp (over 5 minutes old), correctly signed: 401', async () => {
      const r = await press({ approvalId: h.approvalId, actionId: 'approve:once' }, { ts: Math.floor(Date.now() / 1000) - 301 });
      expect(r.status).to.equal(401);
      expect(r.body.message).to.match(/300 seconds/);
      await stillPending();
    });

    it('missing headers: 401', async () => {
      const signed = signedInteraction(blockActionsPayload({ approvalId: h.approvalId, actionId: 'approve:once', userId: 'U0ALICE' }), SECRET);
      const r = await w.t.raw('POST', '/v1/slack/interactivity', { body: signed.body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect(r.status).to.equal(401);
      await stillPending();
    });

    it('an unmapped Slack user: 200, an ephemeral reply saying why, the approval still pending', async () => {
      const r = await press({ approvalId: h.approvalId, actionId: 'approve:once', userId: 'U0MALLORY', responseUrl: slack.responseUrl('unmapped') });
      expect(r.status).to.equal(200);
      const reply = await slack.waitFor(() => slack.responses.find((x) => x.id === 'unmapped'));
      expect(reply.body.text).to.match(/not linked to a team member/);
      await stillPending();
    });

    it('a replayed press (the same signed request twice): the second is 401', async () => {
      // Signed for a user who is not mapped, so the first one is accepted but changes nothing.
      const signed = signedInteraction(blockActionsPayload({ approvalId: h.approvalId, actionId: 'approve:once', userId: 'U0NOBODY', responseUrl: slack.responseUrl('replay') }), SECRET);
      const first = await w.t.raw('POST', '/v1/slack/interactivity', { body: signed.body, headers: signed.headers });
      expect(first.status).to.equal(200);
      const again = await w.t.raw('POST', '/v1/slack/interactivity', { body: signed.body, headers: signed.headers });
      expect(again.status).to.equal(401);
      expect(again.body.message).to.match(/already used/);
      await stillPending();
    });

    it('another developer\'s own Slack app cannot press this developer\'s card (signed with its secret): 401', async () => {
      const other = await w.t.otherDeveloper();
      const otherSecret = 'the-other-developers-signing-secret';
      expect((await other.put('/v1/approval-channels/slack', { bot_token: 'xoxb-other-app', signing_secret: otherSecret, channel_id: 'C0OTHER', api_base_url: slack.apiBase })).status).to.equal(200);
      const m = (await other.post('/v1/team-members', { email: 'eve@example.com', name: 'Eve' })).body;
      expect((await other.patch(`/v1/team-members/${m.id}`, { slack_user_id: 'U0EVE' })).status).to.equal(200);
      const r = await press({ approvalId: h.approvalId, actionId: 'approve:once', userId: 'U0EVE' }, { secret: otherSecret });
      expect(r.status).to.equal(401);
      await stillPending();
    });

    it('an unknown approval id: the same 401 as a bad signature', async () => {
      const r = await press({ approvalId: 'apr_000000000000000000000000', actionId: 'approve:once' });
      expect(r.status).to.equal(401);
    });

    it('a scope wider than allowed (approve always, max_scope time_limited): ephemeral scope_too_wide, nothing changes', async () => {
      const r = await press({ approvalId: h.approvalId, actionId: 'approve:permanent', responseUrl: slack.responseUrl('wide') });
      expect(r.status).to.equal(200);
      const reply = await slack.waitFor(() => slack.responses.find((x) => x.id === 'wide'));
      expect(reply.body.text).to.match(/wider than/);
      await stillPending();
    });

    it('a body that is not Slack\'s: 400, nothing read past 64 KiB', async () => {
      expect((await w.t.raw('POST', '/v1/slack/interactivity', { body: 'payload=notjson', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status).to.equal(400);
      const big = await w.t.raw('POST', '/v1/slack/interactivity', { body: 'x'.repeat(70 * 1024), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect(big.status).to.equal(413);
    });
  });

  it('Slack down: the hold and a decision through the API are not delayed; the card is posted late, already decided', async () => {
    slack.down = true;
    try {
      const h = await hold();
      const started = Date.now();
      const r = await w.t.api.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'approve', scope: { kind: 'once' } });
      expect(r.status).to.equal(200);
      expect(await h.answer).to.deep.equal({ status: 200, error: null });
      expect(Date.now() - started).to.be.below(3_000);
      // The post was tried (and failed) meanwhile.
      for (let i = 0; i < 500 && (await w.t.svc.db('slack_deliveries').where({ approval_id: h.approvalId })).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      slack.down = false;
      // Retries are due on the card's own ladder; the sweep (test clock) brings it up to date.
      await w.t.advance(60);
      const card = await cardOf(h.approvalId);
      expect(textOf(card)).to.include('Approved');
      expect(actions(card)).to.deep.equal([]);
      const deliveries = await w.t.svc.db('slack_deliveries').where({ approval_id: h.approvalId }).orderBy('attempted_at');
      expect(deliveries.length).to.be.at.least(2);
      expect(Boolean(deliveries[0].ok)).to.equal(false);
      expect(Boolean(deliveries.at(-1).ok)).to.equal(true);
      expect(JSON.stringify(deliveries)).to.not.include(slack.token);
    } finally {
      slack.down = false;
    }
  });
});
