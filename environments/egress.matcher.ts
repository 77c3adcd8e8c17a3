import { isIP } from 'node:net';

/**
 * Host matching for the egress allowlist and for a secret's `allowed_hosts` (decisions.md,
 * "Effective egress allowlist"). Pure and synchronous: the proxy calls `allows()` on every
 * request, so a compiled matcher is a Set lookup per label of the host, nothing more.
 *
 * Pattern forms (validated at the API by `hostPatternsRule`, stored lower-case):
 * - `*`              every host, IP literals included;
 * - `*.example.com`  every subdomain of example.com at any depth, NOT example.com itself;
 * - `api.example.com`, `10.0.0.1`  exactly that host (case-insensitive).
 *
 * An IP literal only ever matches an exact pattern (or `*`): `*.0.0.1` must not let
 * 10.0.0.1 through, so wildcards are never applied to IPs.
 */
export interface HostMatcher {
  /**
   * True when `host` may be reached. `host` is a host name or IP literal without a port,
   * as `new URL(...).hostname` gives it (IPv6 with or without brackets). Case and one
   * trailing dot are ignored. A malformed host is never allowed, not even by `*`.
   *
   * With `port`, a pattern that names a port (`api.example.com:8443`) matches only that
   * port, and a pattern without one matches the ports its matcher was compiled for
   * (`portless`: every port for the egress allowlist, 443 only for a secret's
   * allowed_hosts). Without `port`, the host alone is compared (for listings).
   */
  allows(host: string, port?: number): boolean;
  /** The patterns this matcher was compiled from: normalized, unique, sorted. */
  readonly patterns: readonly string[];
}

/** Lower-cased, surrounding whitespace, IPv6 brackets and one trailing dot removed. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.length > 1 && h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/** A pattern split into its host part and its port (null when it names none). */
export function splitPattern(pattern: string): { host: string; port: number | null } {
  const p = pattern.trim();
  const m = /^([^:[\]]+):(\d{1,5})$/.exec(p);
  return m ? { host: normalizeHost(m[1]!), port: Number(m[2]) } : { host: normalizeHost(p), port: null };
}

/** Lower-case, trailing dot dropped, duplicates removed; first occurrence order is kept. */
export function normalizePatterns(patterns: Iterable<string>): string[] {
  const seen = new Set<string>();
  for (const p of patterns) {
    const { host, port } = splitPattern(p);
    if (host) seen.add(port === null ? host : `${host}:${port}`);
  }
  return [...seen];
}

/** Labels of letters, digits, `-` and `_` (underscores occur in real DNS names), no empty label. */
const HOST_NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

function isHostName(h: string): boolean {
  return h.length <= 253 && HOST_NAME.test(h);
}

/** Ports a pattern allows: null = every port. */
type Ports = Set<number> | null;

export interface CompileOptions {
  /** Which ports a pattern without a port allows: `any` (egress), or one port (443 for secrets). */
  portless?: 'any' | number;
}

export function compileHostPatterns(patterns: Iterable<string>, options: CompileOptions = {}): HostMatcher {
  const portless = options.portless ?? 'any';
  const list = normalizePatterns(patterns).sort();
  let any: Ports | undefined;
  const exact = new Map<string, Ports>();
  /** `*.example.com` is kept as `example.com`. */
  const suffixes = new Map<string, Ports>();
  const add = (map: Map<string, Ports>, key: string, port: number | null) => {
    const ports = widen(map.get(key), port);
    map.set(key, ports);
  };
  function widen(current: Ports | undefined, port: number | null): Ports {
    const allowed = port ?? (portless === 'any' ? null : portless);
    if (current === null || allowed === null) return null;
    const set = current ?? new Set<number>();
    set.add(allowed);
    return set;
  }
  for (const p of list) {
    const { host, port } = splitPattern(p);
    if (host === '*') any = widen(any, port);
    else if (host.startsWith('*.')) add(suffixes, host.slice(2), port);
    else add(exact, host, port);
  }
  const frozen = Object.freeze(list);
  const portOk = (ports: Ports | undefined, port: number | undefined): boolean =>
    ports !== undefined && (port === undefined || ports === null || ports.has(port));

  function allows(host: string, port?: number): boolean {
    if (typeof host !== 'string') return false;
    const h = normalizeHost(host);
    if (!h) return false;
    if (portOk(any, port)) {
      if (isIP(h) !== 0 || isHostName(h)) return true;
      return false;
    }
    if (isIP(h) !== 0) return portOk(exact.get(h), port);
    if (!isHostName(h)) return false;
    if (portOk(exact.get(h), port)) return true;
    if (suffixes.size === 0) return false;
    // Walk the parents: a.b.example.com checks b.example.com, example.com, com. The label
    // before a dot is never empty (isHostName), so each candidate is a proper subdomain.
    for (let i = h.indexOf('.'); i !== -1; i = h.indexOf('.', i + 1)) {
      if (portOk(suffixes.get(h.slice(i + 1)), port)) return true;
    }
    return false;
  }

  return Object.freeze({ allows, patterns: frozen });
}

/** Denies everything (unknown or destroyed environment: fail closed). */
export const DENY_ALL: HostMatcher = compileHostPatterns([]);
