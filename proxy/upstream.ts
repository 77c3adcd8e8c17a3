import type { LookupAddress } from 'node:dns';
import { Agent, type Dispatcher } from 'undici';
import { createEgressGuard, urlHost, type CheckOptions, type EgressCheck, type EgressGuard } from '../lib/egress-guard.js';
import { upstreamSecureContext } from '../lib/upstream-trust.js';

export { EgressRefusedError } from '../lib/egress-guard.js';

/**
 * Every upstream connection of the gateway goes through lib/egress-guard.ts: one undici
 * Agent (keep-alive pools per origin) for requests, and the same connector for upgrades.
 * The guard canonicalises the host, refuses private and management addresses (literals
 * without a lookup), resolves names itself and connects to the checked address, and
 * checks the address actually connected to before a byte is written.
 */
export interface UpstreamOptions {
  overrides: Readonly<Record<string, { host: string; port: number }>>;
  allowPrivate: boolean;
  /** Extra CA certificates (PEM) trusted for upstream TLS, on top of Node's roots. */
  extraCa?: string | null;
  connectTimeoutMs?: number;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** Injected for tests; defaults to the system resolver. */
  resolve?: (host: string) => Promise<LookupAddress[]>;
  /** The service's own ports, shared with its other guards (lib/egress-guard.ts). */
  forbiddenPorts?: Set<number>;
}

export interface Upstream {
  dispatcher: Dispatcher;
  guard: EgressGuard;
  /** Everything checkable before connecting (canonical host, private, management, resolves). */
  precheck(host: string, port: number, opts?: CheckOptions): Promise<EgressCheck>;
  /** For `http.request({ createConnection })` (upgrades, passed through as bytes). */
  createConnection(tls: boolean): ReturnType<EgressGuard['createConnection']>;
  /** Origin to dispatch to (the guard applies overrides at connect time). */
  origin(host: string, port: number, tls: boolean): string;
  close(): Promise<void>;
}

export function createUpstream(opts: UpstreamOptions): Upstream {
  const guard = createEgressGuard({ allowPrivate: opts.allowPrivate, overrides: opts.overrides, forbiddenPorts: opts.forbiddenPorts, ...(opts.resolve ? { resolve: opts.resolve } : {}) });

  // One TLS context for every upstream connection, built once (lib/upstream-trust.ts says
  // why): Node's roots plus the operator's extra CA. Webhook delivery trusts the same.
  const secureContext = upstreamSecureContext(opts.extraCa);
  const connectOptions = { timeout: opts.connectTimeoutMs ?? 10_000, secureContext };

  const dispatcher = new Agent({
    keepAliveTimeout: 30_000,
    connections: 256,
    headersTimeout: opts.headersTimeoutMs ?? 60_000,
    bodyTimeout: opts.bodyTimeoutMs ?? 300_000,
    connect: guard.connector(connectOptions) as never,
  });
  const httpConnection = guard.createConnection(false, connectOptions);
  const httpsConnection = guard.createConnection(true, connectOptions);

  return {
    dispatcher,
    guard,
    precheck: (host, port, copts) => guard.check(host, port, copts),
    createConnection: (tls) => (tls ? httpsConnection : httpConnection),
    origin: (host, port, tls) => `${tls ? 'https' : 'http'}://${urlHost(host)}:${port}`,
    async close() {
      // Called once the stop's grace is over (bin/service.ts): what is still in flight is cut,
      // not waited for (close() would wait for an upstream that never answers).
      await dispatcher.destroy();
    },
  };
}
