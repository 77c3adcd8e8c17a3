import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';

/**
 * The TLS trust of every outbound connection the service makes to a host outside itself
 * (the gateway's upstreams, webhook delivery, Slack, OAuth token calls): Node's root
 * certificates, plus the operator's extra CA certificates (GATEWAY_UPSTREAM_CA_FILE, PEM,
 * one or several) when set. An extra CA is trusted *in addition to* the roots, never
 * instead of them.
 *
 * One context, handed to lib/egress-guard.ts's connector by every caller. Passing `ca` per
 * connection instead makes tls.connect build a context per connection, and with an extra CA
 * that means parsing Node's ~140 root certificates again: 17 ms of blocked event loop per
 * new connection on the bench machine (docs/performance.md). Without an extra CA a context
 * per connection is cheaper (0.15 ms) but still needless.
 *
 * The last context made is kept and handed to the next caller asking for the same trust:
 * the service's four callers share one (each built its own: ~25 ms each with an extra CA,
 * ~75 ms of every start). A context is configuration only (its roots and extra CA; client
 * sessions are kept by each connector, not in it), so sharing it changes no check:
 * servername and checkServerIdentity stay per socket. One entry only: a process that asks
 * for many trusts (the tests, each with an upstream CA of its own) keeps none of the others.
 */
let last: { extraCaPem: string; context: SecureContext } | null = null;

export function upstreamSecureContext(extraCaPem?: string | null): SecureContext {
  const key = extraCaPem ?? '';
  if (last?.extraCaPem === key) return last.context;
  const context = createSecureContext(extraCaPem ? { ca: [...rootCertificates, extraCaPem] } : {});
  last = { extraCaPem: key, context };
  return context;
}
