import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { TLSSocket, type SecureContext } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { Proxy as MitmProxy, type IContext } from 'http-mitm-proxy';
import type { Logger } from '../lib/log.js';
import type { SniCallback } from '../certs/mitm.js';
import type { Upstream } from './upstream.js';
import type { Identity, Pipeline, Target, AuditEntry } from './pipeline.js';
import { parseProxyAuthorization, refusal, refuseSocket, sendRefusal, type Refusal } from './refusal.js';
import { ERROR_CODES } from '../lib/errors.js';
import { detectCredentials, type CredentialSet } from './credentials.js';
import { parseAuthority } from '../lib/egress-guard.js';
import { absoluteTarget, authorityMismatch, hostHeader, originForm as originPath } from './authority.js';

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
  egressAllows(id: Identity, host: string, port: number): Promise<boolean>;
  pipeline: Pipeline;
  upstream: Upstream;
  /** Resolves once the entry is committed; an answer is finished only after (pipeline.ts, GatewayPorts.audit). */
  audit(entry: AuditEntry): Promise<void>;
  /** The environment's placeholders: an upgrade carrying one to a host outside its allowed_hosts is refused. */
  credentials(id: Identity): Promise<CredentialSet>;
  /** host:port pairs (canonical, lower-case) of the management API: never reachable through the gateway. */
  managementTargets: ReadonlySet<string>;
  log: Logger;
}

/** Proxy authentication or an upgrade check needed the store and it failed: fail closed, but not as 407. */
/** A refused upgrade's answer is relayed with its body as Node decoded it, ended by the close: these framing headers go. */
const REFUSED_UPGRADE_DROPPED: ReadonlySet<string> = new Set(['transfer-encoding', 'connection', 'keep-alive']);
const STORE_DOWN = refusal('gateway_unavailable', 'the gateway cannot reach its store; nothing was forwarded');
const AUDIT_DOWN = refusal('gateway_unavailable', 'the gateway could not record this request in its audit log; nothing was forwarded');

interface Tunnel {
  target: Target;
  identity: Identity;
}

/**
 * The request target as the agent sent it. http-mitm-proxy rewrites `req.url` of an
 * absolute-form `http://` request to its path (and takes the host from it) before our
 * handler runs; judged on the rewritten request, the target came from the Host header, so
 * `GET http://allowed/ + Host: other` was checked as `other` and the URL ignored.
 */
const kOriginalUrl = Symbol('gateway.originalUrl');
type ProxyRequest = IncomingMessage & { [kOriginalUrl]?: string };

/**
 * The target of a request on the proxy port itself: its absolute-form URL (http:// or
 * https://, canonical host), or for an origin-form request its Host header (http).
 */
function proxyTarget(req: IncomingMessage): Target | null {
  const url = (req as ProxyRequest)[kOriginalUrl] ?? req.url ?? '';
  if (!url.startsWith('/')) return absoluteTarget(url);
  const a = parseAuthority(req.headers.host, 80);
  return a ? { host: a.host, port: a.port, tls: false } : null;
}

/** ALPN offer of every terminated tunnel, in wire format once (TLSSocket would convert an array per socket). */
const ALPN_HTTP1 = Buffer.from([8, ...Buffer.from('http/1.1')]);

export interface GatewayProxyServer {
  port: number;
  /**
   * Serves a connection that arrived some other way than the proxy port, as the environment
   * `authorization` names (`Basic base64(<id>:<password>)`): an environment's browser, whose
   * proxy socket the broker serves (issue 23, item 1), so no password lives in the browser.
   */
  accept(socket: Duplex, authorization: string): void;
  /** Listening stops and idle keep-alive connections close; requests under way go on (graceful stop, issue 25). */
  stopAccepting(): void;
  /** True while the proxy port takes connections (readiness). */
  listening(): boolean;
  close(): Promise<void>;
}

export async function startGatewayProxy(opts: GatewayProxyOptions): Promise<GatewayProxyServer> {
  const { log } = opts;
  const tunnels = new WeakMap<Duplex, Tunnel>();
  /** Connections handed in by accept(): their identity, whatever headers they send. */
  const preauth = new WeakMap<object, string>();
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
   * WebSocket and other upgrades: the same checks as any request (Host agrees with the
   * target, allowlist, management API, private addresses), then bytes flow both ways
   * untouched. Credentials are never swapped into an upgraded stream, so a placeholder in
   * an upgrade request is refused rather than sent. The connection is opened by the egress
   * guard's connector, like every other upstream connection (issue 9: this path once
   * connected on its own and reached 169.254.169.254).
   */
  async function passThroughUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, t: Tunnel): Promise<void> {
    const started = performance.now();
    const entry: AuditEntry = {
      environment_id: t.identity.environmentId, developer_id: t.identity.developerId, method: req.method ?? 'GET', host: t.target.host,
      path: req.url ?? '/', connector: null, category: null, credential: 'none', decision: 'allow', reason: 'upgrade', matched_rules: [],
      approval_id: null, grant_id: null, status: 101, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 0,
    };
    /** Records the entry; true once committed (the answer is finished only then). */
    const done = (status: number, decision: AuditEntry['decision'], reason: string): Promise<boolean> => {
      entry.status = status;
      entry.decision = decision;
      entry.reason = reason;
      entry.duration_ms = Math.round(performance.now() - started);
      return opts.audit(entry).then(() => true, () => false);
    };
    const refuse = async (r: Refusal): Promise<void> => {
      const committed = await done(ERROR_CODES[r.code].status, 'deny', r.code);
      refuseSocket(socket, committed ? r : AUDIT_DOWN);
    };
    const mismatch = authorityMismatch(req, t.target);
    if (mismatch) return refuse(refusal('host_mismatch', mismatch));
    if (opts.managementTargets.has(`${t.target.host}:${t.target.port}`)) {
      return refuse(refusal('egress_denied', 'the management API is not reachable through the gateway'));
    }
    if ((req.url ?? '').includes('#')) return refuse(refusal('invalid_request', 'a request target may not carry a fragment (#)'));
    // WebSocket only: an `h2c` upgrade would carry HTTP/2 requests the gateway never reads.
    const protocols = String(req.headers.upgrade ?? '').split(',').map((p) => p.trim().toLowerCase());
    if (protocols.length !== 1 || protocols[0] !== 'websocket') {
      return refuse(refusal('invalid_request', 'only WebSocket upgrades pass the gateway'));
    }
    try {
      // The allowlist only: under unknown_hosts "ask" an upgrade to a host off it is refused,
      // never held, whatever grants exist (issue 26, item 3; docs/gateway.md).
      if (!(await opts.egressAllows(t.identity, t.target.host, t.target.port))) {
        return refuse(refusal('egress_denied', `${t.target.host} is not on this environment's egress allowlist`));
      }
      const creds = await opts.credentials(t.identity);
      // A registered MCP server's origin takes no upgrade: its tool calls on a WebSocket would
      // pass no tool rule (issue 28 reads JSON-RPC over HTTP; docs/mcp.md).
      if (t.target.tls && creds.mcp !== undefined && creds.mcp.sameOrigin(t.target.host, t.target.port).length > 0) {
        return refuse(refusal('invalid_request', 'a registered MCP server\'s origin takes no upgrade: its tool calls are read over HTTP only'));
      }
      const found = detectCredentials({ url: req.url ?? '/', headers: req.headers }, creds);
      if (found.length > 0) {
        const leak = found.find((c) => !c.hostAllowed(t.target.host, t.target.port)) ?? found[0]!;
        entry.connector = leak.connector;
        entry.credential = leak.kind;
        return refuse(leak.hostAllowed(t.target.host, t.target.port)
          ? refusal('secret_location_not_allowed', 'credentials are never swapped into an upgrade request')
          : refusal('secret_host_not_allowed', `this credential may not be sent to ${t.target.host}`));
      }
    } catch (err) {
      // Unhandled, this rejection ended the process (the caller does `void passThroughUpgrade`).
      log.error({ err, host: t.target.host }, 'upgrade could not be checked: failing closed');
      return refuse(STORE_DOWN);
    }
    const pre = await opts.upstream.precheck(t.target.host, t.target.port);
    if (!pre.ok) return refuse(refusal(pre.code, pre.reason));
    const headers: Record<string, string | string[]> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v !== undefined && k !== 'proxy-authorization' && k !== 'proxy-connection') headers[k] = v;
    }
    headers.host = hostHeader(t.target);
    const upReq = httpRequest({
      host: t.target.host,
      port: t.target.port,
      method: req.method,
      path: originPath(req.url),
      headers,
      createConnection: opts.upstream.createConnection(t.target.tls) as never,
    });
    // The upstream's answer reaches the agent only once its entry is committed; when the
    // audit store cannot take it, both connections are cut (fail closed).
    upReq.on('upgrade', (upRes, upSocket, upHead) => {
      entry.upstream_status = upRes.statusCode ?? null;
      void done(101, 'allow', 'upgrade').then((committed) => {
        if (!committed || socket.destroyed) {
          upSocket.destroy();
          socket.destroy();
          return;
        }
        socket.write(headOf(upRes));
        if (upHead.length) socket.write(upHead);
        if (head.length) upSocket.write(head);
        upSocket.pipe(socket).pipe(upSocket);
        upSocket.on('error', () => socket.destroy());
        socket.on('error', () => upSocket.destroy());
      });
    });
    upReq.on('response', (upRes) => {
      // The upstream refused the upgrade: relay its answer.
      upRes.pause();
      entry.upstream_status = upRes.statusCode ?? null;
      void done(upRes.statusCode ?? 502, 'allow', 'upgrade_refused').then((committed) => {
        if (!committed || socket.destroyed) {
          upRes.destroy();
          socket.destroy();
          return;
        }
        // Node has already taken the body out of its chunks: it is relayed as is, ended by
        // the connection's close (chunked framing said of a de-chunked body mis-framed it).
        socket.write(headOf(upRes, REFUSED_UPGRADE_DROPPED));
        upRes.pipe(socket);
      });
    });
    upReq.on('error', (err) => {
      const refused = (err as { code?: string }).code === 'EGRESS_PRIVATE_ADDRESS';
      const r = refused ? refusal('egress_denied', err.message) : refusal('upstream_unreachable', 'the upstream could not be reached');
      void done(refused ? 403 : 502, refused ? 'deny' : 'allow', r.code).then((committed) => refuseSocket(socket, committed ? r : AUDIT_DOWN));
    });
    upReq.end();
  }

  /**
   * The upstream's status line and headers, as it sent them, for relaying on the raw socket;
   * with `drop`, those headers left out and `Connection: close` said instead.
   */
  function headOf(upRes: IncomingMessage, drop?: ReadonlySet<string>): string {
    let lines = `HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}\r\n`;
    for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
      if (drop?.has(upRes.rawHeaders[i]!.toLowerCase())) continue;
      lines += `${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}\r\n`;
    }
    if (drop) lines += 'Connection: close\r\n';
    return `${lines}\r\n`;
  }

  /** Tunnel sockets destroy themselves on error; one function for all, no closure per tunnel. */
  function destroyOnError(this: Duplex): void {
    this.destroy();
  }

  /**
   * Open tunnels: an HTTP server does not track connections handed to it by 'connection', so
   * close() cuts these itself once a stop's grace is over (issue 25, item 7).
   */
  const liveTunnels = new Set<Duplex>();
  function forgetTunnel(this: Duplex): void {
    liveTunnels.delete(this);
  }
  function track(socket: Duplex): void {
    liveTunnels.add(socket);
    socket.once('close', forgetTunnel);
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
    track(tlsSocket);
    tunnelServer.emit('connection', tlsSocket);
  }

  /**
   * The tunnel's first bytes: TLS is terminated here, anything else is HTTP in the clear,
   * except on port 443, where a cleartext first byte is refused (issue 9, hole 7): nothing
   * sent to the HTTPS port of an API may leave the gateway unencrypted.
   */
  function startTunnel(socket: Socket, first: Buffer, authority: { host: string; port: number }, identity: Identity): void {
    socket.pause();
    socket.unshift(first);
    if (first[0] !== 0x16 && authority.port === 443) {
      const r = refusal('cleartext_not_allowed', 'this tunnel goes to port 443: speak TLS in it');
      void opts.audit({
        environment_id: identity.environmentId, developer_id: identity.developerId, method: 'CONNECT', host: authority.host, path: '/',
        connector: null, category: null, credential: 'none', decision: 'deny', reason: 'cleartext_not_allowed', matched_rules: [],
        approval_id: null, grant_id: null, status: 403, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 0,
      }).then(() => refuseSocket(socket, r), () => refuseSocket(socket, AUDIT_DOWN));
      return;
    }
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
      track(socket);
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
    acceptConnect(socket as Socket, head, preauth.get(socket) ?? req.headers['proxy-authorization'], req.url).catch((err) => {
      log.error({ err }, 'CONNECT handling failed');
      socket.destroy();
    });
  });

  // Plain-HTTP proxy requests (absolute-form URLs); the library has parsed host and port.
  mitm.onRequest((ctx: IContext, _callback) => {
    const req = ctx.clientToProxyRequest;
    const res = ctx.proxyToClientResponse;
    void (async () => {
      let identity: Identity | null;
      try {
        identity = await identify(preauth.get(req.socket) ?? req.headers['proxy-authorization']);
      } catch (err) {
        log.error({ err }, 'proxy authentication failed: failing closed');
        sendRefusal(req, res, STORE_DOWN);
        return;
      }
      if (!identity) {
        sendRefusal(req, res, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
        return;
      }
      const target = proxyTarget(req);
      if (!target) {
        sendRefusal(req, res, refusal('egress_denied', 'a proxy request needs an absolute http(s) URL with a valid host'));
        return;
      }
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
  server.prependListener('request', (req: ProxyRequest) => {
    req[kOriginalUrl] = req.url;
  });
  server.keepAliveTimeout = 30_000;
  // Upgrades on the proxy port itself (ws:// through a plain HTTP proxy) take the same path
  // as upgrades inside tunnels; the library's own WebSocket relay (which would connect
  // without our egress guard) is detached.
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void identify(preauth.get(req.socket) ?? req.headers['proxy-authorization']).then(
      (identity) => {
        if (!identity) return refuseSocket(socket, refusal('proxy_auth_required', 'send Proxy-Authorization: Basic base64(<environment id>:<password>)'));
        const target = proxyTarget(req);
        if (!target) return refuseSocket(socket, refusal('egress_denied', 'the upgrade request names no valid host'));
        void passThroughUpgrade(req, socket, head, { target, identity });
      },
      (err) => {
        log.error({ err }, 'proxy authentication failed: failing closed');
        refuseSocket(socket, STORE_DOWN);
      },
    );
  });
  const port = (server.address() as { port: number }).port;
  let stopped = false;
  const stopAccepting = (): void => {
    if (stopped) return;
    stopped = true;
    mitm.close(); // once: the library forgets its server after the first close
    server.closeIdleConnections?.();
    tunnelServer.closeIdleConnections();
  };

  return {
    port,
    accept(socket, authorization) {
      if (stopped) return void socket.destroy();
      preauth.set(socket, authorization);
      server.emit('connection', socket);
    },
    stopAccepting,
    listening: () => !stopped && server.listening,
    async close() {
      stopAccepting();
      tunnelServer.close();
      server.closeAllConnections?.();
      tunnelServer.closeAllConnections();
      // end(): an answer just finished still reaches the agent; what does not close by itself is cut.
      for (const socket of liveTunnels) socket.end();
      if (liveTunnels.size > 0) {
        const cut = [...liveTunnels];
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all(cut.map((socket) => (socket.destroyed ? null : new Promise((r) => socket.once('close', r))))),
          new Promise((r) => (timer = setTimeout(r, 200))),
        ]);
        clearTimeout(timer);
        for (const socket of cut) socket.destroy();
      }
      liveTunnels.clear();
    },
  };
}
