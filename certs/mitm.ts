import { X509Certificate, generateKeyPair } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import { promisify } from 'node:util';
import type { CaMaterial } from './ca.js';
import type { LeafIssuer } from './leaf.js';

/**
 * What the TLS-terminating side of the proxy needs from certs/: an SNI callback for a
 * server the proxy owns, and the certificate hooks and CA directory for http-mitm-proxy.
 * certs/ does not import http-mitm-proxy (ARCHITECTURE.md layering); the shapes below are
 * structural and match http-mitm-proxy 1.1.0 (dist/lib/proxy.js, dist/lib/ca.js).
 *
 * ## Plugging it into http-mitm-proxy (proxy/ does this, bin/ passes the pieces in)
 *
 *   const ca = await loadOrCreateCa({ dataDir, keyring, log });        // certs/ca.ts
 *   const issuer = await createLeafIssuer(ca);                        // certs/leaf.ts
 *   const sslCaDir = await prepareMitmCaDir(dataDir, ca);             // <dataDir>/mitm-proxy
 *   const proxy = new Proxy();
 *   proxy.use(mitmCertificateModule(issuer, sslCaDir));               // before any traffic
 *   proxy.listen({ host, port, sslCaDir, forceSNI: true }, (err) => { ... });
 *
 * Why each step, i.e. what breaks without it:
 * 1. `sslCaDir` is always passed. Without it listen() uses `<cwd>/.http-mitm-proxy`.
 * 2. prepareMitmCaDir() runs before listen(). listen() always calls its `CA.create(sslCaDir)`,
 *    which GENERATES a new CA (forge, pure JS, seconds, private key written in clear)
 *    unless `certs/ca.pem` exists, in which case it loads `certs/ca.pem`,
 *    `keys/ca.private.key` and `keys/ca.public.key`. prepareMitmCaDir writes our public CA
 *    certificate and public key there, and as `ca.private.key` a throwaway placeholder
 *    key, NOT the gateway CA key: the library never holds our CA key, and anything its
 *    own `ca` object might sign fails verification against our CA (fails closed).
 * 3. `use(mitmCertificateModule(...))` replaces both certificate hooks:
 *    - onCertificateRequired: the default returns `${sslCaDir}/keys/${hostname}.key`, with
 *      `hostname` taken from the agent's CONNECT line (a path the agent controls), and
 *      uses those files when they exist. Ours returns paths that never exist, so the
 *      library reads no key or certificate from disk and always asks onCertificateMissing.
 *    - onCertificateMissing: the default makes a fresh RSA key with forge for every host
 *      (hundreds of ms, blocking the event loop) and writes it in clear under sslCaDir.
 *      Ours answers synchronously from the issuer's memory.
 *    Do not `use(Proxy.wildcard)` after it: that module replaces onCertificateRequired.
 * 4. `forceSNI: true`: the library then adds an SNI context per host to ONE internal HTTPS
 *    server. Without it, it starts a new listening HTTPS server per hostname, unbounded.
 *    CONNECTs to IPv4 literals get a server of their own in either mode (no SNI for IPs).
 *
 * Known limits of http-mitm-proxy 1.1.0 that the wiring inherits:
 * - It keeps the first certificate it got for a host for the life of the Proxy (its
 *   sslServers map / addContext), so our renewal does not reach it: leaves last 397 days,
 *   restart the proxy at least yearly (any deploy does).
 * - It takes the CONNECT host as `req.url.split(':')[0]`, so an IPv6 literal
 *   (`[2001:db8::1]:443`) arrives as `[`; the issuer refuses it and the library reports
 *   OPEN_HTTPS_SERVER_ERROR. IPv6 literals cannot be intercepted through it.
 * - When a certificate hook fails (the issuer refuses a malformed CONNECT host, with an
 *   InvalidHostnameError, code 'invalid_hostname'), it calls onError(null, err,
 *   'OPEN_HTTPS_SERVER_ERROR') and leaves the client's socket open. So proxy/ should
 *   refuse bad CONNECT targets in onConnect (the allowlist stage), before a certificate
 *   is asked for; normalizeLeafHostname() (leaf.ts) is the same check the issuer makes.
 */

const generateKeyPairAsync = promisify(generateKeyPair);

/** Node's `SNICallback` (tls.createServer / https.createServer option). */
export type SniCallback = (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void) => void;

export interface SniCallbackOptions {
  /** Secure contexts kept, least recently used evicted. Default 1000 (match the issuer's cache). */
  cacheSize?: number;
}

/**
 * An SNI callback serving each host's leaf from `issuer`. `tls.createSecureContext` parses
 * the key and certificate (a fraction of a millisecond), so contexts are cached per host;
 * a context is rebuilt when the issuer hands out a different certificate (renewal, or
 * eviction from the issuer's cache). Names the issuer refuses fail the handshake.
 */
export function createSniCallback(issuer: LeafIssuer, options: SniCallbackOptions = {}): SniCallback {
  const cacheSize = options.cacheSize ?? 1000;
  if (!Number.isInteger(cacheSize) || cacheSize < 1) throw new RangeError('cacheSize must be a positive integer');
  const contexts = new Map<string, { certPem: string; context: SecureContext }>();
  return (servername, cb) => {
    let context: SecureContext;
    try {
      const leaf = issuer.getLeaf(servername);
      const hit = contexts.get(leaf.hostname);
      if (hit && hit.certPem === leaf.certPem) {
        contexts.delete(leaf.hostname);
        contexts.set(leaf.hostname, hit);
        context = hit.context;
      } else {
        context = createSecureContext({ key: leaf.keyPem, cert: leaf.certPem });
        contexts.delete(leaf.hostname);
        contexts.set(leaf.hostname, { certPem: leaf.certPem, context });
        if (contexts.size > cacheSize) contexts.delete(contexts.keys().next().value as string);
      }
    } catch (err) {
      cb(err as Error);
      return;
    }
    cb(null, context);
  };
}

/**
 * Options for `tls.createServer` / `https.createServer`: the SNI callback, plus the leaf
 * of `defaultHostname` for clients that send no SNI (clients never send it for IP literals).
 * That default certificate is fixed when the server is made (no renewal): fine for tests
 * and fake upstreams, which is what this is for.
 */
export function createTlsServerOptions(
  issuer: LeafIssuer,
  options: SniCallbackOptions & { defaultHostname: string },
): { SNICallback: SniCallback; key: string; cert: string } {
  const fallback = issuer.getLeaf(options.defaultHostname);
  return { SNICallback: createSniCallback(issuer, options), key: fallback.keyPem, cert: fallback.certPem };
}

// ---------------------------------------------------------------------------------------
// http-mitm-proxy

/** http-mitm-proxy's ICertDetails. */
export interface MitmCertificateFiles {
  keyFile: string;
  certFile: string;
  hosts?: string[];
}

/** What http-mitm-proxy's onCertificateMissing callback reads (proxy.js, getHttpsServer). */
export interface MitmCertificateData {
  keyFileData: string;
  certFileData: string;
  hosts: string[];
}

/** The module to pass to `proxy.use()`. */
export interface MitmCertificateModule {
  onCertificateRequired(hostname: string, callback: (error: Error | null, files: MitmCertificateFiles) => void): void;
  onCertificateMissing(
    ctx: { hostname: string },
    files: MitmCertificateFiles,
    callback: (error: Error | null, data?: MitmCertificateData) => void,
  ): void;
}

export const MITM_DIR_NAME = 'mitm-proxy';
/** Under sslCaDir; prepareMitmCaDir removes it, so the paths onCertificateRequired names never exist. */
const NEVER_ON_DISK = 'served-from-memory';
const PLACEHOLDER_MARKER = 'agent-gateway placeholder';

/**
 * Certificate hooks for http-mitm-proxy that serve every leaf from `issuer` (memory) and
 * never touch disk. See the top of this file for why.
 */
export function mitmCertificateModule(issuer: LeafIssuer, sslCaDir: string): MitmCertificateModule {
  const files: MitmCertificateFiles = {
    keyFile: path.join(sslCaDir, NEVER_ON_DISK, 'leaf.key'),
    certFile: path.join(sslCaDir, NEVER_ON_DISK, 'leaf.pem'),
  };
  return {
    onCertificateRequired(hostname, callback) {
      callback(null, { ...files, hosts: [hostname] });
    },
    onCertificateMissing(ctx, _files, callback) {
      let leaf;
      try {
        leaf = issuer.getLeaf(ctx.hostname);
      } catch (err) {
        callback(err as Error);
        return;
      }
      // `hosts` keeps the library's own spelling of the host: it keys its server map by it.
      callback(null, { keyFileData: leaf.keyPem, certFileData: leaf.certPem, hosts: [ctx.hostname] });
    },
  };
}

/**
 * Makes `<dataDir>/mitm-proxy` the directory to pass http-mitm-proxy as `sslCaDir`, laid
 * out so its CA.create() loads instead of generating: certs/ca.pem (our CA certificate),
 * keys/ca.public.key (our CA public key), keys/ca.private.key (a placeholder key that
 * signs nothing; the gateway CA key stays sealed in <dataDir>/ca). Idempotent; safe to
 * run from several processes at once (each file is written to a temp name and renamed).
 * Returns the directory.
 */
export async function prepareMitmCaDir(dataDir: string, ca: Pick<CaMaterial, 'certPem'>): Promise<string> {
  const sslCaDir = path.join(dataDir, MITM_DIR_NAME);
  await fs.mkdir(path.join(sslCaDir, 'certs'), { recursive: true, mode: 0o700 });
  await fs.mkdir(path.join(sslCaDir, 'keys'), { recursive: true, mode: 0o700 });
  await fs.rm(path.join(sslCaDir, NEVER_ON_DISK), { recursive: true, force: true });

  const publicKeyPem = new X509Certificate(ca.certPem).publicKey.export({ type: 'spki', format: 'pem' }) as string;
  await replaceIfDifferent(path.join(sslCaDir, 'certs', 'ca.pem'), ca.certPem, 0o644);
  await replaceIfDifferent(path.join(sslCaDir, 'keys', 'ca.public.key'), publicKeyPem, 0o644);

  const placeholderPath = path.join(sslCaDir, 'keys', 'ca.private.key');
  const current = await fs.readFile(placeholderPath, 'utf8').catch(() => '');
  if (!current.includes(PLACEHOLDER_MARKER)) {
    // forge's PEM reader skips text before -----BEGIN, so the file can explain itself.
    const { privateKey } = await generateKeyPairAsync('rsa', { modulusLength: 1024 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    await replaceIfDifferent(
      placeholderPath,
      `# ${PLACEHOLDER_MARKER}: http-mitm-proxy insists on loading a CA key from here. This key\n` +
        '# is NOT the gateway CA key (that is sealed in ../../ca/ca.key.enc) and signs nothing.\n' +
        pem,
      0o600,
    );
  }
  return sslCaDir;
}

async function replaceIfDifferent(file: string, content: string, mode: number): Promise<void> {
  const current = await fs.readFile(file, 'utf8').catch(() => null);
  if (current === content) return;
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    await fs.writeFile(tmp, content, { mode, flag: 'wx' });
    await fs.chmod(tmp, mode);
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}
