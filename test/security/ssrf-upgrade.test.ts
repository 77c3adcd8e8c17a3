import { expect } from 'chai';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { rawCleartextTunnelExchange, rawTunnelExchange, statusOf, startTripwire, UPGRADE_HEADERS } from '../helpers/proxy-client.js';
import { createWebhookSender } from '../../webhooks/sender.js';

/**
 * Hole 3 (high): with egress `*`, `CONNECT 169.254.169.254:80` then a GET carrying
 * `Upgrade:` was relayed, while the same GET without it was refused: the upgrade path
 * opened its own connection, skipping the private-address and management checks. Now
 * upgrades, like tunnelled and plain requests and webhook delivery, connect only through
 * lib/egress-guard.ts. ssrf-address-forms.test.ts runs every address spelling on every path.
 */
const UPGRADE = UPGRADE_HEADERS;

describe('security: upgrades go through the same egress checks as every request (hole 3)', function () {
  this.timeout(30000);
  let w: AttackWorld;
  let tripwire: Awaited<ReturnType<typeof startTripwire>>;
  let port: number;
  let reached: string[];

  before(async () => {
    tripwire = await startTripwire('127.0.0.1', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nreached');
    ({ port, reached } = tripwire);
    w = await startAttackWorld({ hosts: ['api.example.com'], egress: ['*'], secrets: { KEY: { value: 'real-upgrade-key-123456', allowed_hosts: ['api.example.com'] } } });
  });
  after(async () => {
    await w?.close();
    await tripwire.close();
  });
  beforeEach(async () => {
    reached.length = 0;
    await w.mark();
  });

  it('attack: CONNECT 169.254.169.254:80, then GET with Upgrade (refused like the same GET without it), audited', async () => {
    for (const extra of [UPGRADE, '']) {
      const { answer } = await rawCleartextTunnelExchange(w.gw, '169.254.169.254:80', `GET /latest/meta-data/iam/security-credentials/ HTTP/1.1\r\nHost: 169.254.169.254\r\n${extra}Connection: ${extra ? 'Upgrade' : 'close'}\r\n\r\n`);
      expect(statusOf(answer), answer).to.include({ status: 403, error: 'egress_denied' });
    }
    const entries = await w.audited(2);
    expect(entries.map((e) => [e.host, e.reason, e.status])).to.deep.equal([['169.254.169.254', 'egress_denied', 403], ['169.254.169.254', 'egress_denied', 403]]);
  });

  it('attack: an upgrade to a loopback listener never connects', async () => {
    const { answer } = await rawCleartextTunnelExchange(w.gw, `127.0.0.1:${port}`, `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${UPGRADE}\r\n`);
    expect(statusOf(answer)).to.include({ status: 403, error: 'egress_denied' });
    expect(answer).to.not.include('reached');
    expect(reached).to.deep.equal([]);
  });

  it('attack: a placeholder in an upgrade to its own allowed host is refused (credentials are never swapped into upgrades)', async () => {
    const raw = await rawTunnelExchange(w.gw, 'api.example.com', `GET /socket HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer ${w.ph.KEY}\r\n${UPGRADE}\r\n`);
    expect(statusOf(raw)).to.include({ status: 403, error: 'secret_location_not_allowed' });
    expect(w.up.seen).to.have.length(0);
    const [e] = await w.audited(1);
    expect(e).to.include({ connector: 'secret:KEY', reason: 'secret_location_not_allowed', status: 403 });
  });

  it('attack: webhook delivery to loopback spelled oddly is refused by the same guard, without a connection', async () => {
    const sender = createWebhookSender({ allowPrivateDestinations: false, timeoutMs: 2000 });
    try {
      for (const host of ['2130706433', '127.1', '0x7f.1', '[::ffff:127.0.0.1]', '0', 'localhost.']) {
        const r = await sender.send(`http://${host}:${port}/hook`, { 'content-type': 'application/json' }, '{}');
        expect(r, host).to.deep.include({ ok: false, error: 'private_destination' });
      }
    } finally {
      await sender.close();
    }
    expect(reached).to.deep.equal([]);
  });
});
