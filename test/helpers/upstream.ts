import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateCa, type CaMaterial } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { createTlsServerOptions } from '../../certs/mitm.js';

export interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface FakeUpstream {
  port: number;
  ca: CaMaterial;
  /** The listening server (attach a WebSocket server to its 'upgrade' event). */
  server: Server | HttpsServer;
  seen: Seen[];
  /** The handler answers; default echoes a small JSON. */
  respond: (req: Seen, res: import('node:http').ServerResponse) => void;
  close(): Promise<void>;
}

/**
 * A local upstream standing in for a real API host: HTTPS with a certificate from its own
 * CA (trusted by the gateway through GATEWAY_UPSTREAM_CA_FILE) for any host name, or plain
 * HTTP. It records every request it receives, so tests can prove what the upstream saw
 * (the real secret, never a placeholder; no X-Service-* headers). `defaultHostname` names
 * the certificate served to clients that send no SNI (an IP literal such as 127.0.0.1).
 */
export async function startFakeUpstream(opts: { tls?: boolean; defaultHostname?: string } = {}): Promise<FakeUpstream> {
  const tls = opts.tls ?? true;
  const ca = await generateCa({ commonName: 'Fake Upstream CA' });
  const seen: Seen[] = [];
  const up: FakeUpstream = {
    port: 0,
    ca,
    server: undefined as unknown as Server,
    seen,
    respond: (req, res) => {
      const body = JSON.stringify({ ok: true, method: req.method, url: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
    close: async () => undefined,
  };
  const handler = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      seen.push(s);
      up.respond(s, res);
    });
  };
  let server: Server | HttpsServer;
  if (tls) {
    const issuer = await createLeafIssuer(ca);
    server = createHttpsServer(createTlsServerOptions(issuer, { defaultHostname: opts.defaultHostname ?? 'localhost' }), handler);
  } else {
    server = createHttpServer(handler);
  }
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  up.server = server;
  up.port = (server.address() as AddressInfo).port;
  up.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return up;
}
