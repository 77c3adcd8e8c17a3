import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { buildConnector } from 'undici';
import { privateAddressReason } from './net.js';

/**
 * The one way the service opens a connection to a host outside itself: the gateway's
 * tunnelled and plain-HTTP requests and its upgrades, webhook delivery, OAuth token calls
 * (issue 9, holes 3 and 4). Every caller hands the same `connect` a host name or literal;
 * the guard
 *
 * 1. canonicalises the host with the WHATWG URL parser, exactly as undici and browsers
 *    will, so `127.1`, `0x7f.1`, `2130706433`, `017700000001`, `0` and `[::ffff:127.0.0.1]`
 *    are judged as the addresses they are (canonicalHost);
 * 2. refuses loopback, private, link-local and unspecified addresses (unless the operator
 *    allows private upstreams), for literals without any lookup (net.connect skips its
 *    `lookup` for IP literals, which is how the old upgrade path reached 169.254.169.254);
 * 3. resolves names itself, fails closed when the lookup fails, and connects only to the
 *    addresses it checked (no DNS rebinding window);
 * 4. refuses the service's own API and proxy ports on any local address, compared as
 *    addresses: `127.1:8080`, `[::1]:8080` and `localhost.:8080` are the same place;
 * 5. checks the address actually connected to, after connect and before a single request
 *    byte is written: whatever got past the checks above (a resolver answer that changed,
 *    a code path nobody thought of) is cut there.
 *
 * Operator overrides (GATEWAY_UPSTREAM_OVERRIDES) replace address and port for a host name
 * and keep SNI and Host; being the operator's own choice they are not subject to the
 * private-address rule, but they are to the management rule.
 */

export class EgressRefusedError extends Error {
  readonly code = 'EGRESS_PRIVATE_ADDRESS';
  constructor(readonly host: string, readonly reason: string) {
    super(`${host} is ${reason}; the gateway does not connect there`);
    this.name = 'EgressRefusedError';
  }
}

/** What a check says: go on, or the refusal (`egress_denied`) or unreachability (`upstream_unreachable`). */
export type EgressCheck = { ok: true } | { ok: false; code: 'egress_denied' | 'upstream_unreachable'; reason: string };

export interface EgressGuardOptions {
  /** GATEWAY_ALLOW_PRIVATE_UPSTREAMS. */
  allowPrivate: boolean;
  /** GATEWAY_UPSTREAM_OVERRIDES: host name → address and port. */
  overrides?: Readonly<Record<string, { host: string; port: number }>>;
  /** Injected for tests; defaults to the system resolver (getaddrinfo). */
  resolve?: (host: string) => Promise<LookupAddress[]>;
  /** How long an answer (or a failure) is shared; default 5 s. */
  dnsCacheMs?: number;
  /**
   * The service's own listening ports (API, proxy, health, node RPC), shared by every guard
   * of the service: never reachable on a local address, whichever guard connects (a webhook
   * or Slack call reached the API port, a fourth review). Default: a set of this guard's own.
   */
  forbiddenPorts?: Set<number>;
}

/** undici's connector signature (`buildConnector.connector`), for `new Agent({ connect })`. */
export type Connector = (
  opts: { hostname: string; host?: string; protocol: string; port: string | number; servername?: string | null; localAddress?: string | null; httpSocket?: Socket },
  callback: (err: Error | null, socket: Socket | null) => void,
) => unknown;

export interface ConnectorOptions {
  /** Connect (and TLS handshake) deadline; default 10 s. */
  timeout?: number;
  /** The TLS context of every connection (built once: see proxy/upstream.ts). */
  secureContext?: import('node:tls').SecureContext;
}

/**
 * The host as every URL-parsing client will see it: lower case, IDNA, IPv4 in any of the
 * legacy forms rewritten as a dotted quad, IPv6 compressed (without brackets), one trailing
 * dot removed. Null when it is not a valid host (a zone id, a port, forbidden code points),
 * which callers must treat as a refusal.
 */
export function canonicalHost(input: string): string | null {
  if (typeof input !== 'string') return null;
  const hit = canonicalCache.get(input);
  if (hit !== undefined) return hit;
  const out = canonicalize(input);
  if (canonicalCache.size >= 10_000) canonicalCache.clear();
  canonicalCache.set(input, out);
  return out;
}

/** canonicalHost's answers: the URL parser costs a few µs, and a gateway sees few distinct hosts. */
const canonicalCache = new Map<string, string | null>();

function canonicalize(input: string): string | null {
  let h = input.trim();
  if (h === '' || h.length > 1000) return null;
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (isIP(h) === 6) h = `[${h}]`;
  else if (/[\s/\\?#@:[\]]/.test(h)) return null;
  let hostname: string;
  try {
    const u = new URL(`http://${h}/`);
    if (u.port !== '' || u.username !== '' || u.password !== '') return null;
    hostname = u.hostname;
  } catch {
    return null;
  }
  if (hostname.startsWith('[')) return hostname.slice(1, -1);
  if (hostname.endsWith('.')) hostname = hostname.slice(0, -1);
  return hostname === '' || hostname.endsWith('.') ? null : hostname;
}

/** `host:port` (or `[v6]:port`, or a bare host with `defaultPort`), canonicalised; null when malformed. */
export function parseAuthority(authority: string | undefined, defaultPort: number): { host: string; port: number } | null {
  if (!authority) return null;
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(authority.trim());
  if (!m) return null;
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (!(port > 0 && port < 65536)) return null;
  const host = canonicalHost(m[1]!);
  return host ? { host, port } : null;
}

/** The host as it goes in a URL or a Host header: IPv6 in brackets. */
export function urlHost(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}

/** The reason a canonical host is private by its text alone (a literal, or `localhost`), or null. */
export function privateLiteralReason(host: string): string | null {
  if (host === 'localhost' || host.endsWith('.localhost')) return 'loopback (localhost)';
  return isIP(host) ? privateAddressReason(host) : null;
}

/** Loopback, unspecified, or an address of one of this machine's interfaces. */
function isLocalAddress(ip: string, local: ReadonlySet<string>): boolean {
  const reason = privateAddressReason(ip);
  if (reason !== null && (reason.startsWith('loopback') || reason.startsWith('this network') || reason.startsWith('unspecified'))) return true;
  return local.has(normalizeIp(ip));
}

/** IPv4-mapped IPv6 as its IPv4 address, IPv6 compressed and lower-case. */
function normalizeIp(ip: string): string {
  const bare = ip.replace(/^\[|\]$/g, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1]!;
  const canon = canonicalHost(bare);
  return canon ?? bare;
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(normalizeIp(a.address));
  return out;
}

function systemResolve(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addrs) => (err ? reject(err) : resolve(addrs))));
}

export interface CheckOptions {
  /**
   * false: only what needs no lookup (a refused literal or `localhost`, the service's own
   * address literal, an override); a name is not resolved. For a host a person has not yet
   * approved (issue 26, item 3): a lookup would carry whatever the agent put in the name
   * to a DNS server before anyone agreed. Default true.
   */
  lookup?: boolean;
}

export interface EgressGuard {
  /**
   * Everything that can be known before connecting: the host is canonical and not a
   * refused literal, its name resolves (a failed lookup refuses: fail closed) to at least
   * one address that may be used, and host:port is not the service itself.
   */
  check(host: string, port: number, opts?: CheckOptions): Promise<EgressCheck>;
  /** undici connector doing the same checks, plus the connected address. */
  connector(opts?: ConnectorOptions): Connector;
  /**
   * For `http.request({ createConnection })`: a connection through the same connector
   * (TLS when `tls`), handed to Node's client when it is up and checked.
   */
  createConnection(tls: boolean, opts?: ConnectorOptions): (options: { host?: string | null; hostname?: string | null; port?: number | string | null; servername?: string }, oncreate: (err: Error | null, socket?: Socket) => void) => undefined;
  /** The service's own listening ports: never reachable on a local address. */
  forbidPort(port: number): void;
  /** host:port is the service itself (by address: loopback, unspecified, this machine's interfaces). */
  isManagement(ip: string, port: number): boolean;
}

export function createEgressGuard(opts: EgressGuardOptions): EgressGuard {
  const overrides = opts.overrides ?? {};
  const baseResolve = opts.resolve ?? systemResolve;
  const cacheMs = opts.dnsCacheMs ?? 5000;
  const cache = new Map<string, { at: number; answer: Promise<LookupAddress[]> }>();
  const forbiddenPorts = opts.forbiddenPorts ?? new Set<number>();
  let local: Set<string> | null = null;

  /** Concurrent lookups of one name share one answer (and a failure) for cacheMs. */
  function resolveShared(host: string): Promise<LookupAddress[]> {
    const now = Date.now();
    const hit = cache.get(host);
    if (hit && now - hit.at < cacheMs) return hit.answer;
    const answer = baseResolve(host);
    answer.catch(() => undefined);
    if (cache.size > 10_000) cache.clear();
    cache.set(host, { at: now, answer });
    return answer;
  }

  function isManagement(ip: string, port: number): boolean {
    if (!forbiddenPorts.has(port)) return false;
    local ??= localAddresses();
    return isLocalAddress(ip, local);
  }

  /**
   * Where to connect for a canonical host and port: the override, or the usable addresses,
   * or the error to fail with (an EgressRefusedError or the resolver's own).
   */
  async function destinations(host: string, port: number, lookup = true): Promise<{ addresses: LookupAddress[]; port: number; override: boolean }> {
    const o = overrides[host];
    if (o) {
      if (isManagement(o.host, o.port)) throw new EgressRefusedError(`${host}:${port}`, 'the gateway\'s own management address');
      return { addresses: [{ address: o.host, family: isIP(o.host) === 6 ? 6 : 4 }], port: o.port, override: true };
    }
    const literal = privateLiteralReason(host);
    if (isIP(host)) {
      if (literal && !opts.allowPrivate) throw new EgressRefusedError(host, `a ${literal} address`);
      if (isManagement(host, port)) throw new EgressRefusedError(`${urlHost(host)}:${port}`, 'the gateway\'s own management address');
      return { addresses: [{ address: host, family: isIP(host) }], port, override: false };
    }
    if (literal && !opts.allowPrivate) throw new EgressRefusedError(host, `a ${literal} name`);
    // check({lookup: false}): what the text alone says; the name is not sent to DNS.
    if (!lookup) return { addresses: [], port, override: false };
    const all = await resolveShared(host);
    if (all.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
    const usable = all.filter((a) => (opts.allowPrivate || privateAddressReason(a.address) === null) && !isManagement(a.address, port));
    if (usable.length === 0) {
      const why = all.some((a) => isManagement(a.address, port)) && opts.allowPrivate
        ? 'the gateway\'s own management address'
        : `a name for a ${privateAddressReason(all[0]!.address) ?? 'private'} address`;
      throw new EgressRefusedError(host, why);
    }
    return { addresses: usable, port, override: false };
  }

  /** The connected socket's peer, checked again: the address actually connected to. */
  function verifyPeer(socket: Socket, host: string, override: boolean): Error | null {
    const ip = socket.remoteAddress;
    const port = socket.remotePort;
    if (!ip || !port) return new EgressRefusedError(host, 'a connection without a peer address');
    if (isManagement(ip, port)) return new EgressRefusedError(`${host}`, 'the gateway\'s own management address');
    const reason = privateAddressReason(ip);
    if (reason && !override && !opts.allowPrivate) return new EgressRefusedError(host, `connected to a ${reason} address`);
    return null;
  }

  function connector(copts: ConnectorOptions = {}): Connector {
    // rejectUnauthorized stated, not defaulted: NODE_TLS_REJECT_UNAUTHORIZED=0 in the
    // service's environment must not make it send real keys to any certificate
    // (test/security/upstream-tls.test.ts runs with it set).
    const base = buildConnector({
      timeout: copts.timeout ?? 10_000, rejectUnauthorized: true, ...(copts.secureContext ? { secureContext: copts.secureContext } : {}),
    } as buildConnector.BuildOptions);
    return (o, callback) => {
      const host = canonicalHost(String(o.hostname));
      const port = Number(o.port) || (o.protocol === 'https:' ? 443 : 80);
      if (!host) {
        callback(new EgressRefusedError(String(o.hostname), 'not a valid host'), null);
        return;
      }
      destinations(host, port).then(
        (d) => {
          const first = d.addresses[0]!;
          // SNI and certificate checks stay on the name; the connection goes to the address.
          const servername = o.servername || (isIP(host) ? undefined : host);
          base({ ...o, hostname: first.address, port: d.port, ...(servername ? { servername } : {}) } as never, (err: Error | null, socket: Socket | null) => {
            if (err || !socket) return callback(err ?? new Error('no socket'), null);
            const refused = verifyPeer(socket, host, d.override);
            if (refused) {
              socket.destroy();
              return callback(refused, null);
            }
            callback(null, socket);
          });
        },
        (err: Error) => callback(err, null),
      );
    };
  }

  return {
    async check(rawHost, port, copts) {
      const host = canonicalHost(rawHost);
      if (!host) return { ok: false, code: 'egress_denied', reason: `"${rawHost}" is not a valid host` };
      try {
        await destinations(host, port, copts?.lookup !== false);
        return { ok: true };
      } catch (err) {
        if (err instanceof EgressRefusedError) return { ok: false, code: 'egress_denied', reason: err.message };
        return { ok: false, code: 'upstream_unreachable', reason: `${host} does not resolve` };
      }
    },
    connector,
    createConnection(tls, copts) {
      const connect = connector(copts);
      return (options, oncreate) => {
        const hostname = String(options.hostname ?? options.host ?? '');
        connect({ hostname, host: hostname, protocol: tls ? 'https:' : 'http:', port: options.port ?? (tls ? 443 : 80), servername: options.servername ?? null }, (err, socket) => {
          if (err || !socket) oncreate(err ?? new Error('no socket'));
          else oncreate(null, socket);
        });
        return undefined;
      };
    },
    forbidPort(port) {
      forbiddenPorts.add(port);
    },
    isManagement,
  };
}
