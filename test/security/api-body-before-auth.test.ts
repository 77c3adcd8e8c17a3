import { expect } from 'chai';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { startTestService, type TestService } from '../helpers/service.js';

/**
 * Hole 8 (low): the API read request bodies (up to 64 MiB) before it knew who was asking,
 * so anyone who could reach it could make it read and buffer that much per connection. Now
 * the key is checked from the headers; a stranger gets its 401 before the body is read, and
 * the connection is closed rather than drained.
 */
const BIG = 50 * 1024 * 1024;

interface Upload {
  /** What the server answered (once anything arrived). */
  answer: string;
  /** Body bytes the client managed to hand to the socket before the server closed it. */
  sent: number;
  closed: boolean;
}

/** Sends the head, then body chunks of 1 MiB for as long as the server keeps reading (at most `total`). */
async function upload(url: string, head: string, total: number, ms: number, chunked = false): Promise<Upload> {
  const u = new URL(url);
  const socket: Socket = connect(Number(u.port), u.hostname);
  await once(socket, 'connect');
  let answer = '';
  let closed = false;
  socket.on('data', (d) => (answer += d));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  socket.write(head);
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  let sent = 0;
  const deadline = Date.now() + ms;
  while (sent < total && !closed && Date.now() < deadline) {
    const ok = chunked ? socket.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])) : socket.write(chunk);
    sent += chunk.length;
    // EPIPE/ECONNRESET once the server closes is the point: the race just ends.
    if (!ok) await Promise.race([once(socket, 'drain').catch(() => undefined), once(socket, 'close').catch(() => undefined), new Promise((r) => setTimeout(r, 200))]);
  }
  while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  socket.destroy();
  return { answer, sent, closed };
}

describe('security: the API does not read bodies for strangers (hole 8)', function () {
  this.timeout(30000);
  let t: TestService;
  before(async () => {
    t = await startTestService();
  });
  after(async () => t?.close());

  const head = (path: string, extra = '') =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${BIG}\r\n${extra}\r\n`;

  it('attack: a 50 MiB body without an API key: 401 at once, the connection closed, most of the body never read', async () => {
    const r = await upload(t.url, head('/v1/environments'), BIG, 8000);
    expect(r.answer).to.match(/^HTTP\/1\.1 401 /);
    expect(r.answer).to.include('"error":"unauthorized"');
    expect(r.answer.toLowerCase()).to.include('connection: close');
    expect(r.closed).to.equal(true);
    // Socket buffers take a few MiB; reading the body would have taken all 50.
    expect(r.sent).to.be.lessThan(BIG / 2);
  });

  it('attack: the same with a wrong key, and on an unknown route', async () => {
    for (const [path, extra] of [['/v1/environments', 'Authorization: Bearer sk_0000000000000000000000000000000000000000\r\n'], ['/v1/nothing-here', '']]) {
      const r = await upload(t.url, head(path!, extra), BIG, 8000);
      expect(r.answer, path).to.match(/^HTTP\/1\.1 401 /);
      expect(r.sent).to.be.lessThan(BIG / 2);
    }
  });

  it('attack: a 50 MiB body to the public decision endpoint with no key and no signature: 404/401 without reading', async () => {
    const r = await upload(t.url, head('/v1/approvals/apr_000000000000000000000000/decision'), BIG, 8000);
    expect(r.answer).to.match(/^HTTP\/1\.1 404 /);
    expect(r.sent).to.be.lessThan(BIG / 2);
  });

  it('attack: a big body with a (fake) signature is read only up to a decision\'s size: 413', async () => {
    const r = await upload(t.url, head('/v1/approvals/apr_000000000000000000000000/decision', `Service-Signature: t=1,v1=${'0'.repeat(64)}\r\n`), BIG, 8000);
    expect(r.answer).to.match(/^HTTP\/1\.1 413 /);
    expect(r.sent).to.be.lessThan(BIG / 2);
  });

  it('attack: the same as a chunked body (no length to refuse up front): cut off at the limit', async () => {
    const chunkedHead = `POST /v1/approvals/apr_000000000000000000000000/decision HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nService-Signature: t=1,v1=${'0'.repeat(64)}\r\n\r\n`;
    const r = await upload(t.url, chunkedHead, BIG, 8000, true);
    expect(r.answer).to.match(/^HTTP\/1\.1 413 /);
    expect(r.sent).to.be.lessThan(BIG / 2);
  });

  it('a valid key is answered only once its body has arrived (no early answer)', async () => {
    const u = new URL(t.url);
    const socket = connect(Number(u.port), u.hostname);
    await once(socket, 'connect');
    let answer = '';
    socket.on('data', (d) => (answer += d));
    const body = JSON.stringify({ end_user_id: 'slow-uploader' });
    socket.write(`POST /v1/environments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.api.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    await new Promise((r) => setTimeout(r, 300));
    expect(answer).to.equal('');
    socket.write(body.slice(5));
    for (let i = 0; i < 200 && !answer.includes('\r\n\r\n'); i++) await new Promise((r) => setTimeout(r, 10));
    socket.destroy();
    expect(answer).to.match(/^HTTP\/1\.1 201 /);
  });

  it('the service answers normally afterwards', async () => {
    expect((await t.api.get('/v1/environments')).status).to.equal(200);
  });
});
