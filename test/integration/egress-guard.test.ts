import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { Agent, request } from 'undici';
import { createEgressGuard } from '../../lib/egress-guard.js';

const dns = (answers: Record<string, string[]>) => async (host: string): Promise<LookupAddress[]> => {
  const a = answers[host];
  if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

/** lib/egress-guard.ts's connector against a real listener: what it connects to, and what it refuses. */
describe('egress guard connector (lib/egress-guard)', () => {
  describe('connector: the address connected to is the address checked', () => {
    let server: Server;
    let port: number;
    let accepted = 0;
    const sockets = new Set<import('node:net').Socket>();
    before(async () => {
      server = createServer((s) => {
        accepted++;
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as AddressInfo).port;
    });
    after(() => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    });
    beforeEach(() => (accepted = 0));

    async function get(guardOpts: Parameters<typeof createEgressGuard>[0], url: string, forbid?: number): Promise<number | string> {
      const g = createEgressGuard(guardOpts);
      if (forbid) g.forbidPort(forbid);
      const agent = new Agent({ connect: g.connector() as never });
      try {
        const r = await request(url, { dispatcher: agent });
        await r.body.text();
        return r.statusCode;
      } catch (err) {
        return String((err as { code?: string }).code ?? err);
      } finally {
        await agent.close();
      }
    }

    it('a name resolving to loopback is refused without connecting; allowed when private upstreams are', async () => {
      expect(await get({ allowPrivate: false, resolve: dns({ 'app.test': ['127.0.0.1'] }) }, `http://app.test:${port}/`)).to.equal('EGRESS_PRIVATE_ADDRESS');
      expect(accepted).to.equal(0);
      expect(await get({ allowPrivate: true, resolve: dns({ 'app.test': ['127.0.0.1'] }) }, `http://app.test:${port}/`)).to.equal(204);
      expect(accepted).to.equal(1);
    });

    it('IP literals in any form never skip the check (net.connect would skip a lookup)', async () => {
      for (const h of ['127.0.0.1', '127.1', '2130706433', '0x7f.1']) {
        expect(await get({ allowPrivate: false }, `http://${h}:${port}/`), h).to.equal('EGRESS_PRIVATE_ADDRESS');
      }
      expect(accepted).to.equal(0);
    });

    it('DNS answers mixing public and private addresses: only the public ones are ever dialled, in either order (issue 10)', async () => {
      // 198.51.100.7 is a public-form address nothing answers on here: the dial times out,
      // and the private answer (this very listener) is never tried in its place.
      for (const answers of [['127.0.0.1', '198.51.100.7'], ['198.51.100.7', '127.0.0.1'], ['10.0.0.1', '::1', '198.51.100.7', '169.254.169.254']]) {
        const g = createEgressGuard({ allowPrivate: false, resolve: dns({ 'mixed.test': answers }) });
        const agent = new Agent({ connect: g.connector({ timeout: 300 }) as never });
        let outcome: string;
        try {
          const r = await request(`http://mixed.test:${port}/`, { dispatcher: agent });
          outcome = String(r.statusCode);
          await r.body.text();
        } catch (err) {
          outcome = String((err as { code?: string }).code ?? err);
        } finally {
          await agent.destroy();
        }
        expect(outcome, answers.join(',')).to.not.equal('204');
        expect(accepted, answers.join(',')).to.equal(0);
        // The precheck agrees: the name is usable (it has a public address), the private ones are not used.
        expect(await g.check('mixed.test', port)).to.deep.equal({ ok: true });
      }
      // Only private answers: refused before any dial.
      const g = createEgressGuard({ allowPrivate: false, resolve: dns({ 'inside.test': ['10.1.2.3', 'fd00::1', '127.0.0.1'] }) });
      expect((await g.check('inside.test', port)).ok).to.equal(false);
    });

    it('a failed lookup fails the connection (never treated as allowed)', async () => {
      expect(await get({ allowPrivate: false, resolve: dns({}) }, `http://gone.test:${port}/`)).to.equal('ENOTFOUND');
    });

    it('an override connects to its address (not subject to the private rule) but never to a management port', async () => {
      expect(await get({ allowPrivate: false, overrides: { 'api.test': { host: '127.0.0.1', port } } }, 'http://api.test/')).to.equal(204);
      expect(await get({ allowPrivate: false, overrides: { 'api.test': { host: '127.0.0.1', port } } }, 'http://api.test/', port)).to.equal('EGRESS_PRIVATE_ADDRESS');
      expect(accepted).to.equal(1);
    });
  });
});
