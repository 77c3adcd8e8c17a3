/**
 * Webhook endpoint settings (decisions.md, Webhook endpoint settings) and the outbox
 * (webhooks/outbox.ts), against the real API and a real database.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, type ApiClient, type TestService } from '../helpers/service.js';
import { usingMysql } from '../helpers/db.js';
import { expectError, expectNotFound, TIMESTAMP } from './environments.fixtures.js';
import { Keyring } from '../../lib/crypto.js';
import { withTx, type Db } from '../../store/db.js';
import { createWebhookEndpointsService, type WebhookEndpointsService } from '../../webhooks/endpoints.service.js';
import { enqueueEvent } from '../../webhooks/outbox.js';
import { signatureHeader, parseSignatureHeader } from '../../webhooks/signing.js';
import { verifyWebhook } from '../../webhooks/verify.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';

const SECRET = /^whsec_[A-Za-z0-9_-]{43}$/;
const HOOK = 'https://hooks.example.com/gateway';

/** Every text value in every table, for "no plaintext secret at rest". */
async function allStoredText(db: Db): Promise<string> {
  const mysql = db.client.config.client === 'mysql2';
  const tables: string[] = mysql
    ? ((await db.raw('SHOW TABLES'))[0] as Record<string, string>[]).map((r) => Object.values(r)[0]!)
    : ((await db.raw("SELECT name FROM sqlite_master WHERE type = 'table'")) as { name: string }[]).map((r) => r.name);
  const out: string[] = [];
  for (const t of tables) {
    for (const row of await db(t).select('*')) out.push(JSON.stringify(row));
  }
  return out.join('\n');
}

describe('webhook endpoint settings', function () {
  let t: TestService;
  let api: ApiClient;
  let endpoints: WebhookEndpointsService;
  const masterKey = randomBytes(32);

  before(async () => {
    t = await startTestService({ GATEWAY_MASTER_KEY: masterKey.toString('base64') });
    api = t.api;
    // A second instance over the same store and clock: what the signer and the decision
    // endpoint use (signingSecrets is not on the API).
    endpoints = createWebhookEndpointsService({ db: t.svc.db, clock: t.svc.clock, keyring: new Keyring([masterKey]), allowPrivateDestinations: false });
  });
  after(async () => {
    await t?.close();
  });
  afterEach(async () => {
    await api.delete('/v1/webhook-endpoint');
  });

  it('GET before any PUT is 404 not_found', async () => {
    expectNotFound(await api.get('/v1/webhook-endpoint'));
  });

  it('the first PUT shows the secret once; a second PUT changes the URL, keeps the secret and omits it; GET never shows it', async () => {
    const first = await api.put('/v1/webhook-endpoint', { url: HOOK });
    expect(first.status, first.text).to.equal(200);
    expect(Object.keys(first.body)).to.deep.equal(['url', 'secret', 'secret_prefix', 'previous_secret_expires_at']);
    expect(first.body.url).to.equal(HOOK);
    expect(first.body.secret).to.match(SECRET);
    expect(first.body.secret_prefix).to.equal(first.body.secret.slice(0, 10));
    expect(first.body.previous_secret_expires_at).to.equal(null);
    const secret: string = first.body.secret;

    const second = await api.put('/v1/webhook-endpoint', { url: `${HOOK}/v2` });
    expect(second.status, second.text).to.equal(200);
    expect(second.body).to.deep.equal({ url: `${HOOK}/v2`, secret_prefix: first.body.secret_prefix, previous_secret_expires_at: null });
    expect(second.text).to.not.include(secret);

    const got = await api.get('/v1/webhook-endpoint');
    expect(got.status).to.equal(200);
    expect(got.body).to.deep.equal({ url: `${HOOK}/v2`, secret_prefix: first.body.secret_prefix, previous_secret_expires_at: null });
    expect(got.text).to.not.include(secret);

    expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([secret]);
  });

  it('stores no plaintext secret (a scan of every table)', async () => {
    const { body } = await api.put('/v1/webhook-endpoint', { url: HOOK });
    const rotated = await api.post('/v1/webhook-endpoint/rotate');
    const dump = await allStoredText(t.svc.db);
    for (const s of [body.secret as string, rotated.body.secret as string]) {
      expect(dump).to.not.include(s);
      expect(dump).to.not.include(s.slice('whsec_'.length));
    }
    // The current secret's prefix, and only that, is in clear.
    expect(dump).to.include((rotated.body.secret as string).slice(0, 10));
  });

  describe('rotation', () => {
    it('gives a new secret; both sign for 24 hours; then only the new one', async () => {
      const { body: created } = await api.put('/v1/webhook-endpoint', { url: HOOK });
      const old: string = created.secret;
      const before = t.svc.clock.nowMs();
      const r = await api.post('/v1/webhook-endpoint/rotate');
      expect(r.status, r.text).to.equal(200);
      expect(Object.keys(r.body)).to.deep.equal(['secret', 'previous_secret_expires_at']);
      expect(r.body.secret).to.match(SECRET).and.not.equal(old);
      expect(r.body.previous_secret_expires_at).to.match(TIMESTAMP);
      const expires = Date.parse(r.body.previous_secret_expires_at);
      expect(expires - before).to.be.within(86_400_000, 86_400_000 + 60_000);
      const fresh: string = r.body.secret;

      const got = await api.get('/v1/webhook-endpoint');
      expect(got.body).to.deep.equal({ url: HOOK, secret_prefix: fresh.slice(0, 10), previous_secret_expires_at: r.body.previous_secret_expires_at });

      const secrets = await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID);
      expect(secrets).to.deep.equal([fresh, old]);
      const body = '{"id":"evt_000000000000000000000001","type":"approval.requested"}';
      const nowMs = t.svc.clock.nowMs();
      const header = signatureHeader(secrets, Math.floor(nowMs / 1000), body);
      expect(parseSignatureHeader(header)!.v1).to.have.length(2);
      expect(verifyWebhook(body, header, [fresh], { now: nowMs }).id).to.equal('evt_000000000000000000000001');
      expect(verifyWebhook(body, header, [old], { now: nowMs }).id).to.equal('evt_000000000000000000000001');

      await t.advance(86_400 - 120);
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([fresh, old]);
      await t.advance(121);
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([fresh]);
      const after = await api.get('/v1/webhook-endpoint');
      expect(after.body.previous_secret_expires_at).to.equal(null);
    });

    it('a second rotation within 24 hours keeps only the latest two secrets', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      const a = (await api.post('/v1/webhook-endpoint/rotate')).body.secret;
      const b = (await api.post('/v1/webhook-endpoint/rotate')).body.secret;
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([b, a]);
    });

    it('a URL change keeps the rotation window', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      const r = await api.post('/v1/webhook-endpoint/rotate');
      const put = await api.put('/v1/webhook-endpoint', { url: `${HOOK}/x` });
      expect(put.body.previous_secret_expires_at).to.equal(r.body.previous_secret_expires_at);
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.have.length(2);
    });

    it('rotate without an endpoint is 404 not_found', async () => {
      expectNotFound(await api.post('/v1/webhook-endpoint/rotate'));
    });
  });

  describe('DELETE', () => {
    it('204; then GET is 404, signingSecrets is [], and DELETE again is 204', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      await api.post('/v1/webhook-endpoint/rotate');
      const d = await api.delete('/v1/webhook-endpoint');
      expect(d.status).to.equal(204);
      expect(d.text).to.equal('');
      expectNotFound(await api.get('/v1/webhook-endpoint'));
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([]);
      expect((await api.delete('/v1/webhook-endpoint')).status).to.equal(204);
    });

    it('a PUT after DELETE creates a fresh secret', async () => {
      const first = (await api.put('/v1/webhook-endpoint', { url: HOOK })).body.secret;
      await api.delete('/v1/webhook-endpoint');
      const again = await api.put('/v1/webhook-endpoint', { url: HOOK });
      expect(again.body.secret).to.match(SECRET).and.not.equal(first);
      expect(await endpoints.signingSecrets(DEFAULT_DEVELOPER_ID)).to.deep.equal([again.body.secret]);
    });
  });

  describe('validation', () => {
    const cases: Array<[string, unknown, number, string]> = [
      ['missing url', {}, 422, 'invalid_body'],
      ['url not a string', { url: 42 }, 422, 'invalid_body'],
      ['url null', { url: null }, 422, 'invalid_body'],
      ['unknown field', { url: HOOK, secret: 'whsec_mine' }, 422, 'invalid_body'],
      ['body an array', [HOOK], 422, 'invalid_body'],
      ['empty url', { url: '' }, 400, 'invalid_request'],
      ['relative url', { url: '/hooks' }, 400, 'invalid_request'],
      ['no scheme', { url: 'hooks.example.com/x' }, 400, 'invalid_request'],
      ['ftp url', { url: 'ftp://hooks.example.com/' }, 400, 'invalid_request'],
      ['2049 characters', { url: `https://e.com/${'a'.repeat(2049 - 14)}` }, 400, 'invalid_request'],
      ['credentials in the url', { url: 'https://u:p@hooks.example.com/' }, 400, 'invalid_request'],
      ['localhost', { url: 'http://localhost:3000/hook' }, 400, 'invalid_request'],
      ['127.0.0.1', { url: 'http://127.0.0.1/hook' }, 400, 'invalid_request'],
      ['::1', { url: 'http://[::1]/hook' }, 400, 'invalid_request'],
      ['10/8', { url: 'http://10.1.2.3/hook' }, 400, 'invalid_request'],
      ['172.16/12', { url: 'http://172.31.0.1/hook' }, 400, 'invalid_request'],
      ['192.168/16', { url: 'http://192.168.0.10/hook' }, 400, 'invalid_request'],
      ['169.254/16 (cloud metadata)', { url: 'http://169.254.169.254/latest' }, 400, 'invalid_request'],
      ['fc00::/7', { url: 'http://[fd00::1]/hook' }, 400, 'invalid_request'],
      ['fe80::/10', { url: 'http://[fe80::1]/hook' }, 400, 'invalid_request'],
      ['0.0.0.0', { url: 'http://0.0.0.0/hook' }, 400, 'invalid_request'],
    ];
    for (const [name, body, status, code] of cases) {
      it(`${name}: ${status} ${code}, nothing created`, async () => {
        expectError(await api.put('/v1/webhook-endpoint', body), status, code);
        expectNotFound(await api.get('/v1/webhook-endpoint'));
      });
    }

    it('exactly 2048 characters is accepted', async () => {
      const url = `https://e.com/${'a'.repeat(2048 - 14)}`;
      expect(url).to.have.length(2048);
      const r = await api.put('/v1/webhook-endpoint', { url });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.url).to.equal(url);
    });

    it('a bad URL on an existing endpoint changes nothing', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      expectError(await api.put('/v1/webhook-endpoint', { url: 'http://127.0.0.1/' }), 400, 'invalid_request');
      expect((await api.get('/v1/webhook-endpoint')).body.url).to.equal(HOOK);
    });

    it('PUT without a JSON body is 415; without a key 401', async () => {
      expectError(await api.put('/v1/webhook-endpoint'), 415, 'unsupported_media_type');
      expectError(await t.raw('GET', '/v1/webhook-endpoint'), 401, 'unauthorized');
    });

    it('an unsupported method is 404 no such route', async () => {
      const r = await api.patch('/v1/webhook-endpoint', { url: HOOK });
      expectError(r, 404, 'not_found');
      expect(r.body.message).to.equal('no such route');
    });
  });

  it('another developer sees 404 and then its own endpoint', async () => {
    const mine = await api.put('/v1/webhook-endpoint', { url: HOOK });
    const other = await t.otherDeveloper();
    expectNotFound(await other.get('/v1/webhook-endpoint'));
    expectNotFound(await other.post('/v1/webhook-endpoint/rotate'));
    expect((await other.delete('/v1/webhook-endpoint')).status).to.equal(204);
    expect((await api.get('/v1/webhook-endpoint')).body.url).to.equal(HOOK);

    const theirs = await other.put('/v1/webhook-endpoint', { url: 'https://other.example.com/h' });
    expect(theirs.status).to.equal(200);
    expect(theirs.body.secret).to.match(SECRET).and.not.equal(mine.body.secret);
    expect((await other.get('/v1/webhook-endpoint')).body.url).to.equal('https://other.example.com/h');
    expect((await api.get('/v1/webhook-endpoint')).body.url).to.equal(HOOK);
    await other.delete('/v1/webhook-endpoint');
  });

  describe('enqueueEvent (the outbox)', () => {
    const event = (createdAtMs: number) => ({
      developerId: DEFAULT_DEVELOPER_ID,
      type: 'approval.requested',
      environmentId: 'env_0123456789abcdef01234567',
      data: { approval_id: 'apr_0123456789abcdef01234567', expires_at: 1_800_000_000 },
      createdAtMs,
    });
    const rows = () => t.svc.db('webhook_events').where({ developer_id: DEFAULT_DEVELOPER_ID }).select('*');

    beforeEach(async () => {
      await t.svc.db('webhook_events').delete();
    });

    it('writes nothing and returns null when no URL is set', async () => {
      const id = await withTx(t.svc.db, (trx) => enqueueEvent(trx, event(t.svc.clock.nowMs())));
      expect(id).to.equal(null);
      expect(await rows()).to.have.length(0);
    });

    it('writes the envelope text once, with the returned evt_ id, pending and due now', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      const at = t.svc.clock.nowMs();
      // Read inside the enqueuing transaction: once it commits, the service's delivery worker may take the event
      // (attempts 1) before this test reads it.
      const { id, written } = await withTx(t.svc.db, async (trx) => {
        const queued = await enqueueEvent(trx, event(at));
        return { id: queued, written: await trx('webhook_events').where({ developer_id: DEFAULT_DEVELOPER_ID }).select('*') };
      });
      expect(id).to.match(/^evt_[0-9a-f]{24}$/);
      const [row, ...rest] = written;
      expect(rest).to.have.length(0);
      expect(row.id).to.equal(id);
      expect(row.status).to.equal('pending');
      expect(Number(row.attempts)).to.equal(0);
      expect(Number(row.next_attempt_at)).to.equal(at);
      expect(row.body).to.equal(JSON.stringify({
        id,
        type: 'approval.requested',
        created: new Date(at).toISOString(),
        environment_id: 'env_0123456789abcdef01234567',
        data: { approval_id: 'apr_0123456789abcdef01234567', expires_at: 1_800_000_000 },
      }));
      // Stable: reading it again gives the same bytes (what every retry sends).
      const [again] = await rows();
      expect(again.body).to.equal(row.body);
    });

    it('is rolled back with its transaction', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      let queued: string | null = null;
      const boom = new Error('the change being reported failed');
      try {
        await withTx(t.svc.db, async (trx) => {
          queued = await enqueueEvent(trx, event(t.svc.clock.nowMs()));
          throw boom;
        });
      } catch (err) {
        expect(err).to.equal(boom);
      }
      expect(queued).to.match(/^evt_/);
      expect(await rows()).to.have.length(0);
    });

    it('works on the pool too (no transaction), and not for another developer', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      expect(await enqueueEvent(t.svc.db, event(t.svc.clock.nowMs()))).to.match(/^evt_/);
      expect(await enqueueEvent(t.svc.db, { ...event(t.svc.clock.nowMs()), developerId: 'dev_000000000000000000000000' })).to.equal(null);
    });

    it('DELETE cancels queued, undelivered events, and later events are not queued', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      await enqueueEvent(t.svc.db, event(t.svc.clock.nowMs()));
      await api.delete('/v1/webhook-endpoint');
      const [row] = await rows();
      expect(row.status).to.equal('cancelled');
      expect(row.next_attempt_at).to.equal(null);
      expect(await enqueueEvent(t.svc.db, event(t.svc.clock.nowMs()))).to.equal(null);
    });

    it('a DELETE racing an open enqueue transaction still cancels the event (no webhook after DELETE)', async () => {
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let queued!: () => void;
      const enqueued = new Promise<void>((r) => (queued = r));
      const tx = withTx(t.svc.db, async (trx) => {
        await enqueueEvent(trx, event(t.svc.clock.nowMs()));
        queued();
        await held;
      });
      await enqueued;
      const del = api.delete('/v1/webhook-endpoint');
      await new Promise((r) => setTimeout(r, 100));
      release();
      await tx;
      expect((await del).status).to.equal(204);
      const all = await rows();
      expect(all).to.have.length(1);
      expect(all[0].status).to.equal('cancelled');
    });

    it('an enqueue in a transaction that began before a DELETE committed queues nothing (MySQL snapshot)', async function () {
      // SQLite has one connection: the DELETE could not run while this transaction is open.
      if (!usingMysql()) this.skip();
      await api.put('/v1/webhook-endpoint', { url: HOOK });
      const id = await withTx(t.svc.db, async (trx) => {
        // A read first, so REPEATABLE READ fixes this transaction's snapshot with the endpoint in it.
        await trx('webhook_endpoints').where({ developer_id: DEFAULT_DEVELOPER_ID }).first();
        expect((await api.delete('/v1/webhook-endpoint')).status).to.equal(204);
        return enqueueEvent(trx, event(t.svc.clock.nowMs()));
      });
      expect(id).to.equal(null);
      expect(await rows()).to.have.length(0);
    });
  });
});

describe('webhook endpoint settings with GATEWAY_ALLOW_PRIVATE_UPSTREAMS=1', () => {
  let t: TestService;
  before(async () => {
    t = await startTestService({ GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1' });
  });
  after(async () => {
    await t?.close();
  });

  it('accepts loopback and private URLs (local receivers, tests)', async () => {
    for (const url of ['http://127.0.0.1:9999/hook', 'http://localhost/hook', 'http://10.0.0.1/hook', 'http://[::1]:8000/']) {
      const r = await t.api.put('/v1/webhook-endpoint', { url });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.url).to.equal(url);
    }
  });

  it('still refuses non-http(s) URLs', async () => {
    expectError(await t.api.put('/v1/webhook-endpoint', { url: 'file:///etc/passwd' }), 400, 'invalid_request');
  });
});
