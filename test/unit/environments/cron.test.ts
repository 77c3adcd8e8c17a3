import { expect } from 'chai';
import { cronNext, shortestInterval } from '../../../environments/agent.service.js';

describe('agent schedules: cron in a zone', () => {
  it('09:00 Europe/Berlin is 08:00Z in winter and 07:00Z once summer time starts (2027-03-28)', () => {
    let at = Date.parse('2027-03-26T12:00:00Z');
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      at = cronNext('0 9 * * *', 'Europe/Berlin', at).next!;
      seen.push(new Date(at).toISOString());
    }
    expect(seen).to.deep.equal(['2027-03-27T08:00:00.000Z', '2027-03-28T07:00:00.000Z', '2027-03-29T07:00:00.000Z']);
  });

  it('and back in autumn (2027-10-31)', () => {
    const a = cronNext('0 9 * * *', 'Europe/Berlin', Date.parse('2027-10-30T12:00:00Z')).next!;
    const b = cronNext('0 9 * * *', 'Europe/Berlin', a).next!;
    expect([new Date(a).toISOString(), new Date(b).toISOString()]).to.deep.equal(['2027-10-31T08:00:00.000Z', '2027-11-01T08:00:00.000Z']);
  });

  it('refuses what is not 5 fields, an unknown zone, an invalid expression', () => {
    expect(cronNext('*/5 * * * * *', 'UTC', 0).error).to.match(/5-field/);
    expect(cronNext('@daily', 'UTC', 0).error).to.match(/5-field/);
    expect(cronNext('0 9 * * *', 'Mars/Olympus', 0).error).to.match(/IANA/);
    expect(cronNext('61 9 * * *', 'UTC', 0).error).to.match(/not a valid/);
  });

  it('measures the shortest gap between consecutive fire times', () => {
    const at = Date.parse('2027-01-01T00:00:00Z');
    const gap = (expr: string) => shortestInterval(cronNext(expr, 'UTC', at).cron!, at) / 1000;
    expect(gap('*/5 * * * *')).to.equal(300);
    expect(gap('*/15 * * * *')).to.equal(900);
    expect(gap('0,10 9 * * *')).to.equal(600);
    expect(gap('0 9 * * 1-5')).to.equal(86_400);
  });
});
