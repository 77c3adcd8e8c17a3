import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Slack's request signature (https://api.slack.com/authentication/verifying-requests-from-slack):
 * `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:" + X-Slack-Request-Timestamp + ":" + raw body)>`.
 * PURE: the clock is passed in. A timestamp more than TOLERANCE_SECS from now (either
 * clock given: the service clock may be a test clock moved ahead) is stale, whatever the
 * signature says, so a captured request is worth at most five minutes; within them the
 * replay cache (slack-signatures.store.ts) makes it worth one use.
 */
export const SLACK_TOLERANCE_SECS = 300;

export type SlackSignatureCheck = 'ok' | 'missing' | 'malformed' | 'stale' | 'mismatch';

export function slackSignature(secret: string, timestamp: string | number, rawBody: Buffer | string): string {
  const h = createHmac('sha256', secret);
  h.update(`v0:${timestamp}:`);
  h.update(rawBody);
  return `v0=${h.digest('hex')}`;
}

/** The timestamp header as whole Unix seconds, or null when it is not one. */
export function parseSlackTimestamp(header: string | undefined): number | null {
  if (header === undefined || !/^\d{1,12}$/.test(header)) return null;
  return Number(header);
}

export function verifySlackSignature(
  rawBody: Buffer,
  timestampHeader: string | undefined,
  signatureHeader: string | undefined,
  secret: string,
  opts: { nowSecs: readonly number[]; toleranceSecs?: number },
): SlackSignatureCheck {
  if (timestampHeader === undefined || signatureHeader === undefined) return 'missing';
  const t = parseSlackTimestamp(timestampHeader);
  if (t === null || !/^v0=[0-9a-f]{64}$/.test(signatureHeader)) return 'malformed';
  const tolerance = opts.toleranceSecs ?? SLACK_TOLERANCE_SECS;
  if (!opts.nowSecs.some((now) => Math.abs(now - t) <= tolerance)) return 'stale';
  const want = Buffer.from(slackSignature(secret, timestampHeader, rawBody), 'utf8');
  const got = Buffer.from(signatureHeader, 'utf8');
  return want.length === got.length && timingSafeEqual(want, got) ? 'ok' : 'mismatch';
}

/**
 * The replay cache's key: the developer, the timestamp and the body's hash. A valid
 * signature is a function of (secret, t, body), so the same (t, body) is the same
 * signature; keyed on these rather than on the header, no variant of it passes twice.
 */
export function slackSignatureDigest(developerId: string, tSecs: number, rawBody: Buffer): string {
  const body = createHash('sha256').update(rawBody).digest('hex');
  return createHash('sha256').update(`slack\n${developerId}\n${tSecs}\n${body}`).digest('hex');
}
