import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { Proxy as MitmProxy, type IContext } from 'http-mitm-proxy';
import type { Logger } from '../lib/log.js';
import type { SniCallback } from '../certs/mitm.js';
import type { Upstream } from './upstream.js';
import type { Identity, Pipeline, Target, AuditEntry } from './pipeline.js';
import { parseProxyAuthorization, refusal, refuseSocket, sendRefusal } from './refusal.js';

/**
 * Wires the pipeline to http-mitm-proxy. The library listens, parses plain proxy requests
 * and CONNECT; TLS tunnels are then terminated here: the CONNECT socket is wrapped in a
 * TLSSocket with our leaf certificate and handed straight to an in-process HTTP server.
 * That skips the library's loopback hop to its own HTTPS server (a second TCP connection
 * and a second parse for every tunnel) and its per-request context allocations, which
 * is where most of its CPU goes (docs/performance.md).
 */
export interface GatewayProxyOptions {
  host: string;
  port: number;
  sslCaDir: string;
  sni: SniCallback;
  authenticate(environmentId: string, password: string): Promise<Identity | null>;
  egressAllows(id: Identity, host: string): Promise<boolean>;
  pipeline: Pipeline;
  upstream: Upstream;
  audit(entry: AuditEntry): void;
  log: Logger;
}

interface Tunnel {
  target: Target;
  identity: Identity;
}

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;

function parseAuthority(authority: string | undefined, defaultPort: number): { host: string; port: number } | null {
  if (!authority) return null;
  const m = HOST_PORT.exec(authority);
  if (m) {
    const port = Number(m[2]);
    return port > 0 && port < 65536 ? { host: m[1]!.replace(/^\[|\]$/g, '').toLowerCase(), port } : null;
  }
  return /^[A-Za-z0-9._-]+$/.test(authority) ? { host: authority.toLowerCase(), port: defaultPort } : null;
}

export async function startGatewayProxy(opts: GatewayProxyOptions): Promise<{ port: number; close(): Promise<void> }> {
  const { log } = opts;
  const tunnels = new WeakMap<Duplex, Tunnel>();
  const mitm = new MitmProxy();

  async function identify(header: string | undefined): Promise<Identity | null> {
    const creds = parseProxyAuthorization(header);
    if (!creds) return null;
    return opts.authenticate(creds.user, creds.password);
  }

  // Requests inside tunnels (TLS or plain).
  const tunnelServer: Server = createServer({ keepAliveTimeout: 30_000, requestTimeout: 0 }, (req, res) => {
    const t = tunnels.get(req.socket);
    if (!t) {
      res.destroy();
      return;
    }
    void opts.pipeline(req, res, t.target, t.identity);
  });
  tunnelServer.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const t = tunnels.get(req.socket);
    if (!t) return socket.destroy();
    void passThroughUpgrade(req, socket, head, t);
  });
  tunnelServer.on('clientError', (_err, socket) => socket.destroy());

  /**
   * WebSocket and other upgrades: the allowlist applies, then bytes flow both ways
   * untouched. Credentials are never swapped into an upgraded stream.
   */
  async function passThroughUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, t: Tunnel): Promise<void> {
    const started = performance.now();
    const entry: AuditEntry = {
      environment_id: t.identity.environmentId, developer_id: t.identity.developerId, method: req.method ?? 'GET', host: t.target.host,
      path: req.url ?? '/', connector: null, category: null, credential: 'none', decision: 'allow', reason: 'upgrade', matched_rules: [],
      approval_id: null, grant_id: null, status: 101, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 0,
    };
    const done = (status: number, decision: AuditEntry['decision'], reason: string) => {
      entry.status = status;
      entry.decision = decision;
      entry.reason = reason;
      entry.duration_ms = Math.round(performance.now() - started);
      opts.audit(entry);
    };
    if (!(await opts.egressAllows(t.identity, t.target.host))) {
      refuseSocket(socket, refusal('egress_denied', `${t.target.host} is not on this environment's egress allowlist`));
      return done(403, 'deny', 'egress_denied');
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const upReq = (t.target.tls ? httpsRequest : httpRequest)({
      host: t.target.host,
      port: opts.upstream.origin(t.target.host, t.target.port, t.target.tls).split(':').pop(),
      servername: t.target.host,
      method: req.method,
      path: req.url,
      headers,
      agent: opts.upstream.nodeAgent(t.target.tls),
    });
    upReq.on('upgrade', (upRes, upSocket, upHead) => {
      let lines = `HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}\r\n`;
      for (let i = 0; i < upRes.rawHeaders.length; i += 2) lines += `${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}\r\n`;
      socket.write(`${lines}\r\n`);
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      upSocket.pipe(socket).pipe(upSocket);
      upSocket.on('error', () => socket.destroy());
      socket.on('error', () => upSocket.destroy());
      entry.upstream_status = upRes.statusCode ?? null;
      done(101, 'allow', 'upgrade');
    });
    upReq.on('response', (upRes) => {
      // The upstream refused the upgrade: relay its answer.
      let lines = `HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}\r\n`;
      for (let i = 0; i < upRes.rawHeaders.length; i += 2) lines += `${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}\r\n`;
      socket.write(`${lines}\r\n`);
      upRes.pipe(socket);
      entry.upstream_status = upRes.statusCode ?? null;
      done(upRes.statusCode ?? 502, 'allow', 'upgrade_refused');
    });
    upReq.on('error', (err) => {
      const code = (err as { code?: string }).code === 'EGRESS_PRIVATE_ADDRESS' ? 'egress_denied' : 'upstream_unreachable';
      refuseSocket(socket, refusal(code, code === 'egress_denied' ? err.message : 'the upstream could not be reached'));
      done(code === 'egress_denied' ? 403 : 502, code === 'egress_denied' ? 'deny' : 'allow', code);
    });
    upReq.end();
  }

  mitm.onConnect((req, socket, head, _callback) => {
    // The library's own CONNECT handling is never used (its callback is not called).
    void (async () => {
      const identity = await identify(req.headers['proxy-authorization']).catch(() => null);
      if (!identity) return refuseSocket(socket, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
      const authority = parseAuthority(req.url, 443);
      if (!authority) return refuseSocket(socket, refusal('egress_denied', 'the CONNECT target is not host:port'));
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const start = (first: Buffer) => {
        socket.pause();
        socket.unshift(first);
        if (first[0] === 0x16) {
          opts.sni(authority.host, (err, context) => {
            if (err || !context) {
              log.warn({ host: authority.host }, 'no certificate for CONNECT target');
              return socket.destroy();
            }
            const tlsSocket = new TLSSocket(socket as Socket, { isServer: true, secureContext: context, SNICallback: opts.sni, ALPNProtocols: ['http/1.1'] });
            tlsSocket.on('error', () => tlsSocket.destroy());
            tunnels.set(tlsSocket, { target: { host: authority.host, port: authority.port, tls: true }, identity });
            tunnelServer.emit('connection', tlsSocket);
          });
        } else {
          tunnels.set(socket, { target: { host: authority.host, port: authority.port, tls: false }, identity });
          tunnelServer.emit('connection', socket);
          socket.resume();
        }
      };
      if (head && head.length > 0) start(head);
      else socket.once('data', start);
    })().catch((err) => {
      log.error({ err }, 'CONNECT handling failed');
      socket.destroy();
    });
  });

  // Plain-HTTP proxy requests (absolute-form URLs); the library has parsed host and port.
  mitm.onRequest((ctx: IContext, _callback) => {
    const req = ctx.clientToProxyRequest;
    const res = ctx.proxyToClientResponse;
    const opt = ctx.proxyToServerRequestOptions as { host?: string; port?: number } | undefined;
    void (async () => {
      const identity = await identify(req.headers['proxy-authorization']).catch(() => null);
      if (!identity) {
        sendRefusal(req, res, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
        return;
      }
      const target: Target = { host: String(opt?.host ?? '').toLowerCase(), port: Number(opt?.port ?? 80), tls: false };
      await opts.pipeline(req, res, target, identity);
    })().catch((err) => {
      log.error({ err }, 'proxy request failed');
      res.destroy();
    });
  });
  let listening = false;
  let failListen: (err: unknown) => void = () => undefined;
  mitm.onError((_ctx, err, kind) => {
    // The library reports a bind failure only here; without this, start-up would hang.
    if (!listening && kind === 'HTTP_SERVER_ERROR') failListen(err);
    else log.debug({ err, kind }, 'http-mitm-proxy error');
  });

  await new Promise<void>((resolve, reject) => {
    failListen = reject;
    mitm.listen({ host: opts.host, port: opts.port, sslCaDir: opts.sslCaDir, keepAlive: true }, (err?: unknown) => (err ? reject(err) : resolve()));
  });
  listening = true;
  const server = (mitm as unknown as { httpServer: Server }).httpServer;
  server.keepAliveTimeout = 30_000;
  // Upgrades on the proxy port itself (ws:// through a plain HTTP proxy) take the same path
  // as upgrades inside tunnels; the library's own WebSocket relay (which would connect
  // without our egress guard) is detached.
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void identify(req.headers['proxy-authorization']).then(
      (identity) => {
        if (!identity) return refuseSocket(socket, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
        const m = /^http:\/\/([^/]+)(\/.*)?$/.exec(req.url ?? '');
        const authority = parseAuthority(m ? m[1] : req.headers.host, 80);
        if (!authority) return refuseSocket(socket, refusal('egress_denied', 'the upgrade request names no host'));
        req.url = m ? m[2] ?? '/' : req.url;
        void passThroughUpgrade(req, socket, head, { target: { ...authority, tls: false }, identity });
      },
      () => socket.destroy(),
    );
  });
  const port = (server.address() as { port: number }).port;

  return {
    port,
    async close() {
      mitm.close();
      tunnelServer.close();
      server.closeAllConnections?.();
      tunnelServer.closeAllConnections();
    },
  };
}
