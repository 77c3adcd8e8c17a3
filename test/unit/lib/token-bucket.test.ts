import { expect } from 'chai';
import { TokenBucket } from '../../../lib/token-bucket.js';

describe('token bucket (the control socket\'s rate, issue 24 item 5)', () => {
  it('grants the burst at once, then refuses with the wait until the next token', () => {
    const b = new TokenBucket({ perSecond: 10, burst: 20 }, 0);
    const waits = Array.from({ length: 25 }, () => b.take(0));
    expect(waits.slice(0, 20)).to.deep.equal(Array(20).fill(0));
    expect(waits.slice(20)).to.deep.equal(Array(5).fill(100));
  });

  it('refills at its rate, never past the burst', () => {
    const b = new TokenBucket({ perSecond: 10, burst: 20 }, 0);
    for (let i = 0; i < 20; i++) b.take(0);
    expect(b.take(50)).to.equal(50); // half a token there
    expect(b.take(100)).to.equal(0);
    expect(b.take(100)).to.equal(100);
    // A second: 10 tokens; an hour: 20, not 36,000.
    let granted = 0;
    while (b.take(1100) === 0) granted++;
    expect(granted).to.equal(10);
    expect(b.full(3_600_000)).to.equal(true);
    granted = 0;
    while (b.take(3_600_000) === 0) granted++;
    expect(granted).to.equal(20);
  });

  it('a clock that goes back takes nothing and gives nothing', () => {
    const b = new TokenBucket({ perSecond: 1, burst: 1 }, 1000);
    expect(b.take(1000)).to.equal(0);
    expect(b.take(500)).to.equal(1000);
    expect(b.take(2000)).to.equal(0);
  });
});

describe('token bucket: a request of several tokens', () => {
  it('takes its cost, waits for all of it, and never more than the burst', () => {
    const b = new TokenBucket({ perSecond: 10, burst: 20 }, 0);
    for (let i = 0; i < 4; i++) expect(b.take(0, 5)).to.equal(0);
    expect(b.take(0, 5)).to.equal(500);
    expect(b.take(0, 1)).to.equal(100);
    expect(b.take(200, 5)).to.equal(300);
    expect(b.take(500, 5)).to.equal(0);
    expect(b.take(2_500, 50)).to.equal(0); // capped at the burst, so it can ever be granted
  });
});
