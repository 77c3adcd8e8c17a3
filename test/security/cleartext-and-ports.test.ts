import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { plainProxyRequest, proxyAgent, rawCleartextTunnelExchange, rawTunnelExchange, statusOf } from '../helpers/proxy-client.js';

/**
 * Hole 7 (low): cleartext and ports. A cleartext request in a tunnel to port 443 went out
 * in the clear, a credential could be swapped into plain http:// (and cross the network
 * readable), and a secret for `api.example.com` went to any port of that host. Now: a
 * non-TLS first byte in a tunnel to 443 is refused; no credential is ever swapped into a
 * cleartext request; a secret reaches a port other than 443 only when an allowed_hosts
 * entry names that port (`api.example.com:8443`).
 */
const KEY = 'sk_live_51CleartextRealKey';
const ALT = 'alt-port-real-key-0123456789';

describe('security: credentials only over TLS, to the ports their secret names (hole 7)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.example.com', 'alt.example.com'],
      secrets: {
        KEY: { value: KEY, allowed_hosts: ['api.example.com'] },
        ALT: { value: ALT, allowed_hosts: ['alt.example.com:8443'] },
      },
    });
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());

  it('attack: cleartext HTTP inside a CONNECT to port 443 is refused (403 cleartext_not_allowed), audited, nothing sent', async () => {
    const { connect, answer } = await rawCleartextTunnelExchange(w.gw, 'api.example.com:443', `GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer ${w.ph.KEY}\r\n\r\n`);
    expect(connect).to.match(/^HTTP\/1\.1 200 /);
    expect(statusOf(answer)).to.include({ status: 403, error: 'cleartext_not_allowed' });
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ method: 'CONNECT', host: 'api.example.com', decision: 'deny', reason: 'cleartext_not_allowed', status: 403 });
  });

  it('attack: the placeholder in a plain http:// request is refused (cleartext_not_allowed), nothing sent', async () => {
    const r = await plainProxyRequest(w.gw, 'http://api.example.com/v1/x', { headers: { authorization: `Bearer ${w.ph.KEY}` } });
    expect([r.status, r.headers['x-gateway-error']]).to.deep.equal([403, 'cleartext_not_allowed']);
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:KEY', decision: 'deny', reason: 'cleartext_not_allowed' });
  });

  it('attack: the placeholder in a cleartext tunnel to port 80 is refused too', async () => {
    const { answer } = await rawCleartextTunnelExchange(w.gw, 'api.example.com:80', `GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer ${w.ph.KEY}\r\nConnection: close\r\n\r\n`);
    expect(statusOf(answer)).to.include({ status: 403, error: 'cleartext_not_allowed' });
    expect(w.up.seen).to.have.length(0);
  });

  it('attack: a secret for api.example.com sent over TLS to port 8443 (not named): 403 secret_host_not_allowed', async () => {
    const raw = await rawTunnelExchange(w.gw, 'api.example.com', `GET /v1/x HTTP/1.1\r\nHost: api.example.com:8443\r\nAuthorization: Bearer ${w.ph.KEY}\r\nConnection: close\r\n\r\n`, 8443);
    expect(statusOf(raw)).to.include({ status: 403, error: 'secret_host_not_allowed' });
    expect(w.up.seen).to.have.length(0);
  });

  it('a secret whose allowed_hosts names :8443 is swapped there, and refused on 443', async () => {
    const ok = await rawTunnelExchange(w.gw, 'alt.example.com', `GET /v1/x HTTP/1.1\r\nHost: alt.example.com:8443\r\nAuthorization: Bearer ${w.ph.ALT}\r\nConnection: close\r\n\r\n`, 8443);
    expect(statusOf(ok).status, ok).to.equal(200);
    expect(w.up.seen.map((s) => [s.headers.host, s.headers.authorization])).to.deep.equal([['alt.example.com:8443', `Bearer ${ALT}`]]);
    const r = await request('https://alt.example.com/v1/x', { dispatcher: proxyAgent(w.gw), headers: { authorization: `Bearer ${w.ph.ALT}` } });
    expect([r.statusCode, r.headers['x-gateway-error']]).to.deep.equal([403, 'secret_host_not_allowed']);
    await r.body.text();
  });

  it('cleartext without a credential still works on ports other than 443 (plain http:// is not banned, only secrets in it)', async () => {
    const r = await plainProxyRequest(w.gw, 'http://api.example.com/v1/public');
    // The fake upstream speaks TLS only, so the cleartext request reaches it and fails there: the gateway let it go.
    expect(r.headers['x-gateway-error']).to.equal('upstream_unreachable');
  });

  it('allowed_hosts validates ports (1-65535); egress patterns still take none', async () => {
    for (const bad of ['a.com:0', 'a.com:65536', 'a.com:', 'a.com:x']) {
      const r = await w.t.api.put(`/v1/environments/${w.envId}/secrets/P`, { value: 'v', allowed_hosts: [bad] });
      expect(r.status, bad).to.equal(400);
    }
    const ok = await w.t.api.put(`/v1/environments/${w.envId}/secrets/P`, { value: 'v', allowed_hosts: ['API.Example.com:8443'] });
    expect(ok.status).to.equal(201);
    expect(ok.body.allowed_hosts).to.deep.equal(['api.example.com:8443']);
    expect((await w.t.api.put(`/v1/environments/${w.envId}/egress`, { allow: ['a.com:443'] })).status).to.equal(400);
    await w.t.api.delete(`/v1/environments/${w.envId}/secrets/P`);
  });
});
