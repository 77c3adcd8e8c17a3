/**
 * Issue 10, item 7: webhook delivery trusts GATEWAY_UPSTREAM_CA_FILE as the proxy does.
 * The real service (config → bin/service.ts wiring → delivery worker → sender), an HTTPS
 * receiver with a certificate from a test CA, once with the CA file configured and once
 * without.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { waitUntil } from './webhooks.receiver.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { enqueueEvent } from '../../webhooks/outbox.js';
import { eventsStore } from '../../webhooks/events.store.js';
import { withTx } from '../../store/db.js';

describe('webhook delivery over TLS with GATEWAY_UPSTREAM_CA_FILE', function () {
  this.timeout(60_000);
  let up: FakeUpstream;
  let dir: string;
  let caFile: string;
  const services: TestService[] = [];

  before(async () => {
    // A certificate for 127.0.0.1 (IP SAN): the service resolves nothing, the receiver is local.
    up = await startFakeUpstream({ tls: true, defaultHostname: '127.0.0.1' });
    up.respond = (_req, res) => res.writeHead(200).end('ok');
    dir = mkdtempSync(join(tmpdir(), 'gw-ca-'));
    caFile = join(dir, 'upstream-ca.pem');
    writeFileSync(caFile, up.ca.certPem);
  });
  after(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function deliverOne(env: Record<string, string>): Promise<{ event: Awaited<ReturnType<typeof eventsStore.get>>; attempts: any[] }> {
    const t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1', GATEWAY_WEBHOOK_TIMEOUT_MS: '2000', ...env });
    services.push(t);
    const put = await t.api.put('/v1/webhook-endpoint', { url: `https://127.0.0.1:${up.port}/hooks` });
    expect(put.status, put.text).to.equal(200);
    const id = await withTx(t.svc.db, (trx) =>
      enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: null, data: { n: 1 }, createdAtMs: t.svc.clock.nowMs() }),
    );
    let attempts: any[] = [];
    await waitUntil('one recorded attempt', async () => {
      const r = await t.api.get(`/v1/webhook-deliveries?event_id=${id}`);
      attempts = r.body.data;
      return attempts.length >= 1;
    }, 10_000);
    return { event: await eventsStore.get(t.svc.db, id!), attempts };
  }

  it('is delivered when the receiver\'s CA is in GATEWAY_UPSTREAM_CA_FILE', async () => {
    const before = up.seen.length;
    const { event, attempts } = await deliverOne({ GATEWAY_UPSTREAM_CA_FILE: caFile });
    expect(attempts.map((a) => [a.status, a.status_code, a.error])).to.deep.equal([['succeeded', 200, null]]);
    expect(event!.status).to.equal('delivered');
    expect(up.seen.length - before).to.equal(1);
    expect(up.seen.at(-1)!.url).to.equal('/hooks');
  });

  it('fails as tls_error, not delivered, when no CA file is configured', async () => {
    const before = up.seen.length;
    const { event, attempts } = await deliverOne({});
    expect(attempts.map((a) => [a.status, a.status_code, a.error])).to.deep.equal([['failed', null, 'tls_error']]);
    expect(attempts[0].next_attempt_at).to.be.a('string');
    expect(event!.status).to.equal('pending');
    expect(event!.delivered_at).to.equal(null);
    expect(up.seen.length - before).to.equal(0);
  });
});
