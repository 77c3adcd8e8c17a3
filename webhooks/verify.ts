import { checkSignature, DEFAULT_TOLERANCE_SECS } from './signing.js';
import type { WebhookEnvelope } from './envelope.js';

/** Why a webhook was refused; a fixed word, so receivers can log and count it. */
export type WebhookVerificationReason =
  | 'no_secrets'
  | 'missing_signature'
  | 'malformed_signature'
  | 'stale_timestamp'
  | 'signature_mismatch'
  | 'invalid_payload';

const MESSAGES: Record<WebhookVerificationReason, string> = {
  no_secrets: 'no webhook secret to verify with',
  missing_signature: 'the Service-Signature header is missing',
  malformed_signature: 'the Service-Signature header is not t=<unix seconds>,v1=<hex>[,v1=<hex>]',
  stale_timestamp: 'the signature timestamp is outside the tolerance',
  signature_mismatch: 'no v1 signature matches any secret',
  invalid_payload: 'the signed body is not a JSON webhook envelope',
};

export class WebhookVerificationError extends Error {
  constructor(readonly reason: WebhookVerificationReason) {
    super(MESSAGES[reason]);
    this.name = 'WebhookVerificationError';
  }
}

/**
 * Receiver side: checks a webhook against the endpoint's secret(s) and returns the event.
 *
 * `rawBody` must be the bytes exactly as received (express.raw, not express.json: JSON
 * parsed and re-serialized no longer matches the signature). Every `v1` is compared with
 * every secret in constant time (webhooks/signing.ts), and `t` must be within
 * `toleranceSecs` of `now` (ms). Pass both secrets during a rotation. Throws a
 * WebhookVerificationError naming the reason otherwise.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  signatureHeader: string | undefined | null,
  secrets: readonly string[],
  { toleranceSecs = DEFAULT_TOLERANCE_SECS, now = Date.now() }: { toleranceSecs?: number; now?: number } = {},
): WebhookEnvelope {
  if (secrets.length === 0) throw new WebhookVerificationError('no_secrets');
  const outcome = checkSignature(rawBody, signatureHeader, secrets, { nowSecs: Math.floor(now / 1000), toleranceSecs });
  switch (outcome) {
    case 'ok':
      break;
    case 'missing':
      throw new WebhookVerificationError('missing_signature');
    case 'malformed':
      throw new WebhookVerificationError('malformed_signature');
    case 'stale':
      throw new WebhookVerificationError('stale_timestamp');
    case 'mismatch':
      throw new WebhookVerificationError('signature_mismatch');
  }
  let event: unknown;
  try {
    event = JSON.parse(Buffer.isBuffer(rawBody) ? rawBody.toString('utf8') : rawBody);
  } catch {
    throw new WebhookVerificationError('invalid_payload');
  }
  const e = event as Partial<WebhookEnvelope> | null;
  if (!e || typeof e !== 'object' || Array.isArray(e) || typeof e.id !== 'string' || typeof e.type !== 'string') {
    throw new WebhookVerificationError('invalid_payload');
  }
  return e as WebhookEnvelope;
}
