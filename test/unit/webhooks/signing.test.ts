/**
 * Signature vectors and the verification rules of service.md, Authentication 4-5:
 * `Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]`, HMAC-SHA256 of `<t>.<raw body>`
 * keyed with the secret string as shown (whsec_ included).
 */
import { expect } from 'chai';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { checkSignature, computeSignature, parseSignatureHeader, signatureHeader } from '../../../webhooks/signing.js';

const SECRET = 'whsec_test_secret_0123456789abcdef';
const OLD = 'whsec_old_secret_fedcba9876543210';
const T = 1_700_000_000;
const BODY = '{"id":"evt_000000000000000000000001","type":"approval.requested"}';
// Computed independently (Python hmac.new(secret, f"{t}.{body}", sha256).hexdigest()).
const SIG_NEW = '349443c44764a443ab257be467d70d4c98b099bee62395e0c074e49b54a79943';
const SIG_OLD = '868e4d53155a0ab8ca6a3db9375c995d246afcd66cb5a7667a728ef29ade118d';

describe('webhook signing (webhooks/signing)', () => {
  describe('vectors', () => {
    it('fixed secret, t and body give a fixed hex HMAC', () => {
      expect(computeSignature(SECRET, T, BODY)).to.equal(SIG_NEW);
      expect(computeSignature(SECRET, T, Buffer.from(BODY))).to.equal(SIG_NEW);
      expect(computeSignature(OLD, T, BODY)).to.equal(SIG_OLD);
    });

    it('the header is t first, then one v1 per secret, newest first', () => {
      expect(signatureHeader([SECRET], T, BODY)).to.equal(`t=${T},v1=${SIG_NEW}`);
      expect(signatureHeader([SECRET, OLD], T, BODY)).to.equal(`t=${T},v1=${SIG_NEW},v1=${SIG_OLD}`);
    });

    it('refuses to sign with no secret', () => {
      expect(() => signatureHeader([], T, BODY)).to.throw();
    });
  });

  describe('parseSignatureHeader', () => {
    const cases: Array<[string | null | undefined, ReturnType<typeof parseSignatureHeader>]> = [
      [`t=${T},v1=${SIG_NEW}`, { t: T, v1: [SIG_NEW] }],
      [`t=${T}, v1=${SIG_NEW.toUpperCase()} ,v1=${SIG_OLD}`, { t: T, v1: [SIG_NEW, SIG_OLD] }],
      [`v0=abc,t=${T},v1=${SIG_NEW}`, { t: T, v1: [SIG_NEW] }],
      [`t=${T}`, null],
      [`v1=${SIG_NEW}`, null],
      [`t=abc,v1=${SIG_NEW}`, null],
      [`t=${T},v1=deadbeef`, null],
      ['', null],
      [null, null],
      [undefined, null],
      [`t=${T},v1=${SIG_NEW},${'x'.repeat(5000)}`, null],
    ];
    for (const [header, want] of cases) {
      it(`${JSON.stringify(header)?.slice(0, 60)} → ${want ? 'parsed' : 'null'}`, () => {
        expect(parseSignatureHeader(header)).to.deep.equal(want);
      });
    }
  });

  describe('checkSignature', () => {
    const header = signatureHeader([SECRET], T, BODY);
    const check = (h: string | null, secrets: string[], body: string | Buffer = BODY, nowSecs: number | number[] = T, toleranceSecs?: number) =>
      checkSignature(body, h, secrets, { nowSecs, toleranceSecs });

    it('accepts the right secret over the exact bytes', () => {
      expect(check(header, [SECRET])).to.equal('ok');
      expect(check(header, [SECRET], Buffer.from(BODY))).to.equal('ok');
    });

    it('tampered body: mismatch', () => {
      expect(check(header, [SECRET], BODY.replace('requested', 'requestee'))).to.equal('mismatch');
      // Re-serialized JSON (whitespace added) is a different body.
      expect(check(header, [SECRET], JSON.stringify(JSON.parse(BODY), null, 1))).to.equal('mismatch');
    });

    it('tampered t: mismatch (t is signed)', () => {
      expect(check(header.replace(`t=${T}`, `t=${T + 1}`), [SECRET])).to.equal('mismatch');
    });

    it('wrong secret: mismatch', () => {
      expect(check(header, [OLD])).to.equal('mismatch');
    });

    it('stale t: beyond 300 s either way is refused, within it accepted', () => {
      expect(check(header, [SECRET], BODY, T + 300)).to.equal('ok');
      expect(check(header, [SECRET], BODY, T - 300)).to.equal('ok');
      expect(check(header, [SECRET], BODY, T + 301)).to.equal('stale');
      expect(check(header, [SECRET], BODY, T - 301)).to.equal('stale');
      expect(check(header, [SECRET], BODY, T + 1000, 1000)).to.equal('ok');
      // A stale header is refused before any HMAC: even a correct signature.
      expect(check(header, [SECRET], BODY, T + 86_400)).to.equal('stale');
    });

    it('accepts when t is near any of several "now"s (service clock and wall clock)', () => {
      expect(check(header, [SECRET], BODY, [T + 86_400, T + 10])).to.equal('ok');
    });

    it('missing and malformed headers', () => {
      expect(check(null, [SECRET])).to.equal('missing');
      expect(check('', [SECRET])).to.equal('missing');
      expect(check('garbage', [SECRET])).to.equal('malformed');
    });

    describe('dual signature during a rotation', () => {
      const both = signatureHeader([SECRET, OLD], T, BODY);
      it('a receiver with only the new secret accepts', () => expect(check(both, [SECRET])).to.equal('ok'));
      it('a receiver with only the old secret accepts', () => expect(check(both, [OLD])).to.equal('ok'));
      it('a receiver with both accepts', () => expect(check(both, [OLD, SECRET])).to.equal('ok'));
      it('a receiver with neither refuses', () => expect(check(both, ['whsec_other'])).to.equal('mismatch'));
      it('a header signed with the old secret alone verifies against [new, old]', () => {
        expect(check(signatureHeader([OLD], T, BODY), [SECRET, OLD])).to.equal('ok');
      });
    });

    describe('constant-time path', () => {
      const original = crypto.timingSafeEqual;
      let calls = 0;
      beforeEach(() => {
        calls = 0;
        (crypto as { timingSafeEqual: typeof original }).timingSafeEqual = (a, b) => {
          calls++;
          return original(a, b);
        };
        syncBuiltinESMExports();
      });
      afterEach(() => {
        (crypto as { timingSafeEqual: typeof original }).timingSafeEqual = original;
        syncBuiltinESMExports();
      });

      it('compares every v1 with every secret through timingSafeEqual, with no early exit', () => {
        const both = signatureHeader([SECRET, OLD], T, BODY);
        // Match first, match last, and no match all do the same 2 × 2 comparisons.
        expect(check(both, [SECRET, 'whsec_x'])).to.equal('ok');
        expect(calls).to.equal(4);
        calls = 0;
        expect(check(both, ['whsec_x', OLD])).to.equal('ok');
        expect(calls).to.equal(4);
        calls = 0;
        expect(check(both, ['whsec_x', 'whsec_y'])).to.equal('mismatch');
        expect(calls).to.equal(4);
      });

      it('a v1 of the wrong length is never compared (it is not a v1 at all)', () => {
        calls = 0;
        expect(check(`t=${T},v1=${SIG_NEW.slice(0, 63)}`, [SECRET])).to.equal('malformed');
        expect(calls).to.equal(0);
      });
    });
  });
});
