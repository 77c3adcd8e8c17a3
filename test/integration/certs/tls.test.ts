import { expect } from 'chai';
import { X509Certificate, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Keyring } from '../../../lib/crypto.js';
import { generateCa, loadOrCreateCa, type GatewayCa } from '../../../certs/ca.js';
import { createLeafIssuer, type LeafIssuer } from '../../../certs/leaf.js';
import { createTlsServerOptions } from '../../../certs/mitm.js';

interface Handshake {
  authorized: boolean;
  authorizationError: string | null;
  peer: X509Certificate;
  body: string;
}

/** Connects, records the verdict, sends one GET and reads the answer. */
function handshake(options: tls.ConnectionOptions): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ ...options, rejectUnauthorized: false }, () => {
      const peer = socket.getPeerX509Certificate()!;
      const authorized = socket.authorized;
      const authorizationError = socket.authorizationError ? String(socket.authorizationError) : null;
      let body = '';
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (body += d));
      socket.on('end', () => resolve({ authorized, authorizationError, peer, body }));
      socket.write(`GET / HTTP/1.1\r\nHost: ${options.servername ?? options.host}\r\nConnection: close\r\n\r\n`);
    });
    socket.on('error', reject);
  });
}

describe('certs: leaves verify against the gateway CA with Node tls', () => {
  let dataDir: string;
  let ca: GatewayCa;
  let issuer: LeafIssuer;
  let server: https.Server;
  let port: number;

  before(async () => {
    dataDir = await fs.mkdtemp(path.join(tmpdir(), 'gw-certs-tls-'));
    ca = await loadOrCreateCa({ dataDir, keyring: new Keyring([randomBytes(32)]) });
    issuer = await createLeafIssuer(ca);
    server = https.createServer(createTlsServerOptions(issuer, { defaultHostname: '127.0.0.1' }), (req, res) => {
      res.end(`hello ${req.headers.host}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('a DNS name, chosen by SNI, is authorized by a client that trusts only the CA', async () => {
    const r = await handshake({ host: '127.0.0.1', port, servername: 'api.example.test', ca: ca.certPem });
    expect(r.authorizationError).to.equal(null);
    expect(r.authorized).to.equal(true);
    expect(r.peer.subjectAltName).to.equal('DNS:api.example.test');
    expect(r.peer.checkIssued(new X509Certificate(ca.certPem))).to.equal(true);
    expect(r.body).to.include('hello api.example.test');
  });

  it('an IP literal (no SNI) is authorized through its IP SAN', async () => {
    const r = await handshake({ host: '127.0.0.1', port, ca: ca.certPem });
    expect(r.authorizationError).to.equal(null);
    expect(r.authorized).to.equal(true);
    expect(r.peer.subjectAltName).to.equal('IP Address:127.0.0.1');
  });

  it('serves the cached certificate to a second connection', async () => {
    const a = await handshake({ host: '127.0.0.1', port, servername: 'cached.example.test', ca: ca.certPem });
    const b = await handshake({ host: '127.0.0.1', port, servername: 'cached.example.test', ca: ca.certPem });
    expect(b.peer.fingerprint256).to.equal(a.peer.fingerprint256);
    expect(b.peer.fingerprint256).to.equal(new X509Certificate(issuer.getLeaf('cached.example.test').certPem).fingerprint256);
  });

  it('is not authorized by a client that trusts another CA', async () => {
    const other = await generateCa();
    const r = await handshake({ host: '127.0.0.1', port, servername: 'api.example.test', ca: other.certPem });
    expect(r.authorized).to.equal(false);
    expect(r.authorizationError).to.match(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify/i);
  });

  it('a certificate for one host does not pass for another', async () => {
    // No SNI, so the 127.0.0.1 leaf comes back; the client expects a DNS name.
    const err = await new Promise<Error>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca: ca.certPem, checkServerIdentity: (_h, cert) => tls.checkServerIdentity('api.example.test', cert) });
      s.on('error', resolve);
      s.on('secureConnect', () => resolve(new Error('connected')));
    });
    expect((err as NodeJS.ErrnoException).code).to.equal('ERR_TLS_CERT_ALTNAME_INVALID');
  });
});
