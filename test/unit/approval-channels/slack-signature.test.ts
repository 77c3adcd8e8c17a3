import { expect } from 'chai';
import { slackSignature, slackSignatureDigest, verifySlackSignature } from '../../../approval-channels/slack-signature.js';

/** Slack's request signature (approval-channels/slack-signature.ts), against Slack's documented example. */
describe('Slack request signatures (approval-channels/slack-signature)', () => {
  // https://api.slack.com/authentication/verifying-requests-from-slack (the worked example).
  const secret = '8f742231b10e8888abcd99yyyzzz85a5';
  const ts = '1531420618';
  const body = 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
  const expected = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';
  const now = { nowSecs: [1531420618 + 10] };

  it('computes Slack\'s documented example', () => {
    expect(slackSignature(secret, ts, body)).to.equal(expected);
  });

  const cases: Array<[string, Parameters<typeof verifySlackSignature>, string]> = [
    ['the example', [Buffer.from(body), ts, expected, secret, now], 'ok'],
    ['no timestamp', [Buffer.from(body), undefined, expected, secret, now], 'missing'],
    ['no signature', [Buffer.from(body), ts, undefined, secret, now], 'missing'],
    ['a v1 signature', [Buffer.from(body), ts, expected.replace('v0=', 'v1='), secret, now], 'malformed'],
    ['upper-case hex', [Buffer.from(body), ts, expected.toUpperCase().replace('V0=', 'v0='), secret, now], 'malformed'],
    ['a timestamp with a fraction', [Buffer.from(body), `${ts}.5`, expected, secret, now], 'malformed'],
    ['301 s late', [Buffer.from(body), ts, expected, secret, { nowSecs: [1531420618 + 301] }], 'stale'],
    ['301 s early', [Buffer.from(body), ts, expected, secret, { nowSecs: [1531420618 - 301] }], 'stale'],
    ['stale by one clock, fresh by the other', [Buffer.from(body), ts, expected, secret, { nowSecs: [1531420618 + 3600, 1531420618] }], 'ok'],
    ['another secret', [Buffer.from(body), ts, expected, 'another-secret', now], 'mismatch'],
    ['a body with one byte more', [Buffer.from(`${body}&`), ts, expected, secret, now], 'mismatch'],
    ['another timestamp', [Buffer.from(body), String(Number(ts) + 1), expected, secret, now], 'mismatch'],
  ];
  for (const [name, args, want] of cases) {
    it(`${name}: ${want}`, () => {
      expect(verifySlackSignature(...args)).to.equal(want);
    });
  }

  it('the replay key depends on the developer, the timestamp and the body, not on the header', () => {
    const a = slackSignatureDigest('dev_a', 1, Buffer.from('x'));
    expect(a).to.match(/^[0-9a-f]{64}$/);
    expect(slackSignatureDigest('dev_b', 1, Buffer.from('x'))).to.not.equal(a);
    expect(slackSignatureDigest('dev_a', 2, Buffer.from('x'))).to.not.equal(a);
    expect(slackSignatureDigest('dev_a', 1, Buffer.from('y'))).to.not.equal(a);
    expect(slackSignatureDigest('dev_a', 1, Buffer.from('x'))).to.equal(a);
  });
});
