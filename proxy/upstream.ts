import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Agent, type Dispatcher } from 'undici';
import { privateAddressReason } from '../lib/net.js';

/**
 * Every upstream connection of the gateway goes through one undici Agent (keep-alive
 * pools per origin). Its `lookup` is the egress guard: the address a connection is made to
 * is the address that was checked, so a DNS answer cannot change between the check and the
 * connect (no rebinding window). Operator overrides (GATEWAY_UPSTREAM_OVERRIDES) replace
 * the address and port but keep SNI and Host; being the operator's own choice, they are not
 * subject to the private-address rule.
 */
export class EgressRefusedError extends Error {
  readonly code = 'EGRESS_PRIVATE_ADDRESS';
  constructor(readonly host: string, readonly reason: string) {
    super(`${host} resolves to a ${reason} address`);
  }
}

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
}

export interface Upstream {
  dispatcher: Dispatcher;
  /** Resolves and checks a host before any work is done for a request (cached briefly). */
  precheck(host: string): Promise<{ ok: true } | { ok: false; reason: string }>;
  /** Node agents with the same guarded lookup, for WebSocket upgrades (passed through as bytes). */
  nodeAgent(tls: boolean): HttpAgent;
  /** Origin to dispatch to: the override's port replaces the target's. */
  origin(host: string, port: number, tls: boolean): string;
  close(): Promise<void>;
}

function systemResolve(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addrs) => (err ? reject(err) : resolve(addrs))));
}

export function createUpstream(opts: UpstreamOptions): Upstream {
  const resolveHost = opts.resolve ?? systemResolve;
  const cache = new Map<string, { at: number; result: LookupAddress[] | EgressRefusedError }>();
  const CACHE_MS = 5000;

  /** Public addresses of a host (override first), or an EgressRefusedError. */
  async function addressesFor(host: string): Promise<LookupAddress[] | EgressRefusedError> {
    const key = host.toLowerCase().replace(/\.$/, '');
    const override = opts.overrides[key];
    if (override) return [{ address: override.host, family: isIP(override.host) === 6 ? 6 : 4 }];
    const literal = key.replace(/^\[|\]$/g, '');
    if (isIP(literal)) {
      const reason = opts.allowPrivate ? null : privateAddressReason(literal);
      return reason ? new EgressRefusedError(host, reason) : [{ address: literal, family: isIP(literal) }];
    }
    const hit = cache.get(key);
    const now = Date.now();
    if (hit && now - hit.at < CACHE_MS) return hit.result;
    const all = await resolveHost(key);
    let result: LookupAddress[] | EgressRefusedError = all;
    if (!opts.allowPrivate) {
      const usable = all.filter((a) => privateAddressReason(a.address) === null);
      result = usable.length > 0 ? usable : new EgressRefusedError(host, privateAddressReason(all[0]?.address ?? '') ?? 'private');
    }
    if (cache.size > 10_000) cache.clear();
    cache.set(key, { at: now, result });
    return result;
  }

  function checkedLookup(hostname: string, options: { all?: boolean }, cb: (...args: any[]) => void): void {
    addressesFor(hostname).then(
      (res) => {
        if (res instanceof EgressRefusedError) return cb(res);
        if (options?.all) return cb(null, res);
        cb(null, res[0]!.address, res[0]!.family);
      },
      (err) => cb(err),
    );
  }

  // One TLS context for every upstream connection, built once. Passing `ca` instead makes
  // tls.connect build a context per connection, and with an extra CA that means parsing
  // Node's ~140 root certificates again: 17 ms of blocked event loop per new upstream
  // connection on the bench machine (docs/performance.md). Without an extra CA a context
  // per connection is cheaper (0.15 ms) but still needless. Verification is unchanged:
  // the context trusts the same roots, and servername/checkServerIdentity stay per socket.
  const secureContext = createSecureContext(opts.extraCa ? { ca: [...rootCertificates, opts.extraCa] } : {});

  const dispatcher = new Agent({
    keepAliveTimeout: 30_000,
    connections: 256,
    headersTimeout: opts.headersTimeoutMs ?? 60_000,
    bodyTimeout: opts.bodyTimeoutMs ?? 300_000,
    connect: {
      lookup: checkedLookup as never,
      timeout: opts.connectTimeoutMs ?? 10_000,
      secureContext,
    } as Agent.Options['connect'],
  });

  const agentOptions = { keepAlive: false, lookup: checkedLookup as never };
  const httpAgent = new HttpAgent(agentOptions);
  const httpsAgent = new HttpsAgent({ ...agentOptions, secureContext });

  return {
    dispatcher,
    nodeAgent: (tls) => (tls ? httpsAgent : httpAgent),
    async precheck(host) {
      try {
        const r = await addressesFor(host);
        return r instanceof EgressRefusedError ? { ok: false, reason: r.message } : { ok: true };
      } catch {
        // Resolution failures surface at connect time as 502 upstream_unreachable.
        return { ok: true };
      }
    },
    origin(host, port, tls) {
      const o = opts.overrides[host.toLowerCase()];
      const h = isIP(host) === 6 ? `[${host}]` : host;
      return `${tls ? 'https' : 'http'}://${h}:${o ? o.port : port}`;
    },
    async close() {
      httpAgent.destroy();
      httpsAgent.destroy();
      await dispatcher.close();
    },
  };
}
