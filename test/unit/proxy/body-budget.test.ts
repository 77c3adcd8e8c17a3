import { expect } from 'chai';
import { BodyBudget } from '../../../proxy/body-budget.js';

describe('proxy/body-budget BodyBudget', () => {
  it('charges an environment up to its share and all up to the total; a refused charge takes nothing', () => {
    const b = new BodyBudget(100, 150);
    expect(b.take('env_a', 60)).to.equal(true);
    expect(b.take('env_a', 41)).to.equal(false); // 101 > its share
    expect(b.take('env_a', 40)).to.equal(true);
    expect(b.take('env_b', 51)).to.equal(false); // 151 > the total
    expect(b.take('env_b', 50)).to.equal(true);
    expect([b.used('env_a'), b.used('env_b'), b.used()]).to.deep.equal([100, 50, 150]);
  });

  it('gives back what was charged; nothing given back twice goes below zero, and an emptied environment is forgotten', () => {
    const b = new BodyBudget(100, 150);
    b.take('env_a', 70);
    b.give('env_a', 70);
    b.give('env_a', 70);
    b.give('env_a', 0);
    expect([b.used('env_a'), b.used()]).to.deep.equal([0, 0]);
    expect(b.take('env_a', 100)).to.equal(true);
  });
});
