import { expect } from 'chai';
import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { ProxyAgent } from 'undici';

/**
 * Clients of the gateway proxy at the byte level, for tests that must send what a well
 * behaved client never would (a Host naming another host, two Host headers, cleartext in
 * a TLS tunnel, odd address forms in CONNECT): an attacker writes its own bytes.
 */
export interface Gateway {
  proxy_url: string;
  ca_cert_pem: string;
}

export interface PlainResponse {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

export function proxyAuthorization(gw: Gateway): string {
  const u = new URL(gw.proxy_url);
  return `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
}

/** undici's ProxyAgent through the gateway, trusting its CA (what a Node agent in the VM uses). */
export function proxyAgent(gw: Gateway): ProxyAgent {
  const u = new URL(gw.proxy_url);
  return new ProxyAgent({ uri: `${u.protocol}//${u.host}`, token: proxyAuthorization(gw), requestTls: { ca: gw.ca_cert_pem } });
}

/** A proxy request in absolute form on the proxy port itself (plain http://, no CONNECT). */
export function plainProxyRequest(gw: Gateway, url: string, init: { method?: string; headers?: Record<string, string>; body?: string; auth?: boolean } = {}): Promise<PlainResponse> {
  const proxy = new URL(gw.proxy_url);
  const headers: Record<string, string> = { host: new URL(url).host, ...init.headers };
  if (init.auth !== false) headers['proxy-authorization'] = proxyAuthorization(gw);
  if (init.body !== undefined) headers['content-length'] = String(Buffer.byteLength(init.body));
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: proxy.hostname, port: Number(proxy.port), method: init.method ?? 'GET', path: url, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** Raw bytes to the proxy port, and everything it answers until it closes (or `ms`). */
export async function rawProxyExchange(gw: Gateway, text: string, ms = 3000): Promise<string> {
  const u = new URL(gw.proxy_url);
  const socket = netConnect(Number(u.port), u.hostname);
  await once(socket, 'connect');
  return exchange(socket, text, ms);
}

async function exchange(socket: Socket | TLSSocket, text: string, ms: number): Promise<string> {
  let received = '';
  socket.on('data', (d) => (received += d));
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').catch(() => undefined);
  socket.write(text);
  await Promise.race([closed, new Promise((r) => setTimeout(r, ms))]);
  socket.destroy();
  return received;
}

/** A raw CONNECT on the proxy port; resolves with the proxy's answer head and the socket. */
export async function rawConnect(gw: Gateway, authority: string): Promise<{ head: string; socket: Socket }> {
  const u = new URL(gw.proxy_url);
  const socket = netConnect(Number(u.port), u.hostname);
  await once(socket, 'connect');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${proxyAuthorization(gw)}\r\n\r\n`);
  let head = '';
  while (!head.includes('\r\n\r\n')) head += String((await once(socket, 'data'))[0]);
  return { head, socket };
}

export interface Tunnel {
  tls: TLSSocket;
  received(): string;
  read(ms?: number): Promise<string>;
}

/** A TLS tunnel through the proxy (CONNECT, then TLS with our CA); `read` waits for an answer head. */
export async function openTunnel(gw: Gateway, host: string, port = 443): Promise<Tunnel> {
  const { head, socket } = await rawConnect(gw, `${host}:${port}`);
  expect(head).to.match(/^HTTP\/1\.1 200 /);
  const tls: TLSSocket = tlsConnect({ socket, servername: host, ca: gw.ca_cert_pem });
  await once(tls, 'secureConnect');
  tls.on('error', () => undefined);
  let buffered = '';
  tls.on('data', (d) => (buffered += d));
  return {
    tls,
    received: () => buffered,
    /** Everything received once an answer head arrived (or after `ms`), then clears the buffer. */
    async read(ms = 2000) {
      const deadline = Date.now() + ms;
      while (!buffered.includes('\r\n\r\n') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 20));
      const out = buffered;
      buffered = '';
      return out;
    },
  };
}

/** One raw HTTP/1.1 exchange inside a TLS tunnel (send `Connection: close`); resolves with the whole answer. */
export async function rawTunnelExchange(gw: Gateway, host: string, requestText: string, port = 443): Promise<string> {
  const t = await openTunnel(gw, host, port);
  t.tls.write(requestText);
  await Promise.race([once(t.tls, 'end'), new Promise((r) => setTimeout(r, 3000))]);
  t.tls.destroy();
  return t.received();
}

/** One raw exchange inside a cleartext tunnel (CONNECT, then plain bytes). */
export async function rawCleartextTunnelExchange(gw: Gateway, authority: string, requestText: string, ms = 3000): Promise<{ connect: string; answer: string }> {
  const { head, socket } = await rawConnect(gw, authority);
  if (!/^HTTP\/1\.1 200 /.test(head)) {
    socket.destroy();
    return { connect: head, answer: '' };
  }
  return { connect: head, answer: await exchange(socket, requestText, ms) };
}

/** The status code and X-Gateway-Error of a raw HTTP answer. */
export function statusOf(raw: string): { status: number; error: string | null; body: string } {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  const e = /\r\nx-gateway-error: ([a-z_]+)/i.exec(raw);
  const at = raw.indexOf('\r\n\r\n');
  return { status: m ? Number(m[1]) : 0, error: e ? e[1]! : null, body: at < 0 ? '' : raw.slice(at + 4) };
}

/** The headers of a WebSocket upgrade request (after the request line and Host). */
export const UPGRADE_HEADERS = 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';

/**
 * A TCP listener that must never be reached: it records the peer of every connection and
 * answers `answer` (which contains the word `reached`), so a test can assert both.
 */
export async function startTripwire(host: string, answer: string): Promise<{ port: number; reached: string[]; close(): Promise<void> }> {
  const { createServer } = await import('node:net');
  const reached: string[] = [];
  const server = createServer((s) => {
    reached.push(String(s.remoteAddress));
    s.end(answer);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    port: (server.address() as import('node:net').AddressInfo).port,
    reached,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
