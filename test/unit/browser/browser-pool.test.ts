import { expect } from 'chai';
import { SLOT_UID_BASE, SLOT_UID_RANGE, allocateSlotUid } from '../../../browser/browser-pool.js';

/** Issue 29, item 3: a pool slot's uid is allocated from a range of its own, never one another live slot holds. */
describe('browser pool: slot uids', () => {
  it('are of the slot range, apart from the environments\' (200 000–999 999) and their browsers\' (1 100 000–1 899 999)', () => {
    expect(SLOT_UID_BASE).to.be.at.least(1_900_000);
    for (let i = 0; i < 50; i++) {
      const uid = allocateSlotUid(new Set());
      expect(uid).to.be.within(SLOT_UID_BASE, SLOT_UID_BASE + SLOT_UID_RANGE - 1);
    }
  });

  it('never one a live slot holds', () => {
    const held = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const uid = allocateSlotUid(held);
      expect(held.has(uid), `uid ${uid} given twice`).to.equal(false);
      held.add(uid);
    }
  });
});
