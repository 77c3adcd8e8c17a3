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
   */
  allows(host: string): boolean;
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

/** Lower-case, trailing dot dropped, duplicates removed; first occurrence order is kept. */
export function normalizePatterns(patterns: Iterable<string>): string[] {
  const seen = new Set<string>();
  for (const p of patterns) {
    const n = normalizeHost(p);
    if (n) seen.add(n);
  }
  return [...seen];
}

/** Labels of letters, digits, `-` and `_` (underscores occur in real DNS names), no empty label. */
const HOST_NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

function isHostName(h: string): boolean {
  return h.length <= 253 && HOST_NAME.test(h);
}

export function compileHostPatterns(patterns: Iterable<string>): HostMatcher {
  const list = normalizePatterns(patterns).sort();
  let any = false;
  const exact = new Set<string>();
  /** `*.example.com` is kept as `example.com`. */
  const suffixes = new Set<string>();
  for (const p of list) {
    if (p === '*') any = true;
    else if (p.startsWith('*.')) suffixes.add(p.slice(2));
    else exact.add(p);
  }
  const frozen = Object.freeze(list);

  function allows(host: string): boolean {
    if (typeof host !== 'string') return false;
    const h = normalizeHost(host);
    if (!h) return false;
    if (isIP(h) !== 0) return any || exact.has(h);
    if (!isHostName(h)) return false;
    if (any || exact.has(h)) return true;
    if (suffixes.size === 0) return false;
    // Walk the parents: a.b.example.com checks b.example.com, example.com, com. The label
    // before a dot is never empty (isHostName), so each candidate is a proper subdomain.
    for (let i = h.indexOf('.'); i !== -1; i = h.indexOf('.', i + 1)) {
      if (suffixes.has(h.slice(i + 1))) return true;
    }
    return false;
  }

  return Object.freeze({ allows, patterns: frozen });
}

/** Denies everything (unknown or destroyed environment: fail closed). */
export const DENY_ALL: HostMatcher = compileHostPatterns([]);
