import { expect } from 'chai';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAuthorization, rawConnect, rawProxyExchange, rawTunnelExchange, statusOf } from '../helpers/proxy-client.js';

/**
 * The gateway's own fuzz test: what an agent (an attacker) can put in a request line, a
 * CONNECT authority, a path or a header, inside a TLS tunnel and on the plain proxy port.
 * The gateway answers each with a documented refusal (its JSON `{error, message}` and
 * X-Gateway-Error) or forwards it; it never fails with "could not decide" (a 503 meant for
 * a store outage), never forwards something malformed it could not check, and still
 * answers afterwards.
 */
const GATEWAY_5XX = new Set(['upstream_unreachable', 'upstream_timeout', 'gateway_unavailable']);

describe('gateway fuzz: malformed requests through the proxy (issue 10)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.example.com'],
      secrets: { API_KEY: { value: 'sk_live_fuzzfuzzfuzz', allowed_hosts: ['api.example.com'] } },
    });
    w.up.respond = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    };
  });
  after(async () => {
    await w.close();
  });

  const PATHS = [
    '/%', '/%ZZ', '/%FF', '/%00', '/a%2F..%2F..%2Fetc', '/../../etc/passwd', `/${'x'.repeat(5000)}`, '/%E2%82', '/\u00e9t\u00e9',
    '/?q=%', '/?%ZZ=1', '/?a=%FF&b=%00', '//double//slash', '/a b', '/a\tb', '*', 'http://api.example.com/abs', 'api.example.com',
  ];

  function expectNoUndecided(raw: string, what: string): void {
    const s = statusOf(raw);
    if (s.status >= 500) {
      // Only the documented upstream refusals; never "could not decide this request".
      expect(GATEWAY_5XX.has(s.error ?? ''), `${what}: ${raw.slice(0, 300)}`).to.equal(true);
      expect(raw, what).to.not.match(/could not decide/);
    }
  }

  it('every odd path inside a TLS tunnel: forwarded as sent or refused 400, never "could not decide"', async () => {
    for (const p of PATHS) {
      for (const auth of [false, true]) {
        const header = auth ? `Authorization: Bearer ${w.ph.API_KEY}\r\n` : '';
        const raw = await rawTunnelExchange(w.gw, 'api.example.com', `GET ${p} HTTP/1.1\r\nHost: api.example.com\r\n${header}Connection: close\r\n\r\n`).catch((e: Error) => `ERR ${e.message}`);
        if (raw.startsWith('ERR') || raw === '') continue; // closed on a request line Node's parser refuses: fine
        const s = statusOf(raw);
        expect(s.status, `${p} ${raw.slice(0, 200)}`).to.be.greaterThan(0);
        expectNoUndecided(raw, `tunnel ${p} auth=${auth}`);
      }
    }
  });

  it('odd absolute-form targets on the plain proxy port: refused with a JSON error, never "could not decide"', async () => {
    const auth = `Proxy-Authorization: ${proxyAuthorization(w.gw)}\r\n`;
    for (const target of ['http://%/', 'http://api.example.com%ZZ/', 'http://[::1/', `http://${'a'.repeat(300)}.example.com/`, 'http://api.example.com:99999/', 'http://user@api.example.com/', 'http:///x', 'http://%E2%82.com/']) {
      const raw = await rawProxyExchange(w.gw, `GET ${target} HTTP/1.1\r\nHost: api.example.com\r\n${auth}Connection: close\r\n\r\n`).catch((e: Error) => `ERR ${e.message}`);
      if (raw.startsWith('ERR') || raw === '') continue;
      expectNoUndecided(raw, `plain ${target}`);
    }
  });

  it('odd CONNECT authorities: refused, never a tunnel to something unchecked', async () => {
    for (const authority of ['%:443', 'api.example.com:%34%34%33', `${'a'.repeat(5000)}:443`, '\u00e9.example.com:443', '[::1:443', 'api.example.com:0', 'api.example.com:-1', ':443', 'api.example.com:443:443']) {
      const r = await rawConnect(w.gw, authority).catch((e: Error) => ({ head: `ERR ${e.message}`, socket: null }));
      r.socket?.destroy();
      if (r.head.startsWith('ERR')) continue;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(r.head)?.[1] ?? 0);
      expect(status, `CONNECT ${authority.slice(0, 40)}: ${r.head.slice(0, 200)}`).to.be.within(400, 499);
    }
  });

  it('still answers afterwards', async () => {
    const raw = await rawTunnelExchange(w.gw, 'api.example.com', 'GET /after HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n');
    expect(statusOf(raw).status).to.equal(200);
  });
});
