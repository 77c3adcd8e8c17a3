import { createHash, randomBytes, sign, type KeyObject } from 'node:crypto';
import forge from 'node-forge';

/**
 * The few X.509 building blocks ca.ts and leaf.ts share. node-forge builds the ASN.1
 * (Node has no certificate builder); Node's OpenSSL makes the keys and the signatures.
 *
 * Why not forge's own `cert.sign()`: its RSA is pure JavaScript, about 20 ms per 2048-bit
 * signature on the proxy's event loop, against about 0.4 ms for the whole leaf when Node
 * signs (bench/certs/leaf.bench.ts). forge's key generation is slower still (seconds).
 */

export const DAY_MS = 24 * 60 * 60 * 1000;

/** Organisation name on every certificate the gateway makes. */
export const ORGANIZATION = 'Agent Gateway';

/**
 * A random positive 16-byte serial (hex), as forge wants it. forge writes the bytes as
 * the DER INTEGER unchanged, so the first byte must be 0x01..0x7f: a set top bit would
 * make the serial negative, and a leading 0x00 would be a non-minimal encoding that
 * strict parsers reject.
 */
export function randomSerialHex(): string {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) || 0x01;
  return b.toString('hex');
}

/** A Node public key as a forge public key (forge puts it into the certificate). */
export function forgePublicKey(key: KeyObject): forge.pki.PublicKey {
  return forge.pki.publicKeyFromPem(key.export({ type: 'spki', format: 'pem' }) as string);
}

// getTBSCertificate is public in forge (cert.sign uses it) but missing from @types/node-forge.
const getTBSCertificate = (forge.pki as unknown as {
  getTBSCertificate(cert: forge.pki.Certificate): forge.asn1.Asn1;
}).getTBSCertificate;

/** Index of subjectPublicKeyInfo in a v3 TBSCertificate (version, serial, signature, issuer, validity, subject, SPKI, extensions). */
const TBS_SPKI = 6;

/**
 * The parts of a public key that forge cannot represent (it knows RSA keys only): its
 * SubjectPublicKeyInfo, to put into the certificate in place of the stand-in RSA key forge
 * built it with, and the RFC 5280 subject key identifier (SHA-1 of the key's bit string).
 */
export interface ForeignPublicKey {
  spki: forge.asn1.Asn1;
  subjectKeyIdentifier: string;
}

export function foreignPublicKey(key: KeyObject): ForeignPublicKey {
  const der = key.export({ type: 'spki', format: 'der' });
  // decodeBitStrings off: forge otherwise parses a BIT STRING's contents as DER when they happen to read as DER
  // (a P-256 point 04 3f ... is an OCTET STRING of 63 bytes, about one key in 256), and the key bits are lost.
  // (@types/node-forge knows only the older `strict` flag; forge 1.x takes these options.)
  const fromDer = forge.asn1.fromDer as unknown as (bytes: forge.util.ByteBuffer, options: { decodeBitStrings: boolean }) => forge.asn1.Asn1;
  const spki = fromDer(forge.util.createBuffer(der.toString('binary')), { decodeBitStrings: false });
  const bits = (spki.value as forge.asn1.Asn1[])[1]!.value as string; // BIT STRING: unused-bits byte, then the key
  return { spki, subjectKeyIdentifier: createHash('sha1').update(Buffer.from(bits.slice(1), 'binary')).digest('binary') };
}

/** A subjectKeyIdentifier extension with a given value (forge would compute it from `cert.publicKey`). */
export function subjectKeyIdentifierExtension(ski: string): { id: string; name: string; value: forge.asn1.Asn1 } {
  return {
    id: forge.pki.oids['subjectKeyIdentifier']!,
    name: 'subjectKeyIdentifier',
    value: forge.asn1.create(forge.asn1.Class.UNIVERSAL, forge.asn1.Type.OCTETSTRING, false, ski),
  };
}

/**
 * Signs a forge certificate with SHA-256/RSA using Node's crypto and returns its PEM.
 * The same steps as forge's `cert.sign(key, sha256)`, with the signature made by OpenSSL.
 * With `subjectKey`, the certificate carries that key (an EC key) instead of `cert.publicKey`.
 */
export function signToPem(cert: forge.pki.Certificate, issuerKey: KeyObject, subjectKey?: ForeignPublicKey): string {
  const oid = forge.pki.oids['sha256WithRSAEncryption'];
  if (!oid) throw new Error('node-forge lacks the sha256WithRSAEncryption OID');
  cert.signatureOid = oid;
  cert.siginfo.algorithmOid = oid;
  cert.tbsCertificate = getTBSCertificate(cert);
  if (subjectKey) (cert.tbsCertificate.value as forge.asn1.Asn1[])[TBS_SPKI] = subjectKey.spki;
  const tbsDer = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
  cert.signature = sign('sha256', tbsDer, issuerKey).toString('binary');
  return forge.pki.certificateToPem(cert);
}

/** The subject key identifier of a certificate (binary string), computed if it has none. */
export function subjectKeyIdentifierBytes(cert: forge.pki.Certificate): string {
  const ext = cert.getExtension('subjectKeyIdentifier') as { subjectKeyIdentifier?: string } | undefined;
  if (ext?.subjectKeyIdentifier) return forge.util.hexToBytes(ext.subjectKeyIdentifier);
  return cert.generateSubjectKeyIdentifier().getBytes();
}

export function certificateFromPem(pem: string): forge.pki.Certificate {
  return forge.pki.certificateFromPem(pem);
}
