/**
 * Webhook delivery (service.md Delivery; decisions.md Webhook endpoint settings): the real
 * service on a real database (SQLite, or MySQL when DATABASE_URL says so), local receivers,
 * the test clock for retries.
 */
import { expect } from 'chai';
import { hostname } from 'node:os';
import { lookup } from 'node:dns/promises';
import Stripe from 'stripe';
import { startTestService, type ApiClient, type TestService } from '../helpers/service.js';
import { createEnv, expectError, TIMESTAMP } from './environments.fixtures.js';
import { startReceiver, waitUntil, type Receiver, type Received } from './webhooks.receiver.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { enqueueEvent } from '../../webhooks/outbox.js';
import { buildEnvelope } from '../../webhooks/envelope.js';
import { eventsStore } from '../../webhooks/events.store.js';
import { onEnqueued } from '../../webhooks/notifier.js';
import { parseSignatureHeader } from '../../webhooks/signing.js';
import { verifyWebhook } from '../../webhooks/verify.js';
import { RETRY_DELAYS_MS, RETRY_WINDOW_MS } from '../../webhooks/retry.js';
import { createWebhookDeliveryService, DEFAULT_MAX_PER_DEVELOPER, type WebhookDeliveryService } from '../../webhooks/delivery.service.js';
import { createWebhookEndpointsService } from '../../webhooks/endpoints.service.js';
import { createAccountsService } from '../../accounts/accounts.service.js';
import { isPrivateAddress } from '../../lib/net.js';
import { ServiceClock } from '../../lib/clock.js';
import { Keyring } from '../../lib/crypto.js';
import { silentLogger } from '../../lib/log.js';
import { createDb, parseDatabaseUrl, withTx } from '../../store/db.js';
import { freshDb, usingMysql } from '../helpers/db.js';
import { randomBytes } from 'node:crypto';
import type { RequestApprovalInput } from '../../approvals/approvals.service.js';

const BASE_URL = 'https://gateway.example.test';
const DELIVERY_KEYS = ['attempted_at', 'duration_ms', 'error', 'event_id', 'event_type', 'id', 'next_attempt_at', 'status', 'status_code', 'url'];
const stripe = new Stripe('sk_test_00000000000000000000000000');

function header(r: Received, name: string): string {
  const v = r.headers[name];
  return Array.isArray(v) ? v.join(',') : (v ?? '');
}

describe('webhook delivery', function () {
  this.timeout(60_000);
  let t: TestService;
  let api: ApiClient;
  let envId: string;
  const receivers: Receiver[] = [];

  async function receiver(answer?: Receiver['answer']): Promise<Receiver> {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  }

  /** Points the default developer's endpoint at `url` (a fresh endpoint and secret each test). */
  async function endpoint(url: string, client: ApiClient = api): Promise<string> {
    await client.delete('/v1/webhook-endpoint');
    const r = await client.put('/v1/webhook-endpoint', { url });
    expect(r.status, r.text).to.equal(200);
    return r.body.secret;
  }

  function requestApproval(over: Partial<RequestApprovalInput> = {}) {
    return t.svc.approvals.requestApproval({
      developerId: DEFAULT_DEVELOPER_ID,
      environmentId: envId,
      connector: 'gmail',
      category: 'send',
      method: 'POST',
      host: 'gmail.googleapis.com',
      path: '/gmail/v1/users/me/messages/send',
      max_scope: 'session',
      ...over,
    });
  }

  /** Queues an event the way a domain service does (its own transaction; nudges the worker). */
  function enqueue(developerId = DEFAULT_DEVELOPER_ID, data: Record<string, unknown> = { n: 1 }): Promise<string | null> {
    return withTx(t.svc.db, (trx) => enqueueEvent(trx, { developerId, type: 'approval.requested', environmentId: envId, data, createdAtMs: t.svc.clock.nowMs() }));
  }

  async function deliveries(query = '', client: ApiClient = api): Promise<any[]> {
    const r = await client.get(`/v1/webhook-deliveries${query}`);
    expect(r.status, r.text).to.equal(200);
    return r.body.data;
  }

  async function attemptsOf(eventId: string, count: number): Promise<any[]> {
    let rows: any[] = [];
    await waitUntil(`${count} recorded attempt(s) of ${eventId}`, async () => (rows = await deliveries(`?event_id=${eventId}`)).length >= count);
    return rows;
  }

  const eventRow = async (id: string) => (await eventsStore.get(t.svc.db, id))!;

  before(async () => {
    t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1', GATEWAY_WEBHOOK_TIMEOUT_MS: '500', BASE_URL });
    api = t.api;
    envId = (await createEnv(api)).id;
  });
  after(async () => {
    await t?.close();
  });
  afterEach(async () => {
    // No webhook of one test reaches the next test's receiver.
    await api.delete('/v1/webhook-endpoint');
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  describe('approval.requested', () => {
    it('arrives at once, as the spec envelope, with Content-Type, Service-Event-Id and a signature our verifier and Stripe accept', async () => {
      const rx = await receiver();
      const secret = await endpoint(rx.url);
      const before = Date.now();
      const a = await requestApproval();
      const [got] = await rx.waitFor(1, 2_000);
      // Told at commit, not found by the 5 s sweep.
      expect(got!.at - before).to.be.below(1_500);

      expect(got!.method).to.equal('POST');
      expect(got!.path).to.equal('/hooks');
      expect(header(got!, 'content-type')).to.equal('application/json');
      const raw = got!.raw.toString('utf8');
      const env = JSON.parse(raw);
      expect(Object.keys(env)).to.deep.equal(['id', 'type', 'created', 'environment_id', 'data']);
      expect(env.id).to.match(/^evt_[0-9a-f]{24}$/);
      expect(header(got!, 'service-event-id')).to.equal(env.id);
      expect(env.type).to.equal('approval.requested');
      expect(env.created).to.match(TIMESTAMP);
      expect(env.created).to.equal(a.created_at);
      expect(env.environment_id).to.equal(envId);
      expect(Object.keys(env.data)).to.deep.equal(['approval_id', 'env_id', 'connector', 'category', 'summary', 'max_scope', 'expires_at', 'decision_url']);
      expect(env.data).to.deep.equal({
        approval_id: a.id,
        env_id: envId,
        connector: 'gmail',
        category: 'send',
        summary: 'POST gmail.googleapis.com /gmail/v1/users/me/messages/send',
        max_scope: 'session',
        expires_at: Math.floor(Date.parse(a.expires_at) / 1000),
        decision_url: `${BASE_URL}/v1/approvals/${a.id}/decision`,
      });
      expect(Number.isInteger(env.data.expires_at)).to.equal(true);
      expect(env.data.expires_at - Math.floor(Date.parse(env.created) / 1000)).to.be.within(599, 600);
      expect(new URL(env.data.decision_url).href).to.equal(env.data.decision_url);

      const sig = header(got!, 'service-signature');
      expect(sig).to.match(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(Math.abs(parseSignatureHeader(sig)!.t - Math.floor(Date.now() / 1000))).to.be.below(5);
      expect(verifyWebhook(got!.raw, sig, [secret]).id).to.equal(env.id);
      const viaStripe = stripe.webhooks.constructEvent(got!.raw, sig, secret) as unknown as { id: string; type: string };
      expect(viaStripe.id).to.equal(env.id);
      expect(viaStripe.type).to.equal('approval.requested');
      // The bytes sent are the bytes stored when the event was queued.
      expect(raw).to.equal((await eventRow(env.id)).body);

      const [attempt] = await attemptsOf(env.id, 1);
      expect(Object.keys(attempt).sort()).to.deep.equal(DELIVERY_KEYS);
      expect(attempt).to.deep.include({ event_id: env.id, event_type: 'approval.requested', url: rx.url, status: 'succeeded', status_code: 200, error: null, next_attempt_at: null });
      expect(attempt.id).to.match(/^dlv_[0-9a-f]{24}$/);
      expect(attempt.attempted_at).to.match(TIMESTAMP);
      expect(attempt.duration_ms).to.be.a('number').and.at.least(0);
      await waitUntil('delivered', async () => (await eventRow(env.id)).status === 'delivered');
      const row = await eventRow(env.id);
      expect(row).to.deep.include({ attempts: 1, next_attempt_at: null, locked_until: null });
      expect(row.delivered_at).to.be.a('number');
    });

    it('after a rotation carries two v1 values, new first; each secret verifies alone (ours and Stripe\'s)', async () => {
      const rx = await receiver();
      const old = await endpoint(rx.url);
      const fresh = (await api.post('/v1/webhook-endpoint/rotate')).body.secret as string;
      await requestApproval();
      const [got] = await rx.waitFor(1, 2_000);
      const sig = header(got!, 'service-signature');
      expect(sig).to.match(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
      const id = header(got!, 'service-event-id');
      for (const secret of [fresh, old]) {
        expect(verifyWebhook(got!.raw, sig, [secret]).id).to.equal(id);
        expect((stripe.webhooks.constructEvent(got!.raw, sig, secret) as unknown as { id: string }).id).to.equal(id);
      }
      // v1 order: the new secret first.
      const [first] = parseSignatureHeader(sig)!.v1;
      const onlyNew = `t=${parseSignatureHeader(sig)!.t},v1=${first}`;
      expect(verifyWebhook(got!.raw, onlyNew, [fresh]).id).to.equal(id);
      expect(() => verifyWebhook(got!.raw, onlyNew, [old])).to.throw();
    });
  });

  describe('retries', () => {
    it('500, then 200 after advancing 5 s: same Service-Event-Id and bytes; both attempts logged newest first', async () => {
      const rx = await receiver((_r, i) => (i === 0 ? { status: 500 } : { status: 200 }));
      const secret = await endpoint(rx.url);
      const id = (await enqueue())!;
      const [first] = await attemptsOf(id, 1);
      expect(first).to.deep.include({ status: 'failed', status_code: 500, error: 'http_status' });
      const wait = Date.parse(first.next_attempt_at) - Date.parse(first.attempted_at);
      expect(wait).to.be.within(RETRY_DELAYS_MS[0]!, RETRY_DELAYS_MS[0]! + 1_000);
      expect(rx.requests).to.have.length(1);

      await t.advance(5);
      // runDue performed the retry before the advance answered.
      expect(rx.requests).to.have.length(2);
      const [a, b] = rx.requests;
      expect(header(b!, 'service-event-id')).to.equal(id).and.equal(header(a!, 'service-event-id'));
      expect(b!.raw.equals(a!.raw)).to.equal(true);
      expect(verifyWebhook(b!.raw, header(b!, 'service-signature'), [secret]).id).to.equal(id);

      const rows = await deliveries(`?event_id=${id}`);
      expect(rows.map((r) => [r.status, r.status_code])).to.deep.equal([['succeeded', 200], ['failed', 500]]);
      expect((await eventRow(id))).to.deep.include({ status: 'delivered', attempts: 2 });
    });

    it('a 302 is not followed and counts as a failed attempt', async () => {
      const target = await receiver();
      const rx = await receiver(() => ({ status: 302, headers: { location: target.url } }));
      await endpoint(rx.url);
      const id = (await enqueue())!;
      const [attempt] = await attemptsOf(id, 1);
      expect(attempt).to.deep.include({ status: 'failed', status_code: 302, error: 'redirect' });
      expect(attempt.next_attempt_at).to.match(TIMESTAMP);
      expect(rx.requests).to.have.length(1);
      expect(target.requests).to.have.length(0);
      expect((await eventRow(id)).status).to.equal('pending');
    });

    it('an endpoint that does not answer within the timeout is a failed attempt (error timeout), retried', async () => {
      const rx = await receiver(() => 'hang');
      await endpoint(rx.url);
      const id = (await enqueue())!;
      const [attempt] = await attemptsOf(id, 1);
      expect(attempt).to.deep.include({ status: 'failed', status_code: null, error: 'timeout' });
      // GATEWAY_WEBHOOK_TIMEOUT_MS=500 in this suite (10 s by default).
      expect(attempt.duration_ms).to.be.within(450, 3_000);
      expect(attempt.next_attempt_at).to.match(TIMESTAMP);
      expect(rx.requests).to.have.length(1);
    });

    it('a connection refused is a failed attempt (connection_refused)', async () => {
      const rx = await receiver();
      const url = rx.url;
      await rx.close();
      receivers.splice(receivers.indexOf(rx), 1);
      await endpoint(url);
      const id = (await enqueue())!;
      const [attempt] = await attemptsOf(id, 1);
      expect(attempt).to.deep.include({ status: 'failed', status_code: null, error: 'connection_refused', url });
    });

    it('the whole ladder: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, then once at 24 h; then failed, and nothing more', async () => {
      const rx = await receiver(() => ({ status: 503 }));
      await endpoint(rx.url);
      const id = (await enqueue())!;
      const created = (await eventRow(id)).created_at;
      await attemptsOf(id, 1);
      for (let i = 0; i < RETRY_DELAYS_MS.length; i++) {
        await t.advance(RETRY_DELAYS_MS[i]! / 1000);
        expect(rx.requests, `attempt ${i + 2}`).to.have.length(i + 2);
        await attemptsOf(id, i + 2);
      }
      let rows = await deliveries(`?event_id=${id}`);
      expect(rows).to.have.length(7);
      // After the 7th attempt (~17.6 h in) the next one is the last, at exactly 24 h.
      expect(Date.parse(rows[0].next_attempt_at)).to.equal(created + RETRY_WINDOW_MS);
      // The gaps between attempts follow the ladder.
      const times = rows.map((r) => Date.parse(r.attempted_at)).reverse();
      for (let i = 0; i < RETRY_DELAYS_MS.length; i++) {
        expect(times[i + 1]! - times[i]!, `gap ${i + 1}`).to.be.within(RETRY_DELAYS_MS[i]!, RETRY_DELAYS_MS[i]! + 2_000);
      }
      expect((await eventRow(id)).status).to.equal('pending');

      await t.advance(Math.ceil((created + RETRY_WINDOW_MS - t.svc.clock.nowMs()) / 1000));
      expect(rx.requests).to.have.length(8);
      rows = await attemptsOf(id, 8);
      expect(rows[0]).to.deep.include({ status: 'failed', status_code: 503, next_attempt_at: null });
      const ev = await eventRow(id);
      expect(ev).to.deep.include({ status: 'failed', attempts: 8, next_attempt_at: null, locked_until: null });

      await t.advance(2 * 86_400);
      expect(rx.requests).to.have.length(8);
      expect(new Set(rx.requests.map((r) => header(r, 'service-event-id')))).to.deep.equal(new Set([id]));
      expect(new Set(rx.requests.map((r) => r.raw.toString('utf8')))).to.have.property('size', 1);
    });

    it('goes to the URL in force at send time', async () => {
      const first = await receiver(() => ({ status: 500 }));
      const second = await receiver();
      await endpoint(first.url);
      const id = (await enqueue())!;
      await attemptsOf(id, 1);
      const put = await api.put('/v1/webhook-endpoint', { url: second.url });
      expect(put.status).to.equal(200);
      await t.advance(5);
      expect(second.requests).to.have.length(1);
      expect(header(second.requests[0]!, 'service-event-id')).to.equal(id);
      expect((await deliveries(`?event_id=${id}`)).map((r) => r.url)).to.deep.equal([second.url, first.url]);
    });
  });

  describe('no URL', () => {
    it('no endpoint: nothing is queued or sent', async () => {
      const rx = await receiver();
      const other = await t.otherDeveloper();
      const dev = (await t.accounts.authenticate(other.key))!;
      const env = (await createEnv(other)).id;
      await t.svc.approvals.requestApproval({ developerId: dev.id, environmentId: env, connector: 'gmail', category: 'send', method: 'POST', host: 'h', path: '/p', max_scope: 'once' });
      expect(await t.svc.db('webhook_events').where({ developer_id: dev.id })).to.deep.equal([]);
      await t.advance(5);
      expect(rx.requests).to.have.length(0);
      expect(await deliveries('', other)).to.deep.equal([]);
    });

    it('the endpoint gone at send time: the event is cancelled, no attempt is made', async () => {
      const rx = await receiver(() => ({ status: 500 }));
      await endpoint(rx.url);
      const id = (await enqueue())!;
      await attemptsOf(id, 1);
      // Gone without the DELETE's own cancel step (as if removed between claim and send).
      await t.svc.db('webhook_endpoints').where({ developer_id: DEFAULT_DEVELOPER_ID }).delete();
      await t.advance(5);
      expect(rx.requests).to.have.length(1);
      expect(await deliveries(`?event_id=${id}`)).to.have.length(1);
      expect((await eventRow(id))).to.deep.include({ status: 'cancelled', next_attempt_at: null, locked_until: null });
    });

    it('DELETE of the endpoint cancels a queued retry', async () => {
      const rx = await receiver(() => ({ status: 500 }));
      await endpoint(rx.url);
      const id = (await enqueue())!;
      await attemptsOf(id, 1);
      expect((await api.delete('/v1/webhook-endpoint')).status).to.equal(204);
      await t.advance(5);
      expect(rx.requests).to.have.length(1);
      expect((await eventRow(id)).status).to.equal('cancelled');
    });
  });

  describe('the outbox signal and the sweep', () => {
    it('the worker is told after COMMIT, never for a rollback', async () => {
      const rx = await receiver();
      await endpoint(rx.url);
      const notices: Array<{ eventId: string; visible: boolean }> = [];
      const off = onEnqueued((n) => {
        void eventsStore.get(t.svc.db, n.eventId).then((row) => notices.push({ eventId: n.eventId, visible: row !== null }));
      });
      try {
        let rolledBack: string | null = null;
        await withTx(t.svc.db, async (trx) => {
          rolledBack = await enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: envId, data: {}, createdAtMs: t.svc.clock.nowMs() });
          throw new Error('roll back');
        }).catch(() => {});
        const committed = (await enqueue())!;
        await rx.waitFor(1);
        await waitUntil('notice', () => notices.length >= 1);
        expect(notices).to.deep.equal([{ eventId: committed, visible: true }]);
        expect(rolledBack).to.match(/^evt_/);
        expect(header(rx.requests[0]!, 'service-event-id')).to.equal(committed);
      } finally {
        off();
      }
    });

    it('an event queued by another process (no signal here) goes out on the sweep: runDue after an advance', async () => {
      const rx = await receiver();
      await endpoint(rx.url);
      const now = t.svc.clock.nowMs();
      const { envelope, body } = buildEnvelope({ type: 'approval.requested', createdAtMs: now, environmentId: envId, data: { x: 1 } });
      await eventsStore.insert(t.svc.db, {
        id: envelope.id, developer_id: DEFAULT_DEVELOPER_ID, environment_id: envId, type: envelope.type, body, created_at: now,
        status: 'pending', attempts: 0, next_attempt_at: now, last_attempt_at: null, delivered_at: null, locked_until: null,
      });
      await t.advance(5);
      expect(rx.requests.map((r) => header(r, 'service-event-id'))).to.deep.equal([envelope.id]);
    });
  });

  describe('GET /v1/webhook-deliveries', () => {
    it('pages newest first, filters by event_id and status, validates filters, and shows another developer nothing', async () => {
      const rx = await receiver((_r, i) => (i % 2 === 0 ? { status: 500 } : { status: 204 }));
      await endpoint(rx.url);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const id = (await enqueue())!;
        ids.push(id);
        await attemptsOf(id, 1);
      }
      // Attempt outcomes by arrival: 500, 204, 500.
      const all = await deliveries('?limit=200');
      const mine = all.filter((d) => ids.includes(d.event_id));
      expect(mine.map((d) => d.event_id)).to.deep.equal([...ids].reverse());
      for (let i = 1; i < all.length; i++) expect(Date.parse(all[i - 1].attempted_at)).to.be.at.least(Date.parse(all[i].attempted_at));

      const failed = await deliveries('?status=failed&limit=200');
      expect(failed.length).to.be.greaterThan(0);
      expect(failed.every((d) => d.status === 'failed')).to.equal(true);
      const ok = await deliveries('?status=succeeded&limit=200');
      expect(ok.every((d) => d.status === 'succeeded')).to.equal(true);
      expect(ok.length + failed.length).to.equal(all.length);
      expect((await deliveries(`?event_id=${ids[1]}`)).map((d) => [d.event_id, d.status])).to.deep.equal([[ids[1], 'succeeded']]);
      expect(await deliveries(`?event_id=${ids[1]}&status=failed`)).to.deep.equal([]);
      expect(await deliveries('?event_id=evt_000000000000000000000000')).to.deep.equal([]);

      // Paging: limit 1 walks every attempt once.
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const r: any = await api.get(`/v1/webhook-deliveries?limit=1${after ? `&after=${after}` : ''}`);
        expect(r.status).to.equal(200);
        expect(Object.keys(r.body).sort()).to.deep.equal(['data', 'next']);
        seen.push(...r.body.data.map((d: any) => d.id));
        if (!r.body.next) break;
        after = r.body.next;
      }
      expect(seen).to.deep.equal(all.map((d) => d.id));

      expectError(await api.get('/v1/webhook-deliveries?status=pending'), 400, 'invalid_request');
      expectError(await api.get('/v1/webhook-deliveries?status=delivered'), 400, 'invalid_request');
      expectError(await api.get('/v1/webhook-deliveries?event_id=apr_000000000000000000000000'), 400, 'invalid_request');
      expectError(await api.get('/v1/webhook-deliveries?limit=x'), 400, 'invalid_request');
      expectError(await api.get('/v1/webhook-deliveries?status=failed&status=succeeded'), 400, 'invalid_request');
      expectError(await t.raw('GET', '/v1/webhook-deliveries'), 401, 'unauthorized');

      const other = await t.otherDeveloper();
      expect(await deliveries('', other)).to.deep.equal([]);
      expect(await deliveries(`?event_id=${ids[0]}`, other)).to.deep.equal([]);
      expect((await other.get(`/v1/webhook-deliveries?after=${all[0].id}`)).body).to.deep.equal({ data: [], next: null });
    });
  });
});

describe('webhook delivery: fairness with the default 10 s timeout', function () {
  this.timeout(60_000);
  let t: TestService;
  const receivers: Receiver[] = [];
  before(async () => {
    t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1' });
  });
  after(async () => {
    // Closing aborts the hanging attempts (recorded as error `shutdown`) instead of waiting 10 s.
    const started = Date.now();
    await t?.close();
    expect(Date.now() - started).to.be.below(5_000);
    await Promise.all(receivers.map((r) => r.close()));
  });

  it('a developer whose endpoint hangs holds only its own slots; another developer\'s event arrives at once', async () => {
    const slow = await startReceiver(() => 'hang');
    const fast = await startReceiver();
    receivers.push(slow, fast);
    expect((await t.api.put('/v1/webhook-endpoint', { url: slow.url })).status).to.equal(200);
    const other = await t.otherDeveloper();
    const otherDev = (await t.accounts.authenticate(other.key))!;
    const otherSecret = (await other.put('/v1/webhook-endpoint', { url: fast.url })).body.secret;

    const at = () => t.svc.clock.nowMs();
    for (let i = 0; i < 40; i++) {
      await withTx(t.svc.db, (trx) => enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: null, data: { i }, createdAtMs: at() }));
    }
    await waitUntil('the slow developer at its cap', () => slow.hanging() >= DEFAULT_MAX_PER_DEVELOPER);

    const before = Date.now();
    const id = await withTx(t.svc.db, (trx) => enqueueEvent(trx, { developerId: otherDev.id, type: 'approval.requested', environmentId: null, data: { fast: true }, createdAtMs: at() }));
    const [got] = await fast.waitFor(1, 3_000);
    expect(got!.at - before).to.be.below(1_000);
    expect(header(got!, 'service-event-id')).to.equal(id);
    expect(verifyWebhook(got!.raw, header(got!, 'service-signature'), [otherSecret]).id).to.equal(id);
    // Still hanging, and never more than the per-developer cap at once.
    expect(slow.hanging()).to.equal(DEFAULT_MAX_PER_DEVELOPER);
    expect(slow.requests).to.have.length(DEFAULT_MAX_PER_DEVELOPER);
  });
});

describe('webhook delivery to a private destination (GATEWAY_ALLOW_PRIVATE_UPSTREAMS unset)', function () {
  this.timeout(30_000);
  let t: TestService;
  let rx: Receiver;
  before(async () => {
    t = await startTestService();
    rx = await startReceiver();
  });
  after(async () => {
    await t?.close();
    await rx?.close();
  });

  it('a name that resolves to a private address is refused after DNS: no connection, a failed attempt (private_destination)', async function () {
    // The machine's own name usually resolves to a loopback or private address; the same
    // check on an injected resolver is in test/unit/webhooks/sender.test.ts.
    const name = hostname();
    let addrs: string[] = [];
    try {
      addrs = (await lookup(name, { all: true })).map((a) => a.address);
    } catch {
      /* no address: the gate below says so */
    }
    skipOrFailInCI(this, addrs.length === 0 || !addrs.every(isPrivateAddress) ? `this machine's name (${name}) does not resolve to private addresses only: ${addrs.join(', ') || 'no address'}` : null);
    const url = `http://${name}:${new URL(rx.origin).port}/hooks`;
    const put = await t.api.put('/v1/webhook-endpoint', { url });
    expect(put.status, put.text).to.equal(200);
    const id = (await withTx(t.svc.db, (trx) => enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: null, data: {}, createdAtMs: t.svc.clock.nowMs() })))!;
    let rows: any[] = [];
    await waitUntil('an attempt', async () => (rows = (await t.api.get(`/v1/webhook-deliveries?event_id=${id}`)).body.data).length >= 1);
    expect(rows[0]).to.deep.include({ status: 'failed', status_code: null, error: 'private_destination', url });
    expect(rows[0].next_attempt_at).to.match(TIMESTAMP);
    expect(rx.requests).to.have.length(0);
  });
});

describe('webhook delivery to the service itself (GATEWAY_ALLOW_PRIVATE_UPSTREAMS=1)', function () {
  this.timeout(30_000);
  let t: TestService;
  before(async () => {
    t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1' });
  });
  after(async () => {
    await t?.close();
  });

  it('attack: an endpoint on the service\'s own API port is refused like the proxy refuses it: no connection, private_destination (it answered 404, a fourth review)', async () => {
    const url = `${t.url}/v1/approvals/apr_0123456789abcdef01234567/decision`;
    const put = await t.api.put('/v1/webhook-endpoint', { url });
    expect(put.status, put.text).to.equal(200);
    const id = (await withTx(t.svc.db, (trx) => enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: null, data: {}, createdAtMs: t.svc.clock.nowMs() })))!;
    let rows: any[] = [];
    await waitUntil('an attempt', async () => (rows = (await t.api.get(`/v1/webhook-deliveries?event_id=${id}`)).body.data).length >= 1);
    expect(rows[0]).to.deep.include({ status: 'failed', status_code: null, error: 'private_destination', url });
  });
});

describe('webhook delivery: several workers on one database', function () {
  this.timeout(60_000);

  it('two workers (two pools, as two processes) share the outbox: every event once, none lost, none twice', async function () {
    // Several processes on one database is a MySQL deployment. SQLite is one process's
    // store (store/db.ts: one connection): a second connection's read-then-write
    // transaction gets SQLITE_BUSY at once, whatever this code does.
    if (!usingMysql()) this.skip();
    const fresh = await freshDb();
    const second = await createDb(parseDatabaseUrl(fresh.url)!);
    const rx = await startReceiver();
    const clock = new ServiceClock();
    const keyring = new Keyring([randomBytes(32)]);
    const workers: WebhookDeliveryService[] = [];
    try {
      const accounts = createAccountsService({ db: fresh.db, clock });
      const endpoints = createWebhookEndpointsService({ db: fresh.db, clock, keyring, allowPrivateDestinations: true });
      const devs: string[] = [];
      for (let i = 0; i < 3; i++) {
        const id = `dev_${String(i).padStart(24, '0')}`;
        await accounts.ensureDeveloper(id, `d${i}`);
        await endpoints.set(id, rx.url);
        devs.push(id);
      }
      for (const db of [fresh.db, second]) {
        const ep = createWebhookEndpointsService({ db, clock, keyring, allowPrivateDestinations: true });
        const w = createWebhookDeliveryService({ db, clock, log: silentLogger, target: (id) => ep.deliveryTarget(id) }, { allowPrivateDestinations: true, maxInFlight: 16, maxPerDeveloper: 4 });
        w.start();
        workers.push(w);
      }
      const N = 300;
      const ids = await Promise.all(Array.from({ length: N }, (_, i) =>
        withTx(i % 2 ? second : fresh.db, (trx) => enqueueEvent(trx, { developerId: devs[i % devs.length]!, type: 'approval.requested', environmentId: null, data: { i }, createdAtMs: clock.nowMs() })),
      ));
      await rx.waitFor(N, 30_000);
      await Promise.all(workers.map((w) => w.sweep()));
      const got = rx.requests.map((r) => header(r, 'service-event-id'));
      expect(new Set(got).size).to.equal(N);
      expect(got).to.have.length(N);
      expect(new Set(got)).to.deep.equal(new Set(ids));
      const rows = await fresh.db('webhook_events').select('status').count({ n: '*' }).groupBy('status');
      expect(rows.map((r: any) => [r.status, Number(r.n)])).to.deep.equal([['delivered', N]]);
      expect(workers.every((w) => w.stats().attempts > 0), 'both workers delivered some').to.equal(true);
    } finally {
      for (const w of workers) await w.close();
      await rx.close();
      await second.destroy();
      await fresh.cleanup();
    }
  });
});
