/**
 * The benchmark's upstream API: HTTPS on 127.0.0.1 with a certificate from a CA of its
 * own (written to BENCH_DIR/upstream-ca.pem for the proxies and the direct client to
 * trust), keep-alive 60 s like a real API.
 *
 *   GET  /small   a 16-byte JSON body
 *   GET  /large   1 MiB (application/octet-stream)
 *   POST any      reads the body, answers a small JSON with its length
 *   POST /park/*  reads the body and answers only when told (IPC `release`): the hold
 *                 test's floor, what a bare node:https server needs per held request
 *
 * Every answer carries `x-auth: real` when the request's Authorization was
 * `Bearer <BENCH_REAL_KEY>` (so the load generator can check that the gateway swapped the
 * placeholder for the real key on every request), `x-auth: other` or `x-auth: none` otherwise.
 */
import { createServer, type ServerOptions } from 'node:https';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { generateCa } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { createTlsServerOptions } from '../../certs/mitm.js';
import { ready, serveIpc } from './ipc.js';

const dir = process.env.BENCH_DIR!;
const realAuth = `Bearer ${process.env.BENCH_REAL_KEY!}`;
const SMALL = Buffer.from('{"ok":true,"n":1}');
const LARGE = Buffer.alloc(1024 * 1024, 0x61);

const ca = await generateCa({ commonName: 'Bench Upstream CA' });
const issuer = await createLeafIssuer(ca);
const caFile = path.join(dir, 'upstream-ca.pem');
writeFileSync(caFile, ca.certPem);

let requests = 0;
let parked: Array<() => void> = [];
const server = createServer(createTlsServerOptions(issuer, { defaultHostname: 'localhost' }) as ServerOptions, (req, res) => {
  requests++;
  const auth = req.headers.authorization;
  const xAuth = auth === realAuth ? 'real' : auth ? 'other' : 'none';
  if (req.method === 'GET' && req.url === '/large') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': LARGE.length, 'x-auth': xAuth });
    res.end(LARGE);
    return;
  }
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': SMALL.length, 'x-auth': xAuth });
    res.end(SMALL);
    return;
  }
  let n = 0;
  req.on('data', (c: Buffer) => (n += c.length));
  req.on('end', () => {
    const body = Buffer.from(`{"ok":true,"n":${n}}`);
    const answer = () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, 'x-auth': xAuth });
      res.end(body);
    };
    if (req.url?.startsWith('/park/')) parked.push(answer);
    else answer();
  });
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;
server.maxConnections = 50_000;
await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, r));

serveIpc({
  requests: () => requests,
  parked: () => parked.length,
  release: () => {
    const all = parked;
    parked = [];
    for (const answer of all) answer();
    return all.length;
  },
  exit: () => {
    server.closeAllConnections();
    server.close();
    setTimeout(() => process.exit(0), 50);
  },
});
ready({ port: (server.address() as AddressInfo).port, caFile, caPem: ca.certPem });
