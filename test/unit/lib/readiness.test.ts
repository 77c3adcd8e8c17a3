import { expect } from 'chai';
import { createReadiness, type CheckState } from '../../../lib/readiness.js';

describe('readiness (issue 25, item 1)', () => {
  it('is ready when every check passes, and names each check ok', async () => {
    const r = createReadiness({ store: async () => true, proxy: () => true });
    expect(await r.check()).to.deep.equal({ ready: true, checks: { store: 'ok', proxy: 'ok' } });
  });

  it('a check that resolves false, throws or rejects is failing; the others are still reported', async () => {
    const r = createReadiness({
      store: async () => {
        throw new Error('connect ECONNREFUSED mysql://root:hunter2@db:3306');
      },
      migrations: async () => false,
      proxy: () => {
        throw new Error('boom');
      },
      host: () => true,
    });
    const out = await r.check();
    expect(out).to.deep.equal({ ready: false, checks: { store: 'failing', migrations: 'failing', proxy: 'failing', host: 'ok' } });
    // Names and ok/failing only: nothing of an error reaches the answer.
    expect(JSON.stringify(out)).to.not.include('hunter2');
  });

  it('a check that does not answer within the timeout is failing (a store that hangs turns the node unready)', async () => {
    const r = createReadiness({ store: () => new Promise<boolean>(() => {}), proxy: () => true }, { timeoutMs: 50 });
    const t0 = performance.now();
    expect(await r.check()).to.deep.equal({ ready: false, checks: { store: 'failing', proxy: 'ok' } });
    expect(performance.now() - t0).to.be.below(1000);
  });

  it('probes that overlap share one round; the next probe runs the checks again', async () => {
    let runs = 0;
    let up = true;
    const r = createReadiness({
      store: async () => {
        runs++;
        await new Promise((res) => setTimeout(res, 20));
        return up;
      },
    });
    const [a, b, c] = await Promise.all([r.check(), r.check(), r.check()]);
    expect(runs).to.equal(1);
    expect(a).to.equal(b);
    expect(b).to.equal(c);
    up = false;
    expect((await r.check()).ready).to.equal(false);
    expect(runs).to.equal(2);
  });

  it('tells of a change once: failing, then ok again (nothing for a node that starts ready)', async () => {
    const seen: Array<[string, CheckState]> = [];
    let up = true;
    const r = createReadiness({ store: () => up, proxy: () => true }, { onChange: (name, state) => seen.push([name, state]) });
    await r.check();
    expect(seen).to.deep.equal([]);
    up = false;
    await r.check();
    await r.check();
    up = true;
    await r.check();
    expect(seen).to.deep.equal([['store', 'failing'], ['store', 'ok']]);
  });
});
