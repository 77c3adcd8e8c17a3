import { X509Certificate } from 'node:crypto';

/**
 * Just enough DER reading to check what Node's X509Certificate does not expose:
 * extension criticality, basicConstraints, keyUsage bits, key identifiers, the raw serial.
 * (Tests do not import node-forge: certs/ is its only importer.)
 */
export interface DerNode {
  tag: number;
  content: Buffer;
  children: DerNode[];
}

function read(buf: Buffer, pos: number): { node: DerNode; end: number } {
  const tag = buf[pos]!;
  let len = buf[pos + 1]!;
  let at = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[at + i]!;
    at += n;
  }
  const content = buf.subarray(at, at + len);
  const children: DerNode[] = [];
  if (tag & 0x20) {
    let p = 0;
    while (p < content.length) {
      const r = read(content, p);
      children.push(r.node);
      p = r.end;
    }
  }
  return { node: { tag, content, children }, end: at + len };
}

export function parseDer(buf: Buffer): DerNode {
  return read(buf, 0).node;
}

function oidString(b: Buffer): string {
  const parts = [Math.floor(b[0]! / 40), b[0]! % 40];
  let v = 0;
  for (const byte of b.subarray(1)) {
    v = v * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      parts.push(v);
      v = 0;
    }
  }
  return parts.join('.');
}

export interface Extension {
  critical: boolean;
  /** The extnValue contents, parsed. */
  value: DerNode;
}

export const OID = {
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
} as const;

export function tbsOf(pem: string): DerNode {
  return parseDer(new X509Certificate(pem).raw).children[0]!;
}

export function serialBytes(pem: string): Buffer {
  return tbsOf(pem).children[1]!.content; // [0] version, serialNumber, ...
}

export function extensions(pem: string): Map<string, Extension> {
  const tbs = tbsOf(pem);
  const wrapper = tbs.children.find((c) => c.tag === 0xa3); // [3] extensions
  const out = new Map<string, Extension>();
  for (const ext of wrapper?.children[0]?.children ?? []) {
    const [oid, second, third] = ext.children as [DerNode, DerNode, DerNode | undefined];
    const critical = third !== undefined && second.tag === 0x01 && second.content[0] === 0xff;
    const octets = third ?? second;
    out.set(oidString(oid.content), { critical, value: parseDer(octets.content) });
  }
  return out;
}
