import type { Db, Queryable } from '../store/db.js';
import { withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { MAX_WINDOW_MS, WINDOW_MS, type Rule } from '../policy-engine/index.js';
import { lockKeys, rateCountsStore, type CountTarget } from './rate-counts.store.js';

export type { CountTarget } from './rate-counts.store.js';

/** What the counter asks of the policy again once it holds the lock: the decision with fresh counts. */
export type Recheck<D> = (counts: ReadonlyMap<number, number>) => D;

/**
 * Counts for `count_over` conditions (issue 26, item 1; docs/policies-approvals.md
 * "Conditions"). A rule's count is how many requests of its connector and category (any
 * connector or category where the rule names none) were forwarded in its scope within its
 * rolling window on the service clock.
 *
 * Atomic across nodes: `settle` runs in one transaction that first takes the scope's lock
 * rows, then counts, asks the policy again with those counts and, when the request may go,
 * records it. Two nodes at the last free place of `max` are serialised by the lock: the
 * second sees the first's row and is refused (or asked). What is refused is not recorded.
 */
export function createRateCounter(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  async function countsOf(q: Queryable, t: CountTarget, rules: readonly Rule[], indexes: readonly number[], now: number): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    // One query per distinct count (a fourth review: 100 rules counting the same thing made
    // 100 queries per request, twice, on SQLite's one connection every tenant shares). The
    // rules that apply to a request name its connector and category or none, so there are at
    // most 16 distinct counts (scope x window x connector named or not x category named or not).
    const asked = new Map<string, Promise<number>>();
    for (const i of indexes) {
      const r = rules[i]!;
      const c = r.when?.count_over;
      if (c === undefined) continue;
      const scope = c.scope ?? 'environment';
      // No end user known: the count is unknown (the riskier reading applies).
      if (scope === 'end_user' && t.endUserId === null) continue;
      const key = JSON.stringify([scope, r.connector ?? null, r.category ?? null, c.per]);
      let n = asked.get(key);
      if (n === undefined) {
        n = rateCountsStore.count(q, t, {
          scope,
          ...(r.connector !== undefined ? { connector: r.connector } : {}),
          ...(r.category !== undefined ? { category: r.category } : {}),
          afterMs: now - WINDOW_MS[c.per],
        });
        asked.set(key, n);
      }
      out.set(i, await n);
    }
    return out;
  }

  return {
    /** Counts now, without a lock (the first decision; `settle` has the last word). */
    read(t: CountTarget, rules: readonly Rule[], indexes: readonly number[]): Promise<Map<number, number>> {
      return countsOf(db, t, rules, indexes, clock.nowMs());
    },

    /**
     * Right before the request is forwarded: under the scope's lock, decide again with fresh
     * counts. A deny (or an ask the request was not held for) is answered and nothing is
     * recorded; otherwise the request is recorded and null answered.
     */
    settle<D extends { decision: 'allow' | 'ask' | 'deny' }>(
      t: CountTarget, rules: readonly Rule[], indexes: readonly number[], connector: string, category: string,
      recheck: Recheck<D>, approved: boolean,
    ): Promise<D | null> {
      return withTx(db, async (trx) => {
        const now = clock.nowMs();
        await rateCountsStore.lock(trx, lockKeys(t), now);
        const d = recheck(await countsOf(trx, t, rules, indexes, now));
        if (d.decision === 'deny' || (d.decision === 'ask' && !approved)) return d;
        await rateCountsStore.record(trx, t, connector, category, now);
        await rateCountsStore.prune(trx, t.environmentId, now - MAX_WINDOW_MS);
        return null;
      });
    },
  };
}

export type RateCounter = ReturnType<typeof createRateCounter>;
