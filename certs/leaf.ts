import { X509Certificate, createPrivateKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { promisify } from 'node:util';
import forge from 'node-forge';
import type { CaMaterial } from './ca.js';
import {
  DAY_MS, ORGANIZATION, certificateFromPem, foreignPublicKey, forgePublicKey, randomSerialHex, signToPem, subjectKeyIdentifierBytes,
  subjectKeyIdentifierExtension, type ForeignPublicKey,
} from './x509.js';

/**
 * Leaf certificates for the hosts agents connect to, signed by the gateway CA.
 *
 * Key generation stays off the request path. The issuer makes ONE leaf key pair when it
 * is created (a P-256 pair takes about a millisecond, an RSA-2048 pair 0.1-0.5 s) and puts that public key into every
 * leaf, so `getLeaf` only builds and signs a certificate (about 0.4 ms; see
 * bench/certs/leaf.bench.ts) and a cached host costs one Map lookup (well under 1 µs).
 *
 * Why one key for every host is acceptable here:
 * - The only holder of the private key is this proxy process, in memory; it is never
 *   written to disk. A public CA requires a key per subscriber because subscribers are
 *   different parties; here there is one party, the proxy, and whoever takes its memory
 *   also takes the CA key, which is worse.
 * - Each host still gets its own certificate (its own serial, CN and SAN) signed by our
 *   CA, so a client verifying api.example.com only accepts the api.example.com leaf.
 * - Each issuer (each proxy process) has its own fresh key; restarting rotates it.
 * The cost is that a leaked leaf key would let its holder impersonate, to clients that
 * trust our CA, every host the proxy issued a still-valid leaf for, not just one: which
 * is why the key stays in memory only.
 */

const generateKeyPairAsync = promisify(generateKeyPair);

/** Apple and the CA/B Forum cap TLS server certificates at 398 days; we stay under. */
export const MAX_LEAF_VALIDITY_DAYS = 397;

export interface LeafCert {
  /** The normalised name the certificate is for (lowercase, no trailing dot, no IPv6 brackets). */
  readonly hostname: string;
  readonly certPem: string;
  /** The issuer's shared leaf key, PKCS#8 PEM (the same for every leaf of one issuer). */
  readonly keyPem: string;
  readonly notAfter: Date;
}

export interface LeafIssuerOptions {
  /** Signed certificates kept, least recently used evicted. Default 1000. */
  cacheSize?: number;
  /**
   * The shared leaf key: `ec` (P-256, the default) or `rsa`. The proxy signs every full
   * handshake with it: ~50 µs with P-256 against ~430 µs with RSA-2048 on the bench machine
   * (docs/performance.md); every TLS client in use verifies ECDSA.
   */
  keyType?: 'ec' | 'rsa';
  /** RSA modulus of the shared leaf key (keyType rsa). Default 2048; less is refused by OpenSSL's default security level. */
  keyBits?: number;
  /** notAfter minus notBefore (notBefore is now minus one day). Default and maximum 397. */
  validityDays?: number;
  /** A cached leaf is re-signed once it has less than this left. Default 30. */
  renewBeforeDays?: number;
  /** Wall-clock milliseconds (tests). TLS clients check certificates against real time, not the service clock. */
  now?: () => number;
}

export interface LeafIssuerStats {
  readonly cached: number;
  readonly hits: number;
  /** Certificates signed (cache misses and renewals). */
  readonly issued: number;
}

export interface LeafIssuer {
  /** The certificate for a hostname or IP literal: cached, or signed now (synchronous). Throws InvalidHostnameError. */
  getLeaf(hostname: string): LeafCert;
  /** Issues certificates ahead of need, yielding to the event loop between batches. */
  warm(hostnames: Iterable<string>): Promise<void>;
  /** The shared leaf private key (PKCS#8 PEM). */
  readonly keyPem: string;
  /** The CA certificate the leaves chain to. */
  readonly caCertPem: string;
  stats(): LeafIssuerStats;
}

/** A name a certificate cannot (or must not) be issued for. */
export class InvalidHostnameError extends Error {
  readonly code = 'invalid_hostname';
  constructor(readonly hostname: string, reason: string) {
    super(`cannot issue a certificate for ${JSON.stringify(hostname.slice(0, 300))}: ${reason}`);
    this.name = 'InvalidHostnameError';
  }
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const NUMERIC_LABEL = /^(?:\d+|0x[0-9a-f]*)$/;

/**
 * Lowercases, drops one trailing dot and IPv6 brackets, and checks the result is an IP
 * literal or a DNS name (LDH labels, underscores tolerated, an optional leading `*.`).
 * A name whose last label is a number (`1.2.3`, `0x7f.1`) is refused: resolvers read
 * those as IPv4 addresses, so a DNS SAN for them would not mean what it says.
 */
export function normalizeLeafHostname(hostname: string): { name: string; ip: Buffer | null } {
  let h = hostname.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.') && !h.endsWith('..')) h = h.slice(0, -1);
  const family = isIP(h);
  if (family === 4) return { name: h, ip: Buffer.from(h.split('.').map(Number)) };
  if (family === 6) {
    if (h.includes('%')) throw new InvalidHostnameError(hostname, 'an IPv6 zone id cannot be in a certificate');
    return { name: h, ip: ipv6Bytes(h) };
  }
  if (h.length === 0 || h.length > 253) throw new InvalidHostnameError(hostname, 'a DNS name is 1 to 253 characters');
  const labels = h.split('.');
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    if (i === 0 && label === '*' && labels.length > 2) continue;
    if (!LABEL.test(label)) throw new InvalidHostnameError(hostname, 'not an IP address or a DNS name');
  }
  if (NUMERIC_LABEL.test(labels[labels.length - 1]!)) {
    throw new InvalidHostnameError(hostname, 'a name ending in a number reads as an IPv4 address');
  }
  return { name: h, ip: null };
}

/** 16 bytes of an IPv6 address that net.isIP already accepted (with an optional dotted IPv4 tail). */
function ipv6Bytes(addr: string): Buffer {
  let s = addr;
  const tail: number[] = [];
  if (s.includes('.')) {
    const cut = s.lastIndexOf(':');
    const v4 = s.slice(cut + 1).split('.').map(Number) as [number, number, number, number];
    tail.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
    s = s.slice(0, cut + 1);
    if (!s.endsWith('::')) s = s.slice(0, -1);
  }
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  let words: number[];
  const gap = s.indexOf('::');
  if (gap >= 0) {
    const left = groups(s.slice(0, gap));
    const right = [...groups(s.slice(gap + 2)), ...tail];
    words = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  } else {
    words = [...groups(s), ...tail];
  }
  const out = Buffer.alloc(16);
  words.forEach((w, i) => out.writeUInt16BE(w, i * 2));
  return out;
}

interface CacheEntry {
  leaf: LeafCert;
  ip: Buffer | null;
  renewAtMs: number;
}

export async function createLeafIssuer(ca: Pick<CaMaterial, 'certPem' | 'keyPem'>, options: LeafIssuerOptions = {}): Promise<LeafIssuer> {
  const cacheSize = options.cacheSize ?? 1000;
  const keyBits = options.keyBits ?? 2048;
  const validityDays = options.validityDays ?? MAX_LEAF_VALIDITY_DAYS;
  const renewBeforeMs = (options.renewBeforeDays ?? 30) * DAY_MS;
  const now = options.now ?? Date.now;
  if (!Number.isInteger(cacheSize) || cacheSize < 1) throw new RangeError('cacheSize must be a positive integer');
  if (!Number.isInteger(keyBits) || keyBits < 2048) throw new RangeError('keyBits must be an integer of at least 2048');
  if (!(validityDays >= 2 && validityDays <= MAX_LEAF_VALIDITY_DAYS)) {
    throw new RangeError(`validityDays must be between 2 and ${MAX_LEAF_VALIDITY_DAYS}`);
  }
  if (!(renewBeforeMs >= 0 && renewBeforeMs < (validityDays - 1) * DAY_MS)) {
    throw new RangeError('renewBeforeDays must be at least 0 and less than the validity left after backdating');
  }

  const caKey: KeyObject = createPrivateKey(ca.keyPem);
  const caX509 = new X509Certificate(ca.certPem);
  if (!caX509.ca) throw new RangeError('the issuer certificate is not a CA');
  if (!caX509.checkPrivateKey(caKey)) throw new RangeError('the CA key does not belong to the CA certificate');
  const caCert = certificateFromPem(ca.certPem); // after the checks: forge reads RSA certificates only
  const caNotAfterMs = new Date(caX509.validTo).getTime();
  const caSubject = caCert.subject.attributes;
  const caKeyId = subjectKeyIdentifierBytes(caCert);

  // The one leaf key pair (see the top of this file). Async: OpenSSL's thread pool, not the event loop.
  const keyType = options.keyType ?? 'ec';
  if (keyType !== 'ec' && keyType !== 'rsa') throw new RangeError('keyType must be ec or rsa');
  const leafKeys =
    keyType === 'ec'
      ? await generateKeyPairAsync('ec', { namedCurve: 'prime256v1' })
      : await generateKeyPairAsync('rsa', { modulusLength: keyBits, publicExponent: 0x10001 });
  // forge builds certificates around RSA keys only: an EC key goes in as a stand-in (the
  // CA's public key) that signToPem replaces with the real SubjectPublicKeyInfo.
  const ecKey: ForeignPublicKey | undefined = keyType === 'ec' ? foreignPublicKey(leafKeys.publicKey) : undefined;
  const leafPublic = ecKey ? caCert.publicKey : forgePublicKey(leafKeys.publicKey);
  const keyPem = leafKeys.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

  // Map iteration order is insertion order: re-inserting on a hit makes the first key the least recent.
  const cache = new Map<string, CacheEntry>();
  let hits = 0;
  let issued = 0;

  function issue(name: string, ip: Buffer | null, nowMs: number): CacheEntry {
    const notBefore = nowMs - DAY_MS; // agent VMs with a clock a little behind still accept it
    const wanted = notBefore + validityDays * DAY_MS;
    const notAfter = Math.min(wanted, caNotAfterMs); // a leaf never outlives its CA
    if (notAfter <= nowMs) throw new Error('the gateway CA has expired; no leaf can be issued');

    const cert = forge.pki.createCertificate();
    cert.publicKey = leafPublic;
    cert.serialNumber = randomSerialHex();
    cert.validity.notBefore = new Date(notBefore);
    cert.validity.notAfter = new Date(notAfter);
    // ub-common-name is 64 characters; longer DNS names go in the SAN only (clients read the SAN anyway).
    const subject: forge.pki.CertificateField[] = [];
    if (name.length <= 64) subject.push({ name: 'commonName', value: name });
    subject.push({ name: 'organizationName', value: ORGANIZATION });
    cert.setSubject(subject);
    cert.setIssuer(caSubject);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      // keyEncipherment is RSA key transport; an ECDSA key only signs.
      ecKey ? { name: 'keyUsage', digitalSignature: true, critical: true } : { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [ip ? { type: 7, value: ip.toString('binary') } : { type: 2, value: name }] },
      ecKey ? subjectKeyIdentifierExtension(ecKey.subjectKeyIdentifier) : { name: 'subjectKeyIdentifier' },
      { name: 'authorityKeyIdentifier', keyIdentifier: caKeyId },
    ]);
    const certPem = signToPem(cert, caKey, ecKey);
    issued++;
    const renewAtMs = notAfter === caNotAfterMs ? notAfter : notAfter - renewBeforeMs;
    return { leaf: { hostname: name, certPem, keyPem, notAfter: new Date(notAfter) }, ip, renewAtMs };
  }

  function getLeaf(hostname: string): LeafCert {
    const nowMs = now();
    // Fast path: only normalised, valid names are ever keys, so a name already in its
    // normal form (the common case) skips normalisation.
    let name = hostname;
    let ip: Buffer | null;
    let entry = cache.get(name);
    if (entry) {
      ip = entry.ip;
    } else {
      ({ name, ip } = normalizeLeafHostname(hostname));
      entry = cache.get(name);
    }
    if (entry && nowMs < entry.renewAtMs) {
      hits++;
      cache.delete(name);
      cache.set(name, entry);
      return entry.leaf;
    }
    const fresh = issue(name, ip, nowMs);
    cache.delete(name);
    cache.set(name, fresh);
    if (cache.size > cacheSize) cache.delete(cache.keys().next().value as string);
    return fresh.leaf;
  }

  async function warm(hostnames: Iterable<string>): Promise<void> {
    let n = 0;
    for (const h of hostnames) {
      getLeaf(h);
      if (++n % 16 === 0) await nextTurn(); // 16 signatures is a few ms; let requests through
    }
  }

  return {
    getLeaf,
    warm,
    keyPem,
    caCertPem: ca.certPem,
    stats: () => ({ cached: cache.size, hits, issued }),
  };
}
