import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The one implementation of `Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]`, used to
 * sign every webhook and to verify every signed decision callback (service.md,
 * Authentication 4-5). `v1` is the hex HMAC-SHA256 of `<t>.<raw body>` keyed with the
 * webhook secret string exactly as shown (`whsec_` prefix included), Stripe's scheme, so
 * Stripe's own verifier accepts our header.
 */
export const SIGNATURE_HEADER = 'service-signature';
export const DEFAULT_TOLERANCE_SECS = 300;

export function computeSignature(secret: string, timestampSecs: number, rawBody: string | Buffer): string {
  return createHmac('sha256', secret)
    .update(`${timestampSecs}.`)
    .update(rawBody)
    .digest('hex');
}

/** The header value; one `v1` per secret, newest first (the old one during a rotation). */
export function signatureHeader(secrets: readonly string[], timestampSecs: number, rawBody: string | Buffer): string {
  if (secrets.length === 0) throw new Error('signing needs at least one secret');
  return [`t=${timestampSecs}`, ...secrets.map((s) => `v1=${computeSignature(s, timestampSecs, rawBody)}`)].join(',');
}

export interface ParsedSignature {
  t: number;
  v1: string[];
}

/** Null when the header is missing or malformed. Unknown schemes (v0, …) are ignored. */
export function parseSignatureHeader(header: string | undefined | null): ParsedSignature | null {
  if (!header || header.length > 4096) return null;
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === 't' && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === 'v1' && /^[0-9a-f]{64}$/i.test(v)) v1.push(v.toLowerCase());
  }
  return t === null || v1.length === 0 ? null : { t, v1 };
}

export type SignatureCheck = 'ok' | 'missing' | 'malformed' | 'stale' | 'mismatch';

/**
 * Checks a signature over the exact raw bytes. `nowSecs` may list several acceptable
 * "now"s (the service clock and the wall clock differ only under a test clock); `t` must
 * be within the tolerance of one of them. Every `v1` is compared with every secret in
 * constant time, and any match accepts.
 */
export function checkSignature(
  rawBody: string | Buffer,
  header: string | undefined | null,
  secrets: readonly string[],
  opts: { nowSecs: number | readonly number[]; toleranceSecs?: number },
): SignatureCheck {
  if (!header) return 'missing';
  const parsed = parseSignatureHeader(header);
  if (!parsed) return 'malformed';
  const tolerance = opts.toleranceSecs ?? DEFAULT_TOLERANCE_SECS;
  const nows = typeof opts.nowSecs === 'number' ? [opts.nowSecs] : opts.nowSecs;
  if (!nows.some((now) => Math.abs(now - parsed.t) <= tolerance)) return 'stale';
  let match = false;
  for (const secret of secrets) {
    const expected = Buffer.from(computeSignature(secret, parsed.t, rawBody), 'hex');
    for (const candidate of parsed.v1) {
      // No early exit: every pair is compared, so timing says nothing about which matched.
      if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) match = true;
    }
  }
  return match ? 'ok' : 'mismatch';
}
