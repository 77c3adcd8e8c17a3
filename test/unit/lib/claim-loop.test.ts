import { expect } from 'chai';
import { claimLoop } from '../../../lib/claim-loop.js';

/** The delivery workers' claim loop (webhooks, Slack cards): one pass at a time, rounds asked for while one runs, a near wake-up. */
describe('claim loop', () => {
  const clock = { nowMs: () => 1_000_000 };
  const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

  function world(opts: { fail?: number; retryAfterErrorMs?: number } = {}) {
    let passes = 0;
    let fail = opts.fail ?? 0;
    let release: (() => void) | null = null;
    let gate = false;
    const errors: unknown[] = [];
    const loop = claimLoop({
      pass: async () => {
        passes++;
        if (gate) await new Promise<void>((r) => (release = r));
        if (fail > 0) {
          fail--;
          throw new Error('store down');
        }
      },
      onError: (err) => errors.push(err),
      retryAfterErrorMs: opts.retryAfterErrorMs,
      clock,
      maxLocalWakeMs: 60_000,
    });
    return {
      loop,
      errors,
      passes: () => passes,
      hold: () => (gate = true),
      letGo: () => {
        gate = false;
        release?.();
      },
    };
  }

  it('does nothing before start() and after stop()', async () => {
    const w = world();
    await w.loop.pump();
    expect(w.passes()).to.equal(0);
    w.loop.start();
    await w.loop.pump();
    expect(w.passes()).to.equal(1);
    await w.loop.stop();
    await w.loop.pump();
    expect(w.passes()).to.equal(1);
  });

  it('pumps while a pass runs ask it for one more round (not one each, never two at once)', async () => {
    const w = world();
    w.loop.start();
    w.hold();
    const first = w.loop.pump();
    expect(w.loop.running).to.equal(true);
    const during = [w.loop.pump(), w.loop.pump(), w.loop.pump()];
    expect(w.passes()).to.equal(1);
    w.letGo();
    await Promise.all([first, ...during]);
    expect(w.passes()).to.equal(2);
    expect(w.loop.running).to.equal(false);
  });

  it('a pass that throws is reported; with retryAfterErrorMs it runs again after that long, without: not', async () => {
    const again = world({ fail: 1, retryAfterErrorMs: 20 });
    again.loop.start();
    await again.loop.pump();
    expect(again.errors).to.have.length(1);
    expect(again.passes()).to.equal(1);
    await tick(60);
    expect(again.passes()).to.equal(2);
    await again.loop.stop();

    const sweepOnly = world({ fail: 1 });
    sweepOnly.loop.start();
    await sweepOnly.loop.pump();
    await tick(60);
    expect(sweepOnly.passes()).to.equal(1);
    expect(sweepOnly.errors).to.have.length(1);
  });

  it('stop() cancels the retry after an error and waits for the running pass', async () => {
    const w = world({ fail: 1, retryAfterErrorMs: 20 });
    w.loop.start();
    await w.loop.pump();
    await w.loop.stop();
    await tick(60);
    expect(w.passes()).to.equal(1);
    const x = world();
    x.loop.start();
    x.hold();
    void x.loop.pump();
    let stopped = false;
    const s = x.loop.stop().then(() => (stopped = true));
    await tick(10);
    expect(stopped, 'waits for the pass').to.equal(false);
    x.letGo();
    await s;
    expect(stopped).to.equal(true);
  });

  it('wakeAt: a near time pumps then; a later one than the wake set, or one past maxLocalWakeMs, is left to the sweep', async () => {
    const w = world();
    w.loop.start();
    w.loop.wakeAt(clock.nowMs() + 60_001); // past maxLocalWakeMs: no timer
    w.loop.wakeAt(clock.nowMs() + 10);
    w.loop.wakeAt(clock.nowMs() + 30); // later than the wake set: nothing more
    await tick(100);
    expect(w.passes()).to.equal(1);
    w.loop.wakeAt(clock.nowMs() + 10); // the wake went off: a new one may be set
    await w.loop.stop(); // and stop cancels it
    await tick(50);
    expect(w.passes()).to.equal(1);
  });
});
