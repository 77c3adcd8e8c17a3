import { expect } from 'chai';
import { isId, newId, newTimeOrderedId } from '../../../lib/ids.js';

describe('ids (lib/ids)', () => {
  it('newId: <prefix>_<24 lowercase hex>, no repeats across many pool refills', () => {
    const ids = Array.from({ length: 5000 }, () => newId('aud'));
    for (const id of ids.slice(0, 50)) expect(id).to.match(/^aud_[0-9a-f]{24}$/);
    expect(new Set(ids).size).to.equal(ids.length);
    expect(isId('aud', ids[0])).to.equal(true);
  });

  it('newTimeOrderedId: same shape, sorts by the time given, random within one millisecond', () => {
    const t = 1_790_000_000_000;
    const early = newTimeOrderedId('aud', t);
    const late = newTimeOrderedId('aud', t + 1);
    expect(early).to.match(/^aud_[0-9a-f]{24}$/);
    expect(early.slice(4, 16)).to.equal(t.toString(16).padStart(12, '0'));
    expect(early < late).to.equal(true);
    const same = Array.from({ length: 2000 }, () => newTimeOrderedId('aud', t));
    expect(new Set(same).size).to.equal(same.length);
    expect(same.every((id) => id.startsWith(early.slice(0, 16)))).to.equal(true);
    expect(isId('aud', late)).to.equal(true);
  });

  it('isId: only the exact shape with that prefix', () => {
    expect(isId('evt', `evt_${'a'.repeat(24)}`)).to.equal(true);
    for (const bad of [`evt_${'a'.repeat(23)}`, `evt_${'a'.repeat(25)}`, `evt_${'A'.repeat(24)}`, `aud_${'a'.repeat(24)}`, `evt-${'a'.repeat(24)}`, 42, null]) {
      expect(isId('evt', bad), String(bad)).to.equal(false);
    }
  });
});
