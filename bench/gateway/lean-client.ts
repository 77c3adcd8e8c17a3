/**
 * A lean HTTP/1.1 load generator for bench/gateway (`--client=lean`): node:net and node:tls
 * and nothing else. A connection is a TCP connection to the proxy, a CONNECT, then a TLS
 * client handshake through the tunnel (the target's CA checked, as an agent's client does),
 * and requests written and parsed here (Content-Length and chunked bodies). What it leaves
 * out is undici's per-request and per-dispatcher machinery: the default client (a new undici
 * ProxyAgent per fresh request) spends about twice the proxy's CPU per new connection on the
 * same two cores, which bounds the requests/s ratio between two proxies (issue 29, item 4);
 * with this one the bound moves towards the proxies' own CPU per request, as wrk or h2load
 * would measure it (neither speaks CONNECT with TLS inside).
 *
 * The server's certificate is checked as curl or Python's ssl check it, natively: OpenSSL
 * verifies the chain against the target's CA, then the host name is matched against the
 * leaf (X509Certificate.checkHost). Node's tls.connect does the second step by turning the
 * whole chain into JavaScript objects first (getPeerCertificate(true): fingerprints, the
 * modulus in hex, every field), 30 % of this client's CPU per new connection in a profile,
 * a cost of Node's client, not of the agent's connection the bench stands for.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { TLSSocket, type SecureContext } from 'node:tls';

export interface LeanTarget {
  /** The upstream as the agent names it (https://host:port). */
  origin: string;
  /** The proxy (null: straight to the origin). */
  proxy: { uri: string; token?: string } | null;
  secureContext: SecureContext;
}

export interface LeanRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface LeanResponse {
  status: number;
  headers: Record<string, string>;
  bodyBytes: number;
  /** The server asked to close: the connection is not reused. */
  close: boolean;
}

const CRLF2 = Buffer.from('\r\n\r\n');

/**
 * A TCP connection to the target's origin, through its proxy when it has one (the CONNECT
 * answered 200, the socket paused before the first TLS byte); straight to the origin otherwise.
 */
export async function openTunnel(t: LeanTarget): Promise<Socket> {
  const u = new URL(t.origin);
  const port = Number(u.port || 443);
  const p = t.proxy ? new URL(t.proxy.uri) : null;
  const raw = netConnect({ port: p ? Number(p.port) : port, host: p ? p.hostname : u.hostname, noDelay: true });
  if (!t.proxy) {
    await new Promise<void>((res, rej) => raw.once('connect', res).once('error', rej));
    raw.removeAllListeners('error');
    return raw;
  }
  raw.write(`CONNECT ${u.hostname}:${port} HTTP/1.1\r\nhost: ${u.hostname}:${port}\r\n${t.proxy.token ? `proxy-authorization: ${t.proxy.token}\r\n` : ''}\r\n`);
  const head = await new Promise<string>((res, rej) => {
    let got: Buffer = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      got = got.length ? Buffer.concat([got, d]) : d;
      const end = got.indexOf(CRLF2);
      if (end < 0) return;
      raw.off('data', onData).off('error', rej).off('close', onClose);
      raw.pause();
      // Nothing follows a proxy's 200 before the client speaks TLS.
      res(got.subarray(0, end).toString('latin1'));
    };
    const onClose = () => rej(Object.assign(new Error('the proxy closed the CONNECT'), { code: 'UND_ERR_SOCKET' }));
    raw.on('data', onData).once('error', rej).once('close', onClose);
  });
  if (!/^HTTP\/1\.[01] 200/.test(head)) {
    raw.destroy();
    throw Object.assign(new Error(`CONNECT: ${head.split('\r\n')[0]}`), { code: 'CONNECT_REFUSED' });
  }
  return raw;
}

/** One connection through the target; one request at a time. */
export class LeanConnection {
  readonly #socket: TLSSocket;
  readonly #host: string;
  #closed = false;
  #pending: { resolve: (r: LeanResponse) => void; reject: (e: Error) => void } | null = null;
  #parser: ResponseParser | null = null;

  private constructor(socket: TLSSocket, host: string) {
    this.#socket = socket;
    this.#host = host;
    socket.on('data', (d: Buffer) => this.#onData(d));
    const fail = (err: Error) => {
      this.#closed = true;
      const p = this.#pending;
      this.#pending = null;
      p?.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(Object.assign(new Error('connection closed before the response ended'), { code: 'UND_ERR_SOCKET' })));
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The handshake resumed the TLS session offered. */
  get reused(): boolean {
    return this.#socket.isSessionReused();
  }

  /** CONNECT (when through a proxy), then the TLS handshake; `session`: a TLS session to offer. */
  static async open(t: LeanTarget, session?: Buffer): Promise<LeanConnection> {
    const u = new URL(t.origin);
    const raw = await openTunnel(t);
    // What tls.connect does with a connected socket, without its JavaScript identity check.
    const s = new TLSSocket(raw, { isServer: false, secureContext: t.secureContext, ...(session ? { session } : {}) });
    const internal = s as unknown as { setServername(name: string): void; _start(): void; _handle: { verifyError(): Error | null } };
    internal.setServername(u.hostname);
    internal._start();
    raw.resume();
    await new Promise<void>((res, rej) => s.once('secure', res).once('error', rej));
    s.removeAllListeners('error');
    const verifyError = internal._handle.verifyError();
    const cert = s.isSessionReused() ? null : s.getPeerX509Certificate();
    if (verifyError || (cert && cert.checkHost(u.hostname) === undefined)) {
      s.destroy();
      throw Object.assign(new Error(`the server's certificate: ${verifyError?.message ?? `not for ${u.hostname}`}`), { code: 'CERT_REFUSED' });
    }
    return new LeanConnection(s, u.host);
  }

  /**
   * Sends one request and reads its whole response (the body is counted, not kept). No
   * `Connection: close` is ever sent, even on a connection used once (closed here after the
   * response, as undici closes a dispatcher): raw http-mitm-proxy forwards that hop-by-hop
   * header upstream, which would close its pooled upstream connection and cost it a new
   * upstream TLS handshake per request (measured: 3.2 ms of its CPU per new connection
   * instead of 1.7), a penalty an agent's client need not impose on it.
   */
  request(r: LeanRequest): Promise<LeanResponse> {
    if (this.#closed) return Promise.reject(Object.assign(new Error('connection closed'), { code: 'UND_ERR_SOCKET' }));
    let head = `${r.method} ${r.path} HTTP/1.1\r\nhost: ${this.#host}\r\n`;
    for (const [k, v] of Object.entries(r.headers)) head += `${k}: ${v}\r\n`;
    if (r.body) head += `content-length: ${r.body.length}\r\n`;
    head += '\r\n';
    this.#parser = new ResponseParser(r.method === 'HEAD');
    const done = new Promise<LeanResponse>((resolve, reject) => {
      this.#pending = { resolve, reject };
    });
    // One write: the head and a small body go out in one TLS record.
    this.#socket.write(r.body ? Buffer.concat([Buffer.from(head, 'latin1'), r.body]) : head);
    return done;
  }

  close(): void {
    this.#closed = true;
    this.#socket.destroy();
  }

  #onData(d: Buffer): void {
    const parser = this.#parser;
    if (!parser || !this.#pending) return;
    let res: LeanResponse | null;
    try {
      res = parser.push(d);
    } catch (err) {
      this.close();
      const p = this.#pending;
      this.#pending = null;
      p.reject(err as Error);
      return;
    }
    if (!res) return;
    const p = this.#pending;
    this.#pending = null;
    this.#parser = null;
    if (res.close) this.close();
    p.resolve(res);
  }
}

/** An HTTP/1.1 response: the head, then a Content-Length or chunked body (counted). */
class ResponseParser {
  #head: Buffer | null = Buffer.alloc(0) as Buffer;
  #status = 0;
  #headers: Record<string, string> = {};
  #bodyBytes = 0;
  /** Content-Length body: bytes still to come. */
  #left = 0;
  #chunked = false;
  /** Chunked: the bytes of a chunk-size line (or the CRLF after a chunk's data) not yet complete. */
  #line = '';
  /** Chunked: data bytes of the current chunk still to come (then its CRLF). */
  #chunkLeft = 0;
  #afterChunk = false;
  #trailer = false;

  constructor(readonly noBody: boolean) {}

  push(d: Buffer): LeanResponse | null {
    if (this.#head) {
      const buf = this.#head.length ? Buffer.concat([this.#head, d]) : d;
      const end = buf.indexOf(CRLF2);
      if (end < 0) {
        if (buf.length > 64 * 1024) throw new Error('response head too large');
        this.#head = buf;
        return null;
      }
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
      if (!m) throw new Error(`bad status line: ${lines[0]!.slice(0, 80)}`);
      this.#status = Number(m[1]);
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) this.#headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      this.#head = null;
      const te = this.#headers['transfer-encoding'];
      if (this.noBody || this.#status === 204 || this.#status === 304) return this.#done();
      if (te && /chunked/i.test(te)) this.#chunked = true;
      else if (this.#headers['content-length'] !== undefined) this.#left = Number(this.#headers['content-length']);
      else throw new Error('a response without Content-Length or chunked (read to close is not supported)');
      d = buf.subarray(end + 4);
      if (!this.#chunked && this.#left === 0) return this.#done();
    }
    return this.#chunked ? this.#pushChunked(d) : this.#pushLength(d);
  }

  #pushLength(d: Buffer): LeanResponse | null {
    if (d.length > this.#left) throw new Error('more bytes than Content-Length');
    this.#left -= d.length;
    this.#bodyBytes += d.length;
    return this.#left === 0 ? this.#done() : null;
  }

  #pushChunked(d: Buffer): LeanResponse | null {
    let i = 0;
    while (i < d.length) {
      if (this.#chunkLeft > 0) {
        const n = Math.min(this.#chunkLeft, d.length - i);
        this.#chunkLeft -= n;
        this.#bodyBytes += n;
        i += n;
        if (this.#chunkLeft === 0) this.#afterChunk = true;
        continue;
      }
      // A line: a chunk size, the CRLF after a chunk's data, or (after the last chunk) trailers.
      const nl = d.indexOf(10, i);
      if (nl < 0) {
        this.#line += d.subarray(i).toString('latin1');
        if (this.#line.length > 4096) throw new Error('chunk line too long');
        return null;
      }
      const line = (this.#line + d.subarray(i, nl).toString('latin1')).replace(/\r$/, '');
      this.#line = '';
      i = nl + 1;
      if (this.#afterChunk) {
        if (line !== '') throw new Error('no CRLF after a chunk');
        this.#afterChunk = false;
        continue;
      }
      if (this.#trailer) {
        if (line === '') {
          if (i !== d.length) throw new Error('bytes after the response');
          return this.#done();
        }
        continue;
      }
      const size = parseInt(line.split(';')[0]!, 16);
      if (!Number.isFinite(size) || size < 0) throw new Error(`bad chunk size: ${line.slice(0, 40)}`);
      if (size === 0) this.#trailer = true;
      else this.#chunkLeft = size;
    }
    return null;
  }

  #done(): LeanResponse {
    const connection = (this.#headers.connection ?? '').toLowerCase();
    return { status: this.#status, headers: this.#headers, bodyBytes: this.#bodyBytes, close: connection.includes('close') };
  }
}
