import { expect } from 'chai';
import { once } from 'node:events';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { openTunnel, statusOf } from '../helpers/proxy-client.js';

/**
 * A placeholder cut across two body chunks (two HTTP chunks, written one after the other
 * has left the client) is seen whole: swapped when it sits in its slot, refused when it
 * does not (issue 10, item 9). The gateway scans the body as a whole, never chunk by chunk.
 */
describe('a placeholder split across body chunks (issue 10)', function () {
  this.timeout(20_000);
  const REAL = 'xoxb-real-split-value-0123456789';
  let w: AttackWorld;
  before(async () => {
    w = await startAttackWorld({
      hosts: ['slack.com'],
      secrets: { SLACK_TOKEN: { value: REAL, allowed_hosts: ['slack.com'], inject: ['form:token'] } },
    });
  });
  after(async () => {
    await w.close();
  });

  /** Sends `body` chunked, cut at `at`, the second chunk written once the first has left. */
  async function sendSplit(body: string, at: number, contentType: string): Promise<string> {
    const t = await openTunnel(w.gw, 'slack.com');
    const head = `POST /api/conversations.list HTTP/1.1\r\nHost: slack.com\r\nContent-Type: ${contentType}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
    const one = body.slice(0, at);
    const two = body.slice(at);
    await new Promise<void>((r) => t.tls.write(`${head}${one.length.toString(16)}\r\n${one}\r\n`, () => r()));
    await new Promise((r) => setImmediate(r));
    t.tls.write(`${two.length.toString(16)}\r\n${two}\r\n0\r\n\r\n`);
    await Promise.race([once(t.tls, 'end'), once(t.tls, 'close')]);
    return t.received();
  }

  it('in its slot (the form field token): swapped whole', async () => {
    await w.mark();
    const body = `channel=C1&token=${w.ph.SLACK_TOKEN}&text=hi`;
    const raw = await sendSplit(body, body.indexOf(w.ph.SLACK_TOKEN!) + 10, 'application/x-www-form-urlencoded');
    expect(statusOf(raw).status, raw.slice(0, 300)).to.equal(200);
    expect(w.up.seen).to.have.length(1);
    expect(w.up.seen[0]!.body.toString()).to.equal(`channel=C1&token=${REAL}&text=hi`);
    expect(raw).to.not.include(REAL);
  });

  it('outside its slot (another form field): refused, nothing forwarded', async () => {
    await w.mark();
    const body = `channel=C1&text=${w.ph.SLACK_TOKEN}`;
    const raw = await sendSplit(body, body.indexOf(w.ph.SLACK_TOKEN!) + 20, 'application/x-www-form-urlencoded');
    expect(statusOf(raw).error, raw.slice(0, 300)).to.equal('secret_location_not_allowed');
    expect(w.up.seen).to.have.length(0);
  });
});
