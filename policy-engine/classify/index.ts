/**
 * classify(): which connector and category an HTTP request that uses a credential falls
 * in (decisions.md "Categories of known APIs"; tables in docs/classification.md).
 *
 * PURE: a function of the request alone. The table is chosen by host and path, the same
 * for every credential kind: a Slack token kept as a `secret:` still sends a message with
 * `chat.postMessage`, so it is `send`, not the method rule's `write`. Only the connector
 * comes from the caller's hint (the gateway knows which credential it is swapping in);
 * without a hint it is what the host and path imply, or null.
 *
 *   *.googleapis.com  /batch...                     Google batch (most dangerous part)
 *   *.googleapis.com  /gmail/v1, /upload/gmail/v1   Gmail table
 *   *.googleapis.com  /calendar/v3                  Calendar table
 *   *.googleapis.com  anything else                 method rule (override honoured)
 *   slack.com, *.slack.com  /api/<method>           Slack table (verb ignored)
 *   api.stripe.com                                  Stripe table
 *   anything else                                   method rule
 */
import { dangerRank } from '../categories.js';
import { classifyCalendar, isCalendarPath } from './calendar.js';
import { classifyGeneric, methodRule } from './generic.js';
import { classifyGmail, gmailNeedsBody, isGmailPath } from './gmail.js';
import { isGoogleBatchPath, parseGoogleBatch } from './google-batch.js';
import { contentEncoded, googleMethods, isReadMethod, mostDangerousVerdict, parseRequest, wireAndOverrideMethods } from './http.js';
import { classifySlack, isSlackApiPath, isSlackHost } from './slack.js';
import { STRIPE_HOST, classifyStripe, stripeNeedsBody } from './stripe.js';
import { looseTargetSegments } from './minting.js';
import type { Classification, ClassifyRequest, ParsedRequest, Verdict } from './types.js';

export type { Classification, ClassifyRequest } from './types.js';
export { CREDENTIAL_MINTING_ROWS, credentialMintingRule } from './minting.js';

/** Connectors backed by connections (OAuth), as opposed to `secret:<NAME>`. */
export const CONNECTION_CONNECTORS = ['gmail', 'calendar', 'slack'] as const;

/** The category a batch gets when it cannot be read: the top of DANGER_ORDER. */
export const UNPARSABLE_BATCH_CATEGORY = 'change_permission' as const;

export function isGoogleHost(host: string): boolean {
  return host === 'googleapis.com' || host.endsWith('.googleapis.com');
}

interface Routed {
  readonly verdict: Verdict;
  readonly inferred: string | null;
}

function perMethod(methods: readonly string[], f: (m: string) => Verdict): Verdict {
  return mostDangerousVerdict(methods.map(f));
}

function classifyBatch(p: ParsedRequest, hint: string | undefined, depth: number): Routed {
  const pathApi = p.lower[1] === 'gmail' ? 'gmail' : p.lower[1] === 'calendar' ? 'calendar' : null;
  const unparsable = (): Routed => ({
    verdict: { category: UNPARSABLE_BATCH_CATEGORY, rule: 'google.batch.unparsable' },
    inferred: pathApi,
  });
  if (depth > 0) return unparsable(); // Google does not nest batches
  // A compressed batch is not read (we do not inflate): unparsable, like any body we cannot read.
  if (contentEncoded(p.headers)) return unparsable();
  const parsed = parseGoogleBatch(p.contentType, p.body, p.host);
  if (!parsed.ok) return unparsable();
  const parts: Classification[] = [];
  const routed: Routed[] = [];
  for (const inner of parsed.parts) {
    const r = route(parseRequest(inner), hint, depth + 1);
    if (r.verdict.rule === 'google.batch.unparsable') return unparsable();
    routed.push(r);
    parts.push({ connector: hint ?? r.inferred, category: r.verdict.category, rule: r.verdict.rule });
  }
  let worst = parts[0]!;
  for (const part of parts) if (dangerRank(part.category) > dangerRank(worst.category)) worst = part;
  const inferredParts = new Set(routed.map((r) => r.inferred));
  const inferred = pathApi ?? (inferredParts.size === 1 ? [...inferredParts][0]! : null);
  return { verdict: { category: worst.category, rule: `google.batch(${worst.rule})`, parts }, inferred };
}

function route(p: ParsedRequest, hint: string | undefined, depth: number): Routed {
  if (isGoogleHost(p.host)) {
    const methods = googleMethods(p);
    // A batch is classified from its body whatever the method or X-HTTP-Method-Override
    // say: Google's batch endpoint runs the parts of a POST even when the override reads
    // GET, and a batch with no readable body is the most dangerous reading (issue 9).
    if (isGoogleBatchPath(p.lower)) return classifyBatch(p, hint, depth);
    if (isGmailPath(p.lower)) return { verdict: perMethod(methods, (m) => classifyGmail(p, m)), inferred: 'gmail' };
    if (isCalendarPath(p.lower)) return { verdict: perMethod(methods, (m) => classifyCalendar(p, m)), inferred: 'calendar' };
    return { verdict: perMethod(methods, (m) => methodRule(m, 'google')), inferred: null };
  }
  if (isSlackHost(p.host) && isSlackApiPath(p.lower)) return { verdict: classifySlack(p), inferred: 'slack' };
  if (p.host === STRIPE_HOST) {
    return { verdict: perMethod(wireAndOverrideMethods(p), (m) => classifyStripe(p, m)), inferred: null };
  }
  return { verdict: classifyGeneric(p), inferred: null };
}

/**
 * Classifies one request. `connectorHint` is the connector of the credential the gateway
 * found in the request (`gmail`, `calendar`, `slack`, `secret:NAME`); it becomes the
 * result's connector unchanged. Never throws for any input of the declared type.
 */
export function classify(req: ClassifyRequest, connectorHint?: string): Classification {
  const p = parseRequest(req);
  let { verdict, inferred } = route(p, connectorHint, 0);
  // The path as a lenient router reads it too (a fourth review): `/v1/charges;x=1`,
  // `/v1%2Fcharges`, `/v1/x\..\charges`, `/v1/charges.` reach Stripe's charges on a server
  // that drops `;` parameters, decodes `%2F`, maps `\` or trims dots, and were classified as
  // a generic write. Both readings are classified; the more dangerous wins (as the minting
  // check reads both: minting.ts).
  const loose = looseTargetSegments(req.path);
  if (loose.length !== p.lower.length || loose.some((s, i) => s !== p.lower[i])) {
    const other = route({ ...p, segments: loose, lower: loose }, connectorHint, 0);
    if (dangerRank(other.verdict.category) > dangerRank(verdict.category)) ({ verdict, inferred } = { verdict: { ...other.verdict, rule: `${other.verdict.rule} (path read loosely)` }, inferred: other.inferred ?? inferred });
  }
  const out: Classification = {
    connector: connectorHint ?? inferred,
    category: verdict.category,
    rule: verdict.rule,
    ...(verdict.parts !== undefined ? { parts: verdict.parts } : {}),
  };
  return out;
}

/**
 * Whether the category of this request can depend on its body, so the gateway must buffer
 * the body and pass it to classify(): Google batches and Gmail label or filter changes.
 * Without the body those are classified by their dangerous reading (a batch as
 * change_permission, a label change as trashing, a filter as forwarding).
 */
export function needsBody(req: Pick<ClassifyRequest, 'method' | 'host' | 'path' | 'headers'>): boolean {
  const p = parseRequest({ ...req, body: undefined });
  if (p.host === STRIPE_HOST) return stripeNeedsBody(p);
  if (!isGoogleHost(p.host)) return false;
  if (isGoogleBatchPath(p.lower)) return true;
  if (!googleMethods(p).some((m) => !isReadMethod(m))) return false;
  return gmailNeedsBody(p.lower);
}
