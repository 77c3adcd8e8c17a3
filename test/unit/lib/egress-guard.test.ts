import { expect } from 'chai';
import type { LookupAddress } from 'node:dns';
import { canonicalHost, createEgressGuard, parseAuthority } from '../../../lib/egress-guard.js';

const dns = (answers: Record<string, string[]>) => async (host: string): Promise<LookupAddress[]> => {
  const a = answers[host];
  if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

describe('egress guard (lib/egress-guard)', () => {
  describe('canonicalHost: what every URL-parsing client will connect to', () => {
    const table: Array<[string, string | null]> = [
      ['127.0.0.1', '127.0.0.1'], ['127.1', '127.0.0.1'], ['127.0x.0x.1', '127.0.0.1'], ['0x7f.1', '127.0.0.1'], ['2130706433', '127.0.0.1'],
      ['017700000001', '127.0.0.1'], ['0177.0.0.1', '127.0.0.1'], ['0', '0.0.0.0'], ['127.0.0.1.', '127.0.0.1'], ['%31%32%37.0.0.1', '127.0.0.1'],
      ['[::1]', '::1'], ['::1', '::1'], ['[::ffff:127.0.0.1]', '::ffff:7f00:1'], ['[0:0:0:0:0:ffff:7f00:1]', '::ffff:7f00:1'],
      ['API.Example.COM.', 'api.example.com'], ['bücher.de', 'xn--bcher-kva.de'], ['0xa9fea9fe', '169.254.169.254'],
      ['', null], ['a b', null], ['host:80', null], ['user@host', null], ['a/b', null], ['[::1%25lo]', null], ['a%00b', null], ['..', null], ['1.2.3.4.5', null],
    ];
    for (const [input, want] of table) it(`${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => expect(canonicalHost(input)).to.equal(want));

    it('parseAuthority: host:port canonical, default port, refusals', () => {
      expect(parseAuthority('0x7f.1:8080', 443)).to.deep.equal({ host: '127.0.0.1', port: 8080 });
      expect(parseAuthority('[::1]:443', 443)).to.deep.equal({ host: '::1', port: 443 });
      expect(parseAuthority('Example.com', 80)).to.deep.equal({ host: 'example.com', port: 80 });
      for (const bad of ['h:0', 'h:65536', 'h:', '[::1]x:1', 'a:b:c', undefined]) expect(parseAuthority(bad, 80), String(bad)).to.equal(null);
    });
  });

  describe('check: fail closed', () => {
    const guard = createEgressGuard({ allowPrivate: false, resolve: dns({ 'public.test': ['93.184.216.34'], 'inside.test': ['10.0.0.5'], 'mixed.test': ['10.0.0.5', '93.184.216.34'], 'v6.test': ['fd00::1'] }) });
    const cases: Array<[string, string | true]> = [
      ['public.test', true], ['mixed.test', true], ['inside.test', 'egress_denied'], ['v6.test', 'egress_denied'], ['nowhere.test', 'upstream_unreachable'],
      ['127.1', 'egress_denied'], ['2130706433', 'egress_denied'], ['[::ffff:10.0.0.1]', 'egress_denied'], ['localhost', 'egress_denied'], ['x.localhost', 'egress_denied'],
      ['169.254.169.254', 'egress_denied'], ['93.184.216.34', true], ['a b', 'egress_denied'],
      // Cloud instance endpoints outside the private blocks (a third review): Azure's WireServer, Oracle's metadata.
      ['168.63.129.16', 'egress_denied'], ['192.0.0.192', 'egress_denied'], ['255.255.255.255', 'egress_denied'], ['224.0.0.1', 'egress_denied'],
      ['198.18.0.1', 'egress_denied'], ['198.19.255.254', 'egress_denied'], ['240.0.0.1', 'egress_denied'], ['239.255.255.250', 'egress_denied'],
      ['168.63.129.17', true], ['198.20.0.1', true],
    ];
    for (const [host, want] of cases) {
      it(`${host} → ${want === true ? 'ok' : want}`, async () => {
        const r = await guard.check(host, 443);
        if (want === true) expect(r).to.deep.equal({ ok: true });
        else expect(r).to.include({ ok: false, code: want });
      });
    }
    it('the management ports are refused on every local address, private upstreams allowed or not', async () => {
      const g = createEgressGuard({ allowPrivate: true, resolve: dns({ 'me.test': ['127.0.0.1'] }) });
      g.forbidPort(8080);
      for (const host of ['127.0.0.1', '127.9.9.9', '0', '[::1]', '[::ffff:127.0.0.1]', 'me.test']) {
        expect(await g.check(host, 8080), host).to.include({ ok: false, code: 'egress_denied' });
      }
      expect(await g.check('127.0.0.1', 8081)).to.deep.equal({ ok: true });
      expect(g.isManagement('::ffff:127.0.0.1', 8080)).to.equal(true);
    });
  });

});
