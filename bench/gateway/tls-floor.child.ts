/**
 * The server side of tls-floor.ts: a bare Node server that only holds connections, so its
 * RSS growth per connection is what Node itself needs, before any code of ours. Modes:
 *   tcp    the accepted socket, nothing else
 *   tls    a TLSSocket (our leaf certificate), handshake done, no HTTP
 *   https  a node:http server on the TLSSocket, one request parked per connection
 */
import { createServer as createNetServer } from 'node:net';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { TLSSocket, createSecureContext } from 'node:tls';
import { generateCa } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { ready, serveIpc } from './ipc.js';

const mode = process.env.FLOOR_MODE ?? 'tls';
const issuer = await createLeafIssuer(await generateCa({ commonName: 'TLS floor CA' }));
const leaf = issuer.getLeaf('floor.example');
const context = createSecureContext({ key: leaf.keyPem, cert: leaf.certPem, ...(process.env.FLOOR_TLS_MAX ? { maxVersion: process.env.FLOOR_TLS_MAX as 'TLSv1.2' } : {}) });
const held: unknown[] = [];
const parked: ServerResponse[] = [];
const http = createHttpServer({ requestTimeout: 0, keepAliveTimeout: 0 }, (req, res) => {
  req.resume();
  req.once('end', () => parked.push(res));
});
const server = createNetServer((socket) => {
  if (mode === 'tcp') return void held.push(socket);
  const tls = new TLSSocket(socket, { isServer: true, secureContext: context });
  tls.on('error', () => tls.destroy());
  if (mode === 'https') http.emit('connection', tls);
  else tls.once('secure', () => held.push(tls));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
serveIpc({
  count: () => held.length + parked.length,
  gc: () => (globalThis as { gc?: () => void }).gc?.(),
  exit: () => setImmediate(() => process.exit(0)),
});
ready({ port: (server.address() as { port: number }).port });
