import type { IncomingMessage } from 'node:http';
import { canonicalHost, parseAuthority, urlHost } from '../lib/egress-guard.js';

/**
 * Which host a request is for, and whether the request agrees (issue 9, hole 2).
 *
 * The allowlist, a secret's allowed_hosts and the classifier all judge the *target*: the
 * CONNECT authority of a tunnel, or the absolute URL of a plain proxy request. If the
 * agent's Host header (or an absolute-form URL inside a tunnel) named another host, the
 * upstream's virtual-host routing would hand the request (and the swapped secret) to that
 * other host. So a request whose Host or absolute-form authority differs from the target,
 * after canonicalising case, a trailing dot, IPv4 forms and the default port, is refused
 * 421 `host_mismatch`; so is a request with two Host headers (which one wins depends on
 * the server). What goes upstream is the canonical target, never the agent's spelling.
 */
export interface Target {
  host: string;
  port: number;
  tls: boolean;
}

export const defaultPort = (tls: boolean): number => (tls ? 443 : 80);

/** The Host header value for a target: the port only when it is not the scheme's default. */
export function hostHeader(t: Target): string {
  return t.port === defaultPort(t.tls) ? urlHost(t.host) : `${urlHost(t.host)}:${t.port}`;
}

/** Why the request's own authority differs from the target, or null when it agrees. */
export function authorityMismatch(req: Pick<IncomingMessage, 'rawHeaders' | 'headers' | 'url'>, target: Target): string | null {
  let hosts = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.length === 4 && req.rawHeaders[i]!.toLowerCase() === 'host') hosts++;
  if (hosts > 1) return 'the request carries more than one Host header';
  const host = req.headers.host;
  if (host !== undefined) {
    const a = parseAuthority(host, defaultPort(target.tls));
    if (!a) return 'the Host header is not a valid host';
    if (a.host !== target.host || a.port !== target.port) return `the Host header names ${hostHeader({ ...a, tls: target.tls })}, not ${hostHeader(target)}`;
  }
  const url = req.url ?? '';
  if (!url.startsWith('/') && url !== '*') {
    const abs = absoluteTarget(url);
    if (!abs) return 'the request target is neither a path nor an absolute http(s) URL';
    if (abs.host !== target.host || abs.port !== target.port || abs.tls !== target.tls) return `the request URL names ${hostHeader(abs)}, not ${hostHeader(target)}`;
  }
  return null;
}

/** The target of an absolute-form http(s) URL, canonical; null for anything else. */
export function absoluteTarget(url: string): Target | null {
  const m = /^(https?):\/\/([^/?#]*)/i.exec(url);
  if (!m) return null;
  const tls = m[1]!.toLowerCase() === 'https';
  const authority = m[2]!;
  if (authority.includes('@')) return null; // userinfo in a request target: refuse, never guess
  const a = parseAuthority(authority, defaultPort(tls));
  return a ? { host: a.host, port: a.port, tls } : null;
}

/**
 * The request target in origin-form. An absolute-form target (`GET https://host/path`),
 * which a server must accept (RFC 9112 section 3.2.2), keeps its path and query; before,
 * every target not starting with `/` became `/`, so such a request was classified and
 * forwarded as a request for `/`. The host part is checked by authorityMismatch.
 */
export function originForm(target: string | undefined): string {
  if (!target) return '/';
  if (target.startsWith('/')) return target;
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*([^#]*)/i.exec(target);
  const rest = m ? m[1]! : target.startsWith('?') ? target : '';
  return rest.startsWith('/') ? rest : `/${rest}`;
}

export { canonicalHost };
