import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';

/**
 * The TLS trust of every outbound connection the service makes to a host outside itself
 * (the gateway's upstreams, webhook delivery, later OAuth token calls): Node's root
 * certificates, plus the operator's extra CA certificates (GATEWAY_UPSTREAM_CA_FILE, PEM,
 * one or several) when set. An extra CA is trusted *in addition to* the roots, never
 * instead of them.
 *
 * One context, built once per caller and handed to lib/egress-guard.ts's connector.
 * Passing `ca` per connection instead makes tls.connect build a context per connection,
 * and with an extra CA that means parsing Node's ~140 root certificates again: 17 ms of
 * blocked event loop per new connection on the bench machine (docs/performance.md).
 * Without an extra CA a context per connection is cheaper (0.15 ms) but still needless.
 * Verification is unchanged: servername and checkServerIdentity stay per socket.
 */
export function upstreamSecureContext(extraCaPem?: string | null): SecureContext {
  return createSecureContext(extraCaPem ? { ca: [...rootCertificates, extraCaPem] } : {});
}
