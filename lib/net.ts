import { isIP } from 'node:net';

/**
 * Private-destination checks shared by webhook endpoint settings, webhook delivery, the
 * proxy and OAuth calls (GATEWAY_ALLOW_PRIVATE_UPSTREAMS=false refuses these). Pure: no
 * DNS here. A caller that resolves a name must check every resolved address with
 * isPrivateAddress, or a public name pointing at 127.0.0.1 walks straight past this.
 */

/** [network, prefix length] pairs, IPv4 as a 32-bit number. */
const V4_BLOCKS: ReadonlyArray<readonly [number, number, string]> = [
  [v4('0.0.0.0'), 8, 'this network (0.0.0.0/8)'],
  [v4('10.0.0.0'), 8, 'private (10/8)'],
  [v4('100.64.0.0'), 10, 'shared address space (100.64/10)'],
  [v4('127.0.0.0'), 8, 'loopback (127/8)'],
  [v4('169.254.0.0'), 16, 'link-local (169.254/16)'],
  [v4('172.16.0.0'), 12, 'private (172.16/12)'],
  [v4('192.168.0.0'), 16, 'private (192.168/16)'],
  // Clouds' instance endpoints outside the blocks above: Oracle's metadata (192.0.0.192)
  // and Azure's platform endpoint (WireServer, 168.63.129.16: agent and health protocol).
  [v4('192.0.0.0'), 24, 'IETF protocol assignments (192.0.0/24)'],
  [v4('168.63.129.16'), 32, 'Azure platform endpoint (168.63.129.16)'],
  [v4('198.18.0.0'), 15, 'benchmarking (198.18/15)'],
  [v4('224.0.0.0'), 4, 'multicast (224/4)'],
  [v4('240.0.0.0'), 4, 'reserved (240/4, broadcast)'],
];

function v4(ip: string): number {
  const p = ip.split('.').map(Number);
  return ((p[0]! << 24) >>> 0) + (p[1]! << 16) + (p[2]! << 8) + p[3]!;
}

function inV4Block(addr: number, net: number, bits: number): boolean {
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return ((addr & mask) >>> 0) === ((net & mask) >>> 0);
}

/** Eight 16-bit groups, or null when the text is not an IPv6 address. */
function v6Groups(ip: string): number[] | null {
  let s = ip.toLowerCase();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (isIP(s) !== 6) return null;
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]!);
    s = s.slice(0, dotted.index) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') as [string, string] : [s, null];
  const h = head ? head.split(':') : [];
  const t = tail === null ? [] : tail ? tail.split(':') : [];
  const fill = tail === null ? [] : new Array(8 - h.length - t.length).fill('0');
  const groups = [...h, ...fill, ...t].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/**
 * The reason an IP literal is a loopback, private, link-local or unspecified address, or
 * null when it is public (or not an IP literal at all).
 */
export function privateAddressReason(ip: string): string | null {
  if (isIP(ip) === 4) {
    const n = v4(ip);
    for (const [net, bits, why] of V4_BLOCKS) if (inV4Block(n, net, bits)) return why;
    return null;
  }
  const g = v6Groups(ip);
  if (!g) return null;
  const upperZero = g.slice(0, 5).every((x) => x === 0);
  if (g.every((x) => x === 0)) return 'unspecified (::)';
  if (upperZero && g[5] === 0 && g[6] === 0 && g[7] === 1) return 'loopback (::1)';
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): judged by the IPv4 inside,
  // since the OS connects to that IPv4 address.
  if (upperZero && (g[5] === 0xffff || g[5] === 0)) {
    return privateAddressReason(`${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`);
  }
  // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address too.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    return privateAddressReason(`${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`);
  }
  // Where a relay or translator on the way would reach an IPv4 address, or a scope that is not
  // one host (a fourth review): 6to4 judged by the IPv4 it embeds, Teredo (its client address
  // is obfuscated in it), local-use NAT64 (a translator of the site's own), multicast.
  if (g[0] === 0x2002) return privateAddressReason(`${g[1]! >> 8}.${g[1]! & 0xff}.${g[2]! >> 8}.${g[2]! & 0xff}`);
  if (g[0] === 0x2001 && g[1] === 0) return 'Teredo (2001::/32)';
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'local-use NAT64 (64:ff9b:1::/48)';
  if ((g[0]! & 0xff00) === 0xff00) return 'multicast (ff00::/8)';
  if ((g[0]! & 0xfe00) === 0xfc00) return 'unique local (fc00::/7)';
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local (fe80::/10)';
  return null;
}

/** True for loopback, private, link-local and unspecified IPv4/IPv6 literals. */
export function isPrivateAddress(ip: string): boolean {
  return privateAddressReason(ip) !== null;
}

/**
 * The reason a host (as in a URL or a CONNECT line: a name, an IPv4 literal in any form
 * the WHATWG URL parser accepts, or an IPv6 literal with or without brackets) is private
 * by its text alone, or null. `localhost` and `*.localhost` count (RFC 6761: they resolve
 * to loopback). Other names are null here; resolve them and check each address.
 */
export function privateHostReason(host: string): string | null {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback (localhost)';
  if (isIP(h) === 6 || (h.includes('%') && isIP(h.slice(0, h.indexOf('%'))) === 6)) return privateAddressReason(h);
  // The URL parser turns 127.1, 0x7f.0.0.1 and 2130706433 into 127.0.0.1, as clients do.
  let canonical = h;
  try {
    canonical = new URL(`http://${h}/`).hostname;
  } catch {
    return null;
  }
  return isIP(canonical) === 4 ? privateAddressReason(canonical) : null;
}

export function isPrivateHostLiteral(host: string): boolean {
  return privateHostReason(host) !== null;
}
