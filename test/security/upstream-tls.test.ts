import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { generateCa } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * The gateway verifies the upstream's certificate before it sends anything, the real key
 * least of all (issue 10, item 9). Every other test trusts the fake upstream's CA, so
 * turning verification off would pass them while real keys went to an impostor: here the
 * upstream presents a self-signed certificate (a CA the gateway does not trust), an expired
 * one, or one for another name (both from the trusted CA). The agent gets 502
 * upstream_unreachable, the refusal is audited, and the impostor receives nothing at all:
 * no request, no byte of application data.
 */
interface Impostor {
  port: number;
  /** Requests that reached it (never any) and decrypted bytes it read (never any). */
  requests: number;
  bytes: number;
  close(): Promise<void>;
}

async function startImpostor(certPem: string, keyPem: string): Promise<Impostor> {
  const out: Impostor = { port: 0, requests: 0, bytes: 0, close: async () => {} };
  const server: Server = createHttpsServer({ cert: certPem, key: keyPem }, (_req, res) => {
    out.requests++;
    res.end('{"ok":true}');
  });
  server.on('secureConnection', (s) => s.on('data', (d: Buffer) => (out.bytes += d.length)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  out.port = (server.address() as AddressInfo).port;
  out.close = () => new Promise((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
  return out;
}

describe('upstream certificate verification (issue 10)', function () {
  this.timeout(30_000);
  const REAL = 'sk_live_neverToAnImpostor0123456789';
  let w: AttackWorld;
  let caDir: string;
  const impostors: Record<string, Impostor> = {};

  before(async () => {
    // The CA the gateway trusts for upstreams (GATEWAY_UPSTREAM_CA_FILE): the expired and
    // wrong-name leaves are signed by it, so only the check under test fails.
    const trusted = await generateCa({ commonName: 'Trusted Upstream CA' });
    caDir = mkdtempSync(join(tmpdir(), 'gw-upstream-tls-'));
    writeFileSync(join(caDir, 'ca.pem'), trusted.certPem);
    const stranger = await generateCa({ commonName: 'Impostor CA' });
    const selfSigned = (await createLeafIssuer(stranger)).getLeaf('selfsigned.stripe.test');
    const expired = (await createLeafIssuer(trusted, { now: () => Date.now() - 400 * 86_400_000, validityDays: 30, renewBeforeDays: 1 })).getLeaf('expired.stripe.test');
    const otherName = (await createLeafIssuer(trusted)).getLeaf('not-stripe.example.org');
    impostors['self-signed'] = await startImpostor(selfSigned.certPem, selfSigned.keyPem);
    impostors.expired = await startImpostor(expired.certPem, expired.keyPem);
    impostors['for another name'] = await startImpostor(otherName.certPem, otherName.keyPem);
    const hosts = ['selfsigned.stripe.test', 'expired.stripe.test', 'othername.stripe.test'];
    w = await startAttackWorld({
      hosts,
      secrets: { STRIPE_KEY: { value: REAL, allowed_hosts: hosts } },
      env: {
        GATEWAY_UPSTREAM_CA_FILE: join(caDir, 'ca.pem'),
        GATEWAY_UPSTREAM_OVERRIDES: [
          `selfsigned.stripe.test=127.0.0.1:${impostors['self-signed']!.port}`,
          `expired.stripe.test=127.0.0.1:${impostors.expired!.port}`,
          `othername.stripe.test=127.0.0.1:${impostors['for another name']!.port}`,
        ].join(','),
      },
    });
  });
  after(async () => {
    await w?.close();
    for (const i of Object.values(impostors)) await i.close();
    rmSync(caDir, { recursive: true, force: true });
  });

  const cases: Array<[string, string]> = [
    ['self-signed', 'selfsigned.stripe.test'],
    ['expired', 'expired.stripe.test'],
    ['for another name', 'othername.stripe.test'],
  ];
  for (const [kind, host] of cases) {
    for (const insecureEnv of [false, true]) {
      it(`an upstream certificate ${kind}${insecureEnv ? ', with NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment' : ''}: 502 upstream_unreachable, audited, the impostor receives nothing`, async () => {
        const saved = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
        if (insecureEnv) process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
        try {
          await w.mark();
          const agent = proxyAgent(w.gw);
          const r = await request(`https://${host}/v1/charges`, {
            dispatcher: agent, method: 'POST', body: 'amount=100',
            headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
          });
          expect(r.statusCode).to.equal(502);
          expect(r.headers['x-gateway-error']).to.equal('upstream_unreachable');
          expect(await r.body.text()).to.not.include(REAL);
          const [entry] = await w.audited(1);
          expect(entry).to.include({ status: 502, reason: 'upstream_unreachable', host });
          const imp = impostors[kind]!;
          expect(imp.requests, 'requests that reached the impostor').to.equal(0);
          expect(imp.bytes, 'application bytes the impostor read').to.equal(0);
          await agent.close();
        } finally {
          if (saved === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
          else process.env.NODE_TLS_REJECT_UNAUTHORIZED = saved;
        }
      });
    }
  }
});
