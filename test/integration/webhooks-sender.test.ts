/**
 * The HTTP side of delivery (webhooks/sender): outcomes as values, redirects not followed,
 * the deadline, and the private-destination guard after DNS (an injected resolver). Local
 * sockets only.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { classifyError, createWebhookSender, PrivateDestinationError, type WebhookSender } from '../../webhooks/sender.js';
import { startFakeUpstream } from '../helpers/upstream.js';

describe('webhook sender (webhooks/sender)', function () {
  this.timeout(10_000);
  let server: Server;
  let port: number;
  const sockets = new Set<Socket>();
  const seen: Array<{ path: string; headers: Record<string, unknown>; body: string }> = [];
  const senders: WebhookSender[] = [];

  function sender(opts: Partial<Parameters<typeof createWebhookSender>[0]> = {}): WebhookSender {
    const s = createWebhookSender({ allowPrivateDestinations: true, timeoutMs: 1_000, ...opts });
    senders.push(s);
    return s;
  }

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ path: req.url!, headers: req.headers, body });
        if (req.url === '/ok') return res.writeHead(204).end();
        if (req.url === '/created') return res.writeHead(201).end('x'.repeat(200_000));
        if (req.url === '/redirect') return res.writeHead(302, { location: '/ok' }).end();
        if (req.url === '/error') return res.writeHead(500).end('no');
        // '/hang': never answers
      });
    });
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  beforeEach(() => {
    seen.length = 0;
  });
  after(async () => {
    await Promise.all(senders.map((s) => s.close()));
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const url = (path: string, host = '127.0.0.1') => `http://${host}:${port}${path}`;
  const headers = { 'content-type': 'application/json', 'service-event-id': 'evt_000000000000000000000001' };

  it('a 2xx is ok; the exact body and headers are sent; a large response body does not matter', async () => {
    const s = sender();
    expect(await s.send(url('/ok'), headers, '{"a":1}')).to.deep.include({ ok: true, statusCode: 204, error: null });
    expect(seen[0]).to.deep.include({ path: '/ok', body: '{"a":1}' });
    expect(seen[0]!.headers['service-event-id']).to.equal('evt_000000000000000000000001');
    expect(await s.send(url('/created'), headers, '{}')).to.deep.include({ ok: true, statusCode: 201 });
  });

  it('a redirect is not followed: one request, error redirect', async () => {
    const r = await sender().send(url('/redirect'), headers, '{}');
    expect(r).to.deep.include({ ok: false, statusCode: 302, error: 'redirect' });
    expect(seen.map((x) => x.path)).to.deep.equal(['/redirect']);
  });

  it('a 500 is http_status', async () => {
    expect(await sender().send(url('/error'), headers, '{}')).to.deep.include({ ok: false, statusCode: 500, error: 'http_status' });
  });

  it('no answer within the deadline is timeout, ended at the deadline', async () => {
    const r = await sender({ timeoutMs: 300 }).send(url('/hang'), headers, '{}');
    expect(r).to.deep.include({ ok: false, statusCode: null, error: 'timeout' });
    expect(r.durationMs).to.be.within(250, 1_500);
  });

  it('an abort signal (shutdown) ends the attempt at once', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const r = await sender({ timeoutMs: 5_000 }).send(url('/hang'), headers, '{}', ac.signal);
    expect(r).to.deep.include({ ok: false, error: 'shutdown' });
    expect(r.durationMs).to.be.below(1_000);
  });

  it('a closed port is connection_refused; a bad URL is invalid_url', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const closed = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    expect(await sender().send(`http://127.0.0.1:${closed}/`, headers, '{}')).to.deep.include({ ok: false, error: 'connection_refused' });
    expect(await sender().send('ftp://example.com/', headers, '{}')).to.deep.include({ ok: false, error: 'invalid_url' });
  });

  describe('private destinations (GATEWAY_ALLOW_PRIVATE_UPSTREAMS=false)', () => {
    const fakeDns = (answers: Record<string, string[]>) => async (host: string): Promise<LookupAddress[]> => {
      const a = answers[host];
      if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };

    it('a public name that resolves to loopback is refused after DNS, before any connection', async () => {
      const s = sender({ allowPrivateDestinations: false, resolve: fakeDns({ 'hooks.example.test': ['127.0.0.1'] }) });
      const r = await s.send(url('/ok', 'hooks.example.test'), headers, '{}');
      expect(r).to.deep.include({ ok: false, statusCode: null, error: 'private_destination' });
      expect(seen).to.have.length(0);
    });

    it('answers that are all private are refused (IPv4 and IPv6)', async () => {
      const s = sender({ allowPrivateDestinations: false, resolve: fakeDns({ 'mixed.example.test': ['10.0.0.1', '192.168.1.1'], 'v6.example.test': ['::1', 'fe80::1'] }) });
      expect(await s.send(url('/ok', 'mixed.example.test'), headers, '{}')).to.deep.include({ error: 'private_destination' });
      expect(await s.send(url('/ok', 'v6.example.test'), headers, '{}')).to.deep.include({ error: 'private_destination' });
      expect(seen).to.have.length(0);
    });

    it('literals are refused without a lookup (127.0.0.1, [::1], 169.254.169.254, localhost, ::ffff:10.0.0.1)', async () => {
      let lookups = 0;
      const s = sender({ allowPrivateDestinations: false, resolve: async () => { lookups++; return []; } });
      for (const host of ['127.0.0.1', '[::1]', '169.254.169.254', 'localhost', '[::ffff:10.0.0.1]', '2130706433']) {
        expect(await s.send(url('/ok', host), headers, '{}'), host).to.deep.include({ error: 'private_destination' });
      }
      expect(lookups).to.equal(0);
      expect(seen).to.have.length(0);
    });

    it('the connection goes to the address that was checked (allowed when private destinations are allowed)', async () => {
      const s = sender({ allowPrivateDestinations: true, resolve: fakeDns({ 'hooks.example.test': ['127.0.0.1'] }) });
      expect(await s.send(url('/ok', 'hooks.example.test'), headers, '{}')).to.deep.include({ ok: true, statusCode: 204 });
      expect(seen).to.have.length(1);
    });

    it('an unknown name is dns_error', async () => {
      const s = sender({ allowPrivateDestinations: false, resolve: fakeDns({}) });
      expect(await s.send(url('/ok', 'nowhere.example.test'), headers, '{}')).to.deep.include({ error: 'dns_error' });
    });

    it('lookups of one name are shared (a burst makes one lookup)', async () => {
      let lookups = 0;
      const s = sender({
        allowPrivateDestinations: false,
        resolve: async () => {
          lookups++;
          await new Promise((r) => setTimeout(r, 20));
          return [{ address: '10.1.1.1', family: 4 }];
        },
      });
      const results = await Promise.all(Array.from({ length: 8 }, () => s.send(url('/ok', 'burst.example.test'), headers, '{}')));
      expect(results.every((r) => r.error === 'private_destination')).to.equal(true);
      expect(lookups).to.equal(1);
    });
  });

  describe('TLS: GATEWAY_UPSTREAM_CA_FILE is trusted as the proxy trusts it', () => {
    const resolve = async (): Promise<LookupAddress[]> => [{ address: '127.0.0.1', family: 4 }];

    it('an endpoint with a certificate from the extra CA is delivered; without the CA the attempt is tls_error', async () => {
      const up = await startFakeUpstream({ tls: true });
      try {
        up.respond = (_req, res) => res.writeHead(204).end();
        const target = `https://hooks.example.test:${up.port}/hooks`;
        const untrusting = await sender({ resolve }).send(target, headers, '{"a":1}');
        expect(untrusting).to.deep.include({ ok: false, statusCode: null, error: 'tls_error' });
        expect(up.seen).to.have.length(0);

        const trusting = await sender({ resolve, extraCa: up.ca.certPem }).send(target, headers, '{"a":1}');
        expect(trusting).to.deep.include({ ok: true, statusCode: 204, error: null });
        expect(up.seen.map((r) => [r.url, r.body.toString()])).to.deep.equal([['/hooks', '{"a":1}']]);
      } finally {
        await up.close();
      }
    });

    it('the extra CA does not relax verification: a certificate for another name still fails', async () => {
      // The CA signs for any name the client asks for, so a name mismatch is forced by
      // serving a fixed certificate (the fallback, for `localhost`) to a client with no SNI.
      const up = await startFakeUpstream({ tls: true, defaultHostname: 'localhost' });
      try {
        const r = await sender({ extraCa: up.ca.certPem }).send(`https://127.0.0.1:${up.port}/hooks`, headers, '{}');
        expect(r).to.deep.include({ ok: false, error: 'tls_error' });
        expect(up.seen).to.have.length(0);
      } finally {
        await up.close();
      }
    });
  });

  it('classifies transport errors with fixed words', () => {
    const e = (code: string) => Object.assign(new Error(code), { code });
    expect(classifyError(new PrivateDestinationError('h', 'loopback'))).to.equal('private_destination');
    expect(classifyError(e('ENOTFOUND'))).to.equal('dns_error');
    expect(classifyError(e('ECONNREFUSED'))).to.equal('connection_refused');
    expect(classifyError(e('ECONNRESET'))).to.equal('connection_reset');
    expect(classifyError(e('UND_ERR_SOCKET'))).to.equal('connection_reset');
    expect(classifyError(e('UND_ERR_CONNECT_TIMEOUT'))).to.equal('timeout');
    expect(classifyError(e('DEPTH_ZERO_SELF_SIGNED_CERT'))).to.equal('tls_error');
    expect(classifyError(e('ERR_TLS_CERT_ALTNAME_INVALID'))).to.equal('tls_error');
    expect(classifyError(Object.assign(new Error('x'), { cause: { code: 'ECONNREFUSED' } }))).to.equal('connection_refused');
    expect(classifyError(new Error('something else'))).to.equal('connection_error');
  });
});
