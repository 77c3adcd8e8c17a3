/**
 * The receiver-side verifier, and interoperability with Stripe's own webhook code in
 * both directions (decisions.md: the HMAC key is the secret as shown, so Stripe's
 * verifier accepts our Service-Signature value).
 */
import { expect } from 'chai';
import Stripe from 'stripe';
import { signatureHeader } from '../../../webhooks/signing.js';
import { verifyWebhook, WebhookVerificationError, type WebhookVerificationReason } from '../../../webhooks/verify.js';
import { buildEnvelope } from '../../../webhooks/envelope.js';
import { newWebhookSecret } from '../../../webhooks/endpoints.service.js';

const NOW_MS = 1_800_000_000_123;
const NOW = Math.floor(NOW_MS / 1000);

function reasonOf(fn: () => unknown): WebhookVerificationReason | null {
  try {
    fn();
    return null;
  } catch (err) {
    expect(err).to.be.instanceOf(WebhookVerificationError);
    return (err as WebhookVerificationError).reason;
  }
}

describe('verifyWebhook (webhooks/verify)', () => {
  const secret = newWebhookSecret();
  const old = newWebhookSecret();
  const { envelope, body } = buildEnvelope({
    type: 'approval.requested',
    createdAtMs: NOW_MS,
    environmentId: 'env_0123456789abcdef01234567',
    data: { approval_id: 'apr_0123456789abcdef01234567', summary: 'send “mail” ✉' },
  });

  it('returns the parsed event for a good signature (string or Buffer body)', () => {
    const header = signatureHeader([secret], NOW, body);
    expect(verifyWebhook(body, header, [secret], { now: NOW_MS })).to.deep.equal(envelope);
    expect(verifyWebhook(Buffer.from(body), header, [secret], { now: NOW_MS })).to.deep.equal(envelope);
  });

  it('accepts either secret during a rotation, and a receiver holding both', () => {
    const header = signatureHeader([secret, old], NOW, body);
    expect(verifyWebhook(body, header, [secret], { now: NOW_MS }).id).to.equal(envelope.id);
    expect(verifyWebhook(body, header, [old], { now: NOW_MS }).id).to.equal(envelope.id);
    expect(verifyWebhook(body, signatureHeader([old], NOW, body), [secret, old], { now: NOW_MS }).id).to.equal(envelope.id);
  });

  const header = () => signatureHeader([secret], NOW, body);
  const cases: Array<[string, () => unknown, WebhookVerificationReason]> = [
    ['no secrets', () => verifyWebhook(body, header(), [], { now: NOW_MS }), 'no_secrets'],
    ['missing header', () => verifyWebhook(body, undefined, [secret], { now: NOW_MS }), 'missing_signature'],
    ['malformed header', () => verifyWebhook(body, 'v1=abc', [secret], { now: NOW_MS }), 'malformed_signature'],
    ['stale t (301 s old)', () => verifyWebhook(body, header(), [secret], { now: NOW_MS + 301_000 }), 'stale_timestamp'],
    ['t from the future (301 s ahead)', () => verifyWebhook(body, header(), [secret], { now: NOW_MS - 302_000 }), 'stale_timestamp'],
    ['tampered body', () => verifyWebhook(body.replace('apr_', 'apx_'), header(), [secret], { now: NOW_MS }), 'signature_mismatch'],
    ['re-serialized body', () => verifyWebhook(JSON.stringify(JSON.parse(body), null, 2), header(), [secret], { now: NOW_MS }), 'signature_mismatch'],
    ['wrong secret', () => verifyWebhook(body, header(), [old], { now: NOW_MS }), 'signature_mismatch'],
    ['signed non-JSON', () => verifyWebhook('not json', signatureHeader([secret], NOW, 'not json'), [secret], { now: NOW_MS }), 'invalid_payload'],
    ['signed JSON that is no envelope', () => verifyWebhook('[1]', signatureHeader([secret], NOW, '[1]'), [secret], { now: NOW_MS }), 'invalid_payload'],
  ];
  for (const [name, fn, reason] of cases) {
    it(`${name}: WebhookVerificationError ${reason}`, () => {
      expect(reasonOf(fn)).to.equal(reason);
    });
  }

  it('tolerance is configurable', () => {
    expect(reasonOf(() => verifyWebhook(body, header(), [secret], { now: NOW_MS + 3_600_000, toleranceSecs: 3600 }))).to.equal(null);
  });

  it('defaults now to the wall clock', () => {
    const t = Math.floor(Date.now() / 1000);
    expect(verifyWebhook(body, signatureHeader([secret], t, body), [secret]).id).to.equal(envelope.id);
    expect(reasonOf(() => verifyWebhook(body, header(), [secret]))).to.equal('stale_timestamp');
  });

  describe("interoperability with Stripe's webhook code", () => {
    const stripe = new Stripe('sk_test_x');

    it("Stripe's constructEvent accepts our header", () => {
      const t = Math.floor(Date.now() / 1000);
      const event = stripe.webhooks.constructEvent(body, signatureHeader([secret], t, body), secret) as unknown;
      expect(event).to.deep.equal(envelope);
    });

    it("Stripe's constructEvent accepts our rotation header with either secret", () => {
      const t = Math.floor(Date.now() / 1000);
      const h = signatureHeader([secret, old], t, body);
      expect((stripe.webhooks.constructEvent(body, h, secret) as unknown as { id: string }).id).to.equal(envelope.id);
      expect((stripe.webhooks.constructEvent(body, h, old) as unknown as { id: string }).id).to.equal(envelope.id);
    });

    it("Stripe's constructEvent refuses our header over a tampered body", () => {
      const t = Math.floor(Date.now() / 1000);
      expect(() => stripe.webhooks.constructEvent(body + ' ', signatureHeader([secret], t, body), secret)).to.throw();
    });

    it("verifyWebhook accepts Stripe's generateTestHeaderString", () => {
      const h = stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: NOW });
      expect(verifyWebhook(body, h, [secret], { now: NOW_MS }).id).to.equal(envelope.id);
      expect(reasonOf(() => verifyWebhook(body, h, [old], { now: NOW_MS }))).to.equal('signature_mismatch');
    });
  });
});
