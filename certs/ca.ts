import { X509Certificate, createPrivateKey, generateKeyPair, randomBytes, type KeyObject } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import forge from 'node-forge';
import type { Keyring } from '../lib/crypto.js';
import { DAY_MS, ORGANIZATION, forgePublicKey, randomSerialHex, signToPem } from './x509.js';

/**
 * The gateway CA: the root every agent VM trusts so the egress proxy can terminate its
 * TLS. Made once, on the first start, and kept for ten years; every later start (and
 * every other process on the same data directory) loads the same one, because agents
 * that trusted the old root would reject everything signed by a new one.
 *
 * On disk, under `<dataDir>/ca/`:
 *   ca.crt.pem  the public certificate (0644): operators copy it into agent images
 *   ca.key.enc  the private key PEM sealed with the keyring (0600), context 'gateway-ca-key'
 * The private key is never written in clear; it lives in memory only (GatewayCa.keyPem).
 */

const generateKeyPairAsync = promisify(generateKeyPair);

/** Additional authenticated data for the sealed CA key (lib/crypto.ts binds it). */
export const CA_KEY_CONTEXT = 'gateway-ca-key';
export const CA_DIR_NAME = 'ca';
export const CA_CERT_FILE = 'ca.crt.pem';
export const CA_KEY_FILE = 'ca.key.enc';
export const CA_VALIDITY_YEARS = 10;
/** Warn at start when the CA has less than this left (rotation means re-trusting every agent image). */
const EXPIRY_WARNING_MS = 90 * DAY_MS;
/** Temp dirs of a creation that crashed midway are removed once older than this. */
const STALE_TEMP_MS = 60 * 60 * 1000;
const TEMP_PREFIX = '.ca-tmp-';

/** What a CA is: enough to issue leaves and to tell agents what to trust. */
export interface CaMaterial {
  /** The CA certificate, PEM. Public. */
  readonly certPem: string;
  /** The CA private key, PKCS#8 PEM. In memory only; never log it. */
  readonly keyPem: string;
  /** SHA-256 fingerprint of the certificate, `AA:BB:...` (as Node's X509Certificate prints it). */
  readonly fingerprint256: string;
}

export interface GatewayCa extends CaMaterial {
  readonly certPath: string;
  readonly keyPath: string;
  readonly notAfter: Date;
  /** True when this call made the CA, false when it loaded an existing one. */
  readonly created: boolean;
}

/** The logging the certs module does: a pino Logger (lib/log.ts) fits. */
export interface CertsLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export type CaErrorCode =
  | 'ca_incomplete' // one of the two files is missing
  | 'ca_key_undecryptable' // wrong master key, or a damaged key file
  | 'ca_invalid' // the certificate does not parse or is not a CA
  | 'ca_key_mismatch' // the key does not belong to the certificate
  | 'ca_expired'
  | 'ca_dir_occupied'; // <dataDir>/ca exists, holds other files and no CA

/** Why the gateway CA cannot be loaded. Never answered by making a new CA. */
export class CaError extends Error {
  constructor(
    readonly code: CaErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CaError';
  }
}

export function caPaths(dataDir: string): { dir: string; certPath: string; keyPath: string } {
  const dir = path.join(dataDir, CA_DIR_NAME);
  return { dir, certPath: path.join(dir, CA_CERT_FILE), keyPath: path.join(dir, CA_KEY_FILE) };
}

export interface GenerateCaOptions {
  /** Defaults to `Agent Gateway CA <8 hex>`; the random suffix tells two installations apart. */
  commonName?: string;
  /** Wall-clock milliseconds (tests). */
  nowMs?: number;
}

/**
 * A new CA, in memory only (loadOrCreateCa persists it; tests and fake upstreams can use
 * it directly). RSA 2048: node-forge can only put RSA keys into certificates.
 */
export async function generateCa(options: GenerateCaOptions = {}): Promise<CaMaterial> {
  const now = options.nowMs ?? Date.now();
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', { modulusLength: 2048, publicExponent: 0x10001 });

  const cert = forge.pki.createCertificate();
  cert.publicKey = forgePublicKey(publicKey);
  cert.serialNumber = randomSerialHex();
  cert.validity.notBefore = new Date(now - DAY_MS); // tolerate agent clocks a little behind
  const notAfter = new Date(now);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + CA_VALIDITY_YEARS);
  cert.validity.notAfter = notAfter;
  const subject = [
    { name: 'commonName', value: options.commonName ?? `Agent Gateway CA ${randomBytes(4).toString('hex')}` },
    { name: 'organizationName', value: ORGANIZATION },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    // pathLen 0: this root signs leaves only, never another CA.
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  const certPem = signToPem(cert, privateKey);
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return { certPem, keyPem, fingerprint256: new X509Certificate(certPem).fingerprint256 };
}

export interface LoadOrCreateCaOptions {
  dataDir: string;
  keyring: Keyring;
  log?: CertsLog;
  /** Wall-clock milliseconds (tests). Certificates are checked by real clients against real time. */
  now?: () => number;
}

/**
 * Loads `<dataDir>/ca/`, creating it first when it does not exist.
 *
 * Creation is atomic for the pair: both files are written into a temp directory next to
 * it, then the directory is renamed into place. rename(2) of a directory fails when the
 * target exists and is not empty, so when two processes start at once exactly one CA
 * lands; the loser throws its own away and loads the winner's. Renaming the two files
 * separately could pair one process's certificate with the other's key.
 *
 * A CA that cannot be loaded (one file missing, a key the keyring cannot open, a key that
 * does not match) is a CaError and never a silent regeneration.
 */
export async function loadOrCreateCa(options: LoadOrCreateCaOptions): Promise<GatewayCa> {
  const { dataDir, keyring, log } = options;
  const now = options.now ?? Date.now;
  const paths = caPaths(dataDir);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  await removeStaleTempDirs(dataDir, Date.now()); // compared with file mtimes: wall time

  const [certExists, keyExists] = await Promise.all([exists(paths.certPath), exists(paths.keyPath)]);
  let created = false;
  if (!certExists && !keyExists) {
    created = await createCaDir(dataDir, paths.dir, keyring, now());
    if (created) log?.info({ ca_dir: paths.dir }, 'created the gateway CA');
    else log?.info({ ca_dir: paths.dir }, 'another process created the gateway CA first; loading it');
  } else if (!certExists || !keyExists) {
    throw new CaError(
      'ca_incomplete',
      `the gateway CA in ${paths.dir} is incomplete: ${certExists ? CA_KEY_FILE : CA_CERT_FILE} is missing. ` +
        'Restore it from backup; the gateway does not make a new CA over a half-present one, because agents trust the old one.',
    );
  }

  const ca = await loadCa(paths, keyring, created, now());
  const left = ca.notAfter.getTime() - now();
  if (left < EXPIRY_WARNING_MS) {
    log?.warn({ ca_not_after: ca.notAfter.toISOString(), fingerprint256: ca.fingerprint256 }, 'the gateway CA expires soon; plan a rotation');
  }
  log?.info({ fingerprint256: ca.fingerprint256, ca_cert: paths.certPath }, 'gateway CA loaded');
  return ca;
}

async function loadCa(
  paths: { dir: string; certPath: string; keyPath: string },
  keyring: Keyring,
  created: boolean,
  nowMs: number,
): Promise<GatewayCa> {
  const [certPem, keyBlob] = await Promise.all([
    fs.readFile(paths.certPath, 'utf8'),
    fs.readFile(paths.keyPath, 'utf8'),
  ]).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') {
      throw new CaError('ca_dir_occupied', `${paths.dir} exists but holds no gateway CA (${CA_CERT_FILE} and ${CA_KEY_FILE}); move it away or restore the CA`, { cause: err });
    }
    throw err;
  });

  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certPem);
  } catch (err) {
    throw new CaError('ca_invalid', `${paths.certPath} is not a PEM certificate`, { cause: err });
  }
  if (!x509.ca) throw new CaError('ca_invalid', `${paths.certPath} is not a CA certificate`);

  let keyPem: string;
  try {
    keyPem = keyring.decryptString(keyBlob.trim(), CA_KEY_CONTEXT);
  } catch (err) {
    throw new CaError(
      'ca_key_undecryptable',
      `cannot decrypt the gateway CA key ${paths.keyPath}: the master key this gateway started with is not the one ` +
        `that sealed it, or the file is damaged (${(err as Error).message}). Start with the original master key; ` +
        'the gateway does not replace the CA, because agents trust it.',
      { cause: err },
    );
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    throw new CaError('ca_key_undecryptable', `the decrypted gateway CA key ${paths.keyPath} is not a PEM private key`, { cause: err });
  }
  if (!x509.checkPrivateKey(key)) {
    throw new CaError('ca_key_mismatch', `the key in ${paths.keyPath} does not belong to the certificate ${paths.certPath}`);
  }
  const notAfter = new Date(x509.validTo);
  if (notAfter.getTime() <= nowMs) {
    throw new CaError('ca_expired', `the gateway CA ${paths.certPath} expired on ${notAfter.toISOString()}; rotate it (and re-trust agents)`);
  }
  return { certPem, keyPem, fingerprint256: x509.fingerprint256, certPath: paths.certPath, keyPath: paths.keyPath, notAfter, created };
}

/** Returns true when this process's CA landed, false when another process's did first. */
async function createCaDir(dataDir: string, caDir: string, keyring: Keyring, nowMs: number): Promise<boolean> {
  const fresh = await generateCa({ nowMs });
  const tmp = await fs.mkdtemp(path.join(dataDir, TEMP_PREFIX));
  try {
    await writeFileDurably(path.join(tmp, CA_CERT_FILE), fresh.certPem, 0o644);
    await writeFileDurably(path.join(tmp, CA_KEY_FILE), `${keyring.encrypt(fresh.keyPem, CA_KEY_CONTEXT)}\n`, 0o600);
    // mkdtemp makes 0700; the certificate is public and operators read it to build agent images.
    await fs.chmod(tmp, 0o755);
    await fsyncDir(tmp);
    await fs.rename(tmp, caDir);
  } catch (err) {
    await fs.rm(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return false; // lost the race
    throw err;
  }
  await fsyncDir(dataDir);
  return true;
}

async function writeFileDurably(file: string, data: string, mode: number): Promise<void> {
  const handle = await fs.open(file, 'wx', mode);
  try {
    await handle.writeFile(data, 'utf8');
    await handle.chmod(mode); // the open mode is filtered by the umask
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic.
  } finally {
    await handle.close();
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

async function removeStaleTempDirs(dataDir: string, nowMs: number): Promise<void> {
  const entries = await fs.readdir(dataDir, { withFileTypes: true });
  for (const e of entries) {
    if (!e.isDirectory() || !e.name.startsWith(TEMP_PREFIX)) continue;
    const p = path.join(dataDir, e.name);
    const st = await fs.stat(p).catch(() => null);
    if (st && nowMs - st.mtimeMs > STALE_TEMP_MS) await fs.rm(p, { recursive: true, force: true });
  }
}
