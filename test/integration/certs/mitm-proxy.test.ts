import { expect } from 'chai';
import { X509Certificate, createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { Proxy } from 'http-mitm-proxy';
import { Keyring } from '../../../lib/crypto.js';
import { loadOrCreateCa, type GatewayCa } from '../../../certs/ca.js';
import { createLeafIssuer, type LeafIssuer } from '../../../certs/leaf.js';
import { mitmCertificateModule, prepareMitmCaDir } from '../../../certs/mitm.js';

/**
 * The wiring certs/mitm.ts documents, run against the real http-mitm-proxy: the library
 * must present our leaves, load (not generate) its CA, and write no keys of its own.
 * The proxy answers every intercepted request itself; upstream forwarding is proxy/'s test.
 */

const ON_DISK = ['certs/ca.pem', 'keys/ca.private.key', 'keys/ca.public.key'];

interface Through {
  authorized: boolean;
  authorizationError: string | null;
  peer: X509Certificate;
  body: string;
}

function throughProxy(proxyPort: number, target: string, tlsOptions: tls.ConnectionOptions): Promise<Through> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: target });
    req.on('error', reject);
    req.on('connect', (res, raw) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`));
      const socket = tls.connect({ ...tlsOptions, socket: raw, rejectUnauthorized: false }, () => {
        const peer = socket.getPeerX509Certificate()!;
        const authorized = socket.authorized;
        const authorizationError = socket.authorizationError ? String(socket.authorizationError) : null;
        let body = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => (body += d));
        socket.on('end', () => resolve({ authorized, authorizationError, peer, body }));
        socket.write(`GET /v1/thing HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`);
      });
      socket.on('error', reject);
    });
    req.end();
  });
}

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...(await listFiles(path.join(dir, e.name))).map((f) => `${e.name}/${f}`));
    else out.push(e.name);
  }
  return out.sort();
}

for (const forceSNI of [true, false]) {
  describe(`certs/mitm with http-mitm-proxy (forceSNI: ${forceSNI})`, () => {
    let dataDir: string;
    let ca: GatewayCa;
    let issuer: LeafIssuer;
    let sslCaDir: string;
    let proxy: Proxy;
    let proxyPort: number;
    const cwdDefault = path.resolve(process.cwd(), '.http-mitm-proxy');
    let cwdDefaultExisted: boolean;
    const saved = { debug: console.debug, info: console.info };

    before(async () => {
      cwdDefaultExisted = existsSync(cwdDefault);
      console.debug = () => {}; // the library narrates every server it starts
      console.info = () => {};
      dataDir = await fs.mkdtemp(path.join(tmpdir(), 'gw-certs-mitm-'));
      ca = await loadOrCreateCa({ dataDir, keyring: new Keyring([randomBytes(32)]) });
      issuer = await createLeafIssuer(ca);
      sslCaDir = await prepareMitmCaDir(dataDir, ca);
      proxy = new Proxy();
      proxy.use(mitmCertificateModule(issuer, sslCaDir));
      proxy.onRequest((ctx, _callback) => {
        // Answer here instead of forwarding (not calling the callback ends the chain).
        ctx.proxyToClientResponse.writeHead(200, { 'content-type': 'text/plain' });
        ctx.proxyToClientResponse.end(`intercepted ${ctx.clientToProxyRequest.headers.host}`);
      });
      await new Promise<void>((resolve, reject) =>
        proxy.listen({ host: '127.0.0.1', port: 0, sslCaDir, forceSNI }, (err?: Error | null) => (err ? reject(err) : resolve())),
      );
      proxyPort = proxy.httpPort;
    });

    after(async () => {
      proxy.close();
      console.debug = saved.debug;
      console.info = saved.info;
      await fs.rm(dataDir, { recursive: true, force: true });
    });

    it('presents our leaf for a DNS name, authorized by a client that trusts only the gateway CA', async () => {
      const r = await throughProxy(proxyPort, 'api.example.test:443', { servername: 'api.example.test', ca: ca.certPem });
      expect(r.authorizationError).to.equal(null);
      expect(r.authorized).to.equal(true);
      expect(r.peer.subjectAltName).to.equal('DNS:api.example.test');
      expect(r.peer.checkIssued(new X509Certificate(ca.certPem))).to.equal(true);
      expect(r.peer.publicKey.equals(createPublicKey(createPrivateKey(issuer.keyPem)))).to.equal(true);
      expect(r.body).to.include('intercepted api.example.test');
    });

    it('presents our leaf for an IPv4 literal', async () => {
      const r = await throughProxy(proxyPort, '10.20.30.40:443', { host: '10.20.30.40', ca: ca.certPem });
      expect(r.authorizationError).to.equal(null);
      expect(r.authorized).to.equal(true);
      expect(r.peer.subjectAltName).to.equal('IP Address:10.20.30.40');
    });

    it('presents the same certificate to the next connection for the host', async () => {
      const a = await throughProxy(proxyPort, 'again.example.test:443', { servername: 'again.example.test', ca: ca.certPem });
      const b = await throughProxy(proxyPort, 'again.example.test:443', { servername: 'again.example.test', ca: ca.certPem });
      expect(b.peer.fingerprint256).to.equal(a.peer.fingerprint256);
    });

    it('left the library no CA or keys of its own: sslCaDir holds our public CA and the placeholder only', async () => {
      expect(await listFiles(sslCaDir)).to.deep.equal(ON_DISK);
      expect(await fs.readFile(path.join(sslCaDir, 'certs', 'ca.pem'), 'utf8')).to.equal(ca.certPem);
      const placeholder = await fs.readFile(path.join(sslCaDir, 'keys', 'ca.private.key'), 'utf8');
      expect(placeholder).to.include('placeholder');
      expect(createPublicKey(placeholder).equals(createPublicKey(createPrivateKey(ca.keyPem)))).to.equal(false);
      // The library's loaded CA is ours (public part) with the inert key.
      expect(new X509Certificate(proxy.ca.getPem()).fingerprint256).to.equal(ca.fingerprint256);
      expect(existsSync(cwdDefault)).to.equal(cwdDefaultExisted);
    });

    it('refuses a certificate for a name the issuer refuses, and writes nothing', async () => {
      // http-mitm-proxy reports the failure as OPEN_HTTPS_SERVER_ERROR with no ctx and leaves
      // the client's socket open (mitm.ts notes it): we wait for the report, then hang up.
      const reported = new Promise<Error>((resolve) =>
        proxy.onError((_ctx, err, kind) => {
          if (kind === 'OPEN_HTTPS_SERVER_ERROR') resolve(err as Error);
        }),
      );
      const savedError = console.error;
      console.error = () => {};
      let raw: Duplex | undefined;
      try {
        const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: '..%2f..%2fkeys%2fca.private:443' });
        req.on('connect', (_res, socket) => {
          raw = socket;
          tls.connect({ socket, servername: 'x.example.test', ca: ca.certPem }).on('error', () => {});
        });
        req.on('error', () => {});
        req.end();
        const err = await reported;
        expect(err.message).to.include('cannot issue a certificate');
        expect((err as Error & { code?: string }).code).to.equal('invalid_hostname');
      } finally {
        console.error = savedError;
        raw?.destroy();
      }
      expect(await listFiles(sslCaDir)).to.deep.equal(ON_DISK);
    });
  });
}

describe('certs/mitm prepareMitmCaDir', () => {
  it('is idempotent and keeps the placeholder across starts', async () => {
    const dataDir = await fs.mkdtemp(path.join(tmpdir(), 'gw-certs-prep-'));
    try {
      const ca = await loadOrCreateCa({ dataDir, keyring: new Keyring([randomBytes(32)]) });
      const dir = await prepareMitmCaDir(dataDir, ca);
      expect(dir).to.equal(path.join(dataDir, 'mitm-proxy'));
      const keyFile = path.join(dir, 'keys', 'ca.private.key');
      const first = await fs.readFile(keyFile, 'utf8');
      expect((await fs.stat(keyFile)).mode & 0o777).to.equal(0o600);
      await Promise.all([prepareMitmCaDir(dataDir, ca), prepareMitmCaDir(dataDir, ca)]);
      expect(await fs.readFile(keyFile, 'utf8')).to.equal(first);
      expect(await listFiles(dir)).to.deep.equal(ON_DISK);
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
