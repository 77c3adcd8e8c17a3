import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { TLSSocket, type SecureContext } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { Proxy as MitmProxy, type IContext } from 'http-mitm-proxy';
import type { Logger } from '../lib/log.js';
import type { SniCallback } from '../certs/mitm.js';
import type { Upstream } from './upstream.js';
import type { Identity, Pipeline, Target, AuditEntry } from './pipeline.js';
import { parseProxyAuthorization, refusal, refuseSocket, sendRefusal } from './refusal.js';
import { detectCredentials, type CredentialSet } from './credentials.js';

/**
 * Wires the pipeline to http-mitm-proxy. The library listens, parses plain proxy requests
 * and CONNECT; TLS tunnels are then terminated here: the CONNECT socket is wrapped in a
 * TLSSocket with our leaf certificate and handed straight to an in-process HTTP server.
 * That skips the library's loopback hop to its own HTTPS server (a second TCP connection
 * and a second parse for every tunnel): per fresh tunnel the gateway, with its whole
 * pipeline and audit entry, uses less CPU than the bare library (docs/performance.md).
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
  /** The environment's placeholders: an upgrade carrying one to a host outside its allowed_hosts is refused. */
  credentials(id: Identity): Promise<CredentialSet>;
  log: Logger;
}

/** Proxy authentication or an upgrade check needed the store and it failed: fail closed, but not as 407. */
const STORE_DOWN = refusal('gateway_unavailable', 'the gateway cannot reach its store; nothing was forwarded');

interface Tunnel {
  target: Target;
  identity: Identity;
}

/** ALPN offer of every terminated tunnel, in wire format once (TLSSocket would convert an array per socket). */
const ALPN_HTTP1 = Buffer.from([8, ...Buffer.from('http/1.1')]);

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
    try {
      if (!(await opts.egressAllows(t.identity, t.target.host))) {
        refuseSocket(socket, refusal('egress_denied', `${t.target.host} is not on this environment's egress allowlist`));
        return done(403, 'deny', 'egress_denied');
      }
      const leak = detectCredentials({ url: req.url ?? '/', headers: req.headers }, await opts.credentials(t.identity)).find((c) => !c.hostAllowed(t.target.host));
      if (leak) {
        entry.connector = leak.connector;
        entry.credential = leak.kind;
        refuseSocket(socket, refusal('secret_host_not_allowed', `this credential may not be sent to ${t.target.host}`));
        return done(403, 'deny', 'secret_host_not_allowed');
      }
    } catch (err) {
      // Unhandled, this rejection ended the process (the caller does `void passThroughUpgrade`).
      log.error({ err, host: t.target.host }, 'upgrade could not be checked: failing closed');
      refuseSocket(socket, STORE_DOWN);
      return done(503, 'deny', 'gateway_unavailable');
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

  /** Tunnel sockets destroy themselves on error; one function for all, no closure per tunnel. */
  function destroyOnError(this: Duplex): void {
    this.destroy();
  }

  /**
   * Terminates TLS on a CONNECT socket whose first bytes (a ClientHello) are unshifted back.
   * Nothing here closes over the CONNECT request: a closure that did would keep the request
   * (headers, stream state) alive for as long as the tunnel lives, which for a request held
   * for approval is minutes (docs/performance.md, hold test).
   */
  function terminateTls(socket: Socket, target: Target, identity: Identity, context: SecureContext): void {
    const tlsSocket = new TLSSocket(socket, { isServer: true, secureContext: context, SNICallback: opts.sni, ALPNProtocols: ALPN_HTTP1 });
    tlsSocket.on('error', destroyOnError);
    tunnels.set(tlsSocket, { target, identity });
    tunnelServer.emit('connection', tlsSocket);
  }

  /** The tunnel's first bytes: TLS is terminated here, anything else is HTTP in the clear. */
  function startTunnel(socket: Socket, first: Buffer, authority: { host: string; port: number }, identity: Identity): void {
    socket.pause();
    socket.unshift(first);
    if (first[0] === 0x16) {
      opts.sni(authority.host, (err, context) => {
        if (err || !context) {
          log.warn({ host: authority.host }, 'no certificate for CONNECT target');
          socket.destroy();
          return;
        }
        terminateTls(socket, { host: authority.host, port: authority.port, tls: true }, identity, context);
      });
    } else {
      tunnels.set(socket, { target: { host: authority.host, port: authority.port, tls: false }, identity });
      tunnelServer.emit('connection', socket);
      socket.resume();
    }
  }

  async function acceptConnect(socket: Socket, head: Buffer | undefined, authorization: string | undefined, url: string | undefined): Promise<void> {
    let identity: Identity | null;
    try {
      identity = await identify(authorization);
    } catch (err) {
      log.error({ err }, 'proxy authentication failed: failing closed');
      return refuseSocket(socket, STORE_DOWN);
    }
    if (!identity) return refuseSocket(socket, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
    const authority = parseAuthority(url, 443);
    if (!authority) return refuseSocket(socket, refusal('egress_denied', 'the CONNECT target is not host:port'));
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head && head.length > 0) startTunnel(socket, head, authority, identity);
    else socket.once('data', (first: Buffer) => startTunnel(socket, first, authority, identity));
  }

  mitm.onConnect((req, socket, head) => {
    // The library's own CONNECT handling is never used (its callback is not called). Only
    // the two header values are passed on, so the request can be collected (see terminateTls).
    acceptConnect(socket as Socket, head, req.headers['proxy-authorization'], req.url).catch((err) => {
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
      let identity: Identity | null;
      try {
        identity = await identify(req.headers['proxy-authorization']);
      } catch (err) {
        log.error({ err }, 'proxy authentication failed: failing closed');
        sendRefusal(req, res, STORE_DOWN);
        return;
      }
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
      (err) => {
        log.error({ err }, 'proxy authentication failed: failing closed');
        refuseSocket(socket, STORE_DOWN);
      },
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
