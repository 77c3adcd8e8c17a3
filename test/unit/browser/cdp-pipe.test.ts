import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import { CdpPipe } from '../../../browser/cdp-pipe.js';

/**
 * The pipe from Chromium is the agent's to fill: a page can make Chromium answer one command
 * with hundreds of MiB (`'\x01'.repeat(9e7)` evaluated by value is 552 MB of JSON). Past the
 * inbound limit the pipe keeps nothing, stops reading and counts the browser as gone; it
 * never decodes such a message (past V8's longest string the decode threw in a stream
 * listener: the whole service, every tenant, ended).
 */
describe('CdpPipe: what Chromium sends', () => {
  function pipe(): { p: CdpPipe; from: PassThrough; to: PassThrough } {
    const from = new PassThrough();
    const to = new PassThrough();
    return { p: new CdpPipe(to, from), from, to };
  }

  it('routes a message split over chunks to its command', async () => {
    const { p, from, to } = pipe();
    const answer = p.request('Browser.getVersion');
    const sent = JSON.parse(String(to.read()).replace(/\0$/, ''));
    const text = Buffer.from(`${JSON.stringify({ id: sent.id, result: { product: 'Chrome/156' } })}\0`);
    from.write(text.subarray(0, 10));
    from.write(text.subarray(10));
    expect((await answer).result).to.deep.equal({ product: 'Chrome/156' });
  });

  it('attack: a message past the limit is dropped whole: the pipe closes, stops reading, and answers what waits with "the browser is gone"', async function () {
    this.timeout(20_000);
    const { p, from } = pipe();
    const waiting = p.request('Runtime.evaluate', { expression: 'x' });
    const mib = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < 257 && !from.destroyed; i++) from.write(mib);
    expect((await waiting).error?.message).to.equal('the browser is gone');
    expect(p.closed).to.equal(true);
    expect(from.destroyed, 'the pipe from the browser is no longer read').to.equal(true);
  });

  it('a message that is not JSON (or not UTF-8) is skipped; the next one is read', async () => {
    const { p, from, to } = pipe();
    const answer = p.request('Browser.getVersion');
    const sent = JSON.parse(String(to.read()).replace(/\0$/, ''));
    from.write(Buffer.concat([Buffer.from('{"id":'), Buffer.from([0xff, 0xfe]), Buffer.from('\0')]));
    from.write(`${JSON.stringify({ id: sent.id, result: {} })}\0`);
    expect((await answer).result).to.deep.equal({});
    expect(p.closed).to.equal(false);
  });
});
