/**
 * A local webhook receiver for the delivery tests (not a test file: mocha loads only
 * `*.test.ts`). It records every request with its raw body and answers as told.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body bytes exactly as received. */
  raw: Buffer;
  /** Wall-clock ms when the body was complete. */
  at: number;
}

/** What to answer: a status (with headers), or 'hang' (accept, read, never answer). */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  url: string;
  origin: string;
  requests: Received[];
  /** Called for each request (0-based index among requests to this receiver). */
  answer: (req: Received, index: number) => Answer;
  /** Requests whose answer is 'hang' and that are still open. */
  hanging(): number;
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitUntil(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

export async function startReceiver(answer: Receiver['answer'] = () => ({ status: 200 }), path = '/hooks'): Promise<Receiver> {
  const requests: Received[] = [];
  const sockets = new Set<Socket>();
  const open = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw: Buffer.concat(chunks), at: Date.now() };
      const index = requests.length;
      requests.push(rec);
      const a = receiver.answer(rec, index);
      if (a === 'hang') {
        open.add(res);
        res.on('close', () => open.delete(res));
        return;
      }
      res.writeHead(a.status, { 'content-type': 'text/plain', ...(a.headers ?? {}) });
      res.end(a.body ?? 'ok');
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const receiver: Receiver = {
    url: `${origin}${path}`,
    origin,
    requests,
    answer,
    hanging: () => open.size,
    async waitFor(count, timeoutMs = 5_000) {
      await waitUntil(`${count} webhook request(s) (got ${requests.length})`, () => requests.length >= count, timeoutMs);
      return requests.slice(0, count);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return receiver;
}
