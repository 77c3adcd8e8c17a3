import { createHash } from 'node:crypto';
import type { Queryable } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';

/**
 * Signed decision callbacks already used (issue 9, hole 6). The contract's signature covers
 * `t.` + body and the body names no approval, so a captured signed decision would otherwise
 * decide any pending approval of the developer for the tolerance window.
 *
 * The key is sha256(developer, t, sha256(body)), not the `v1` string: a valid `v1` is a
 * function of (secret, t, body), so the same (t, body) is the same signature whichever
 * `v1` values the header carries. Keyed on a `v1`, a header that carried two (during a
 * secret rotation) could be replayed with one stripped, or with a bogus one added.
 */
export function signatureDigest(developerId: string, tSecs: number, rawBody: Buffer): string {
  const body = createHash('sha256').update(rawBody).digest('hex');
  return createHash('sha256').update(`${developerId}\n${tSecs}\n${body}`).digest('hex');
}

export const usedSignaturesStore = {
  /**
   * Records the signature as used; false when it already was. One INSERT on the primary
   * key, committed before the decision goes on, so of two concurrent uses (in any process)
   * exactly one gets true.
   */
  async use(db: Queryable, digest: string, tSecs: number, now: number): Promise<boolean> {
    try {
      await db('used_signatures').insert({ digest, t_secs: tSecs, created_at: now });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  },

  /** Forgets signatures whose `t` is before `beforeSecs` (they are stale anyway). Returns how many. */
  prune(db: Queryable, beforeSecs: number): Promise<number> {
    return db('used_signatures').where('t_secs', '<', beforeSecs).delete();
  },
};
