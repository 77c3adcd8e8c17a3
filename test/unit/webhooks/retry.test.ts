import { expect } from 'chai';
import { nextAttemptAt, RETRY_DELAYS_MS, RETRY_WINDOW_MS } from '../../../webhooks/retry.js';

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe('webhook retry schedule (webhooks/retry)', () => {
  const created = Date.UTC(2026, 10, 22, 10, 0, 0);

  it('is 5 s, 5 min, 30 min, 2 h, 5 h, 10 h within a 24 h window (decisions.md)', () => {
    expect(RETRY_DELAYS_MS).to.deep.equal([5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H]);
    expect(RETRY_WINDOW_MS).to.equal(24 * H);
  });

  it('walks the ladder from each failure, then one last attempt at created + 24 h, then none', () => {
    let now = created;
    const attemptsAt: number[] = [now];
    for (let done = 1; ; done++) {
      const next = nextAttemptAt(created, done, now + 20); // each attempt took 20 ms
      if (next === null) break;
      now = next;
      attemptsAt.push(now);
    }
    const offsets = attemptsAt.map((a) => a - created);
    expect(offsets).to.deep.equal([
      0,
      20 + 5 * S,
      40 + 5 * S + 5 * M,
      60 + 5 * S + 35 * M,
      80 + 5 * S + 2 * H + 35 * M,
      100 + 5 * S + 7 * H + 35 * M,
      120 + 5 * S + 17 * H + 35 * M,
      24 * H,
    ]);
  });

  const cases: Array<[string, number, number, number | null]> = [
    ['first failure', 1, created + 100, created + 100 + 5 * S],
    ['sixth failure', 6, created + 7 * H, created + 17 * H],
    ['seventh failure: the last attempt at 24 h', 7, created + 17 * H, created + 24 * H],
    ['a delay that would pass the window is cut to 24 h', 5, created + 20 * H, created + 24 * H],
    ['a failure at 24 h is final', 8, created + 24 * H, null],
    ['a failure past 24 h is final, whatever the count', 1, created + 30 * H, null],
    ['a very late first failure one second before the window gets the last attempt', 1, created + 24 * H - S, created + 24 * H],
  ];
  for (const [name, done, failedAt, expected] of cases) {
    it(name, () => {
      expect(nextAttemptAt(created, done, failedAt)).to.equal(expected);
    });
  }
});
