import { expect } from 'chai';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAuthorization, rawCleartextTunnelExchange, rawProxyExchange, statusOf, startTripwire, UPGRADE_HEADERS } from '../helpers/proxy-client.js';

/**
 * Hole 4 (high): non-canonical IPv4 forms (`127.1`, `0x7f.1`, `2130706433`, ...) got past
 * the private-address check (getaddrinfo failed on them, the failure counted as allowed,
 * then the URL parser turned the name into 127.0.0.1), and management addresses were
 * compared as strings. Every form below is tried on every path that opens an upstream
 * connection (CONNECT, plain HTTP, and the upgrades of hole 3); a real listener on the
 * loopback port (IPv4 and IPv6) records any connection that gets through.
 */
const LOOPBACK_FORMS = [
  '127.0.0.1', '127.1', '127.0x.0x.1', '0x7f.1', '0x7f000001', '2130706433', '017700000001', '0177.0.0.1', '127.000.000.001',
  '127.0.0.1.', '%31%32%37.0.0.1', '0', '0.0.0.0', '[::1]', '[::]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:127.0.0.1]',
  'localhost', 'LOCALHOST.', 'app.localhost',
];
/** The cloud metadata address in its spellings (nothing listens there here: the refusal is what is checked). */
const METADATA_FORMS = ['169.254.169.254', '0xa9fea9fe', '2852039166', '0251.0376.0251.0376', '[::ffff:169.254.169.254]', '[fd00:ec2::254]', '10.0.0.1', '192.168.1.1', '[fe80::1]'];

const UPGRADE = UPGRADE_HEADERS;

describe('security: no upstream connection reaches loopback, private or metadata addresses, in any spelling (hole 4)', function () {
  this.timeout(60000);
  let w: AttackWorld;
  let tripwire: Awaited<ReturnType<typeof startTripwire>>;
  let port: number;
  let reached: string[];

  before(async () => {
    tripwire = await startTripwire('::', 'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nreached');
    ({ port, reached } = tripwire);
    w = await startAttackWorld({ hosts: ['api.example.com'], egress: ['*'], secrets: {} });
  });
  after(async () => {
    await w?.close();
    await tripwire.close();
  });
  beforeEach(() => {
    reached.length = 0;
  });

  function refused(raw: string, what: string): void {
    const r = statusOf(raw);
    expect([r.status, r.error], `${what}: ${raw.slice(0, 300)}`).to.deep.equal([403, 'egress_denied']);
    expect(raw, what).to.not.include('reached');
  }

  for (const form of LOOPBACK_FORMS) {
    it(`attack: ${form}:<port> over CONNECT, plain HTTP, a tunnelled upgrade and a proxy-port upgrade`, async () => {
      const authority = `${form}:${port}`;
      const get = `GET / HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`;
      refused((await rawCleartextTunnelExchange(w.gw, authority, get)).answer, 'CONNECT');
      refused(await rawProxyExchange(w.gw, `GET http://${authority}/ HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\nConnection: close\r\n\r\n`), 'plain HTTP');
      refused((await rawCleartextTunnelExchange(w.gw, authority, `GET /ws HTTP/1.1\r\nHost: ${authority}\r\n${UPGRADE}\r\n`)).answer, 'upgrade in a tunnel');
      refused(await rawProxyExchange(w.gw, `GET http://${authority}/ws HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\n${UPGRADE}\r\n`), 'upgrade on the proxy port');
      expect(reached, 'connections that reached the loopback listener').to.deep.equal([]);
    });
  }

  for (const form of METADATA_FORMS) {
    it(`attack: ${form}:80 (metadata and private ranges) over CONNECT, plain HTTP and both upgrades`, async () => {
      const authority = `${form}:80`;
      refused((await rawCleartextTunnelExchange(w.gw, authority, `GET /latest/meta-data/ HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`)).answer, 'CONNECT');
      refused(await rawProxyExchange(w.gw, `GET http://${authority}/latest/meta-data/ HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\nConnection: close\r\n\r\n`), 'plain HTTP');
      refused((await rawCleartextTunnelExchange(w.gw, authority, `GET /ws HTTP/1.1\r\nHost: ${authority}\r\n${UPGRADE}\r\n`)).answer, 'upgrade in a tunnel');
      refused(await rawProxyExchange(w.gw, `GET http://${authority}/ws HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\n${UPGRADE}\r\n`), 'upgrade on the proxy port');
    });
  }

  it('every refusal is audited with the canonical address and reason egress_denied', async () => {
    await w.mark();
    await rawCleartextTunnelExchange(w.gw, `2130706433:${port}`, `GET / HTTP/1.1\r\nHost: 2130706433:${port}\r\n${UPGRADE}\r\n`);
    const [e] = await w.audited(1);
    expect(e).to.include({ host: '127.0.0.1', decision: 'deny', reason: 'egress_denied', status: 403 });
  });

  it('a CONNECT target that is not a host at all is refused before any tunnel opens', async () => {
    for (const bad of ['[::1%25lo]:80', 'a%00b:80', 'a%2Fb:80', 'host:99999', 'user@127.0.0.1:80']) {
      const { connect } = await rawCleartextTunnelExchange(w.gw, bad, 'GET / HTTP/1.1\r\n\r\n');
      expect(statusOf(connect), bad).to.include({ status: 403, error: 'egress_denied' });
    }
    expect(reached).to.deep.equal([]);
  });
});

describe('security: the management API is refused by address, even with private upstreams allowed (hole 4)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({ hosts: ['api.example.com'], egress: ['*'], secrets: {}, env: { GATEWAY_ALLOW_PRIVATE_UPSTREAMS: 'true' } });
  });
  after(async () => w?.close());

  it('attack: the API and proxy ports under every loopback spelling', async () => {
    const apiPort = Number(new URL(w.t.url).port);
    const proxyPort = Number(new URL(w.gw.proxy_url).port);
    for (const p of [apiPort, proxyPort]) {
      for (const form of ['127.0.0.1', '127.1', '2130706433', '0x7f.1', '0', '[::ffff:127.0.0.1]', 'localhost', 'localhost.', '127.0.0.2']) {
        const authority = `${form}:${p}`;
        const raw = (await rawCleartextTunnelExchange(w.gw, authority, `GET /v1/environments HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`)).answer;
        expect(statusOf(raw), `${authority}: ${raw.slice(0, 200)}`).to.include({ status: 403, error: 'egress_denied' });
        const plain = await rawProxyExchange(w.gw, `GET http://${authority}/v1/environments HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\nConnection: close\r\n\r\n`);
        expect(statusOf(plain), `plain ${authority}`).to.include({ status: 403, error: 'egress_denied' });
      }
    }
  });
});
