import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { constantTimeEqual } from '../lib/crypto.js';
import { DriverError, type ExecRequest, type ExecResult } from './driver.js';
import type { HostAgent } from './host-agent.js';

/**
 * Exec and files on a host in another process (docs/environments.md, Several hosts): the
 * host serves them over HTTP at the `endpoint` it registered; an API process calls it.
 *
 * Authentication: `Authorization: Bearer HMAC-SHA256(subkey, host id)`, the subkey derived
 * from the master key every process of one deployment shares, so no token is stored or
 * configured, and a token opens one host only. Bodies are JSON; exec answers NDJSON lines
 * (`{o, d}` output chunks when streaming, then one `{result}` or `{error}`), so a long
 * build streams across hosts too. Closing the connection kills the command.
 */
export interface HostHandle {
  exec(id: string, req: ExecRequest): Promise<ExecResult>;
  readFile(id: string, path: string, max: number): Promise<Buffer>;
  writeFile(id: string, path: string, data: Buffer): Promise<{ path: string; size: number }>;
  /** True/false when this process knows the VM's state; null for a remote host (the store's state is used). */
  isRunning(id: string): boolean | null;
  notify(): void;
  nextChange(ms: number): Promise<void>;
  /** A host in this process heartbeats before the offline sweep (its clock may have jumped). */
  heartbeat?(): Promise<void>;
}

export function hostToken(subkey: Buffer, hostId: string): string {
  return createHmac('sha256', subkey).update(hostId).digest('base64url');
}

const MAX_BODY = 64 * 1024 * 1024;

function readBody(req: IncomingMessage): Promise<any> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        req.destroy();
        reject(new Error('body too large'));
      } else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

function errorOf(err: unknown): { kind: string; message: string } {
  return err instanceof DriverError ? { kind: err.kind, message: err.message } : { kind: 'guest_unavailable', message: 'the host could not do it' };
}

/** The host side: serves its agent's exec and files. */
export async function startHostRpc(opts: { agent: HostAgent; subkey: Buffer; host: string; port: number }): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const token = hostToken(opts.subkey, opts.agent.hostId);
  const server = createServer((req, res) => void handle(req, res));
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const auth = req.headers.authorization ?? '';
    if (req.method !== 'POST' || !constantTimeEqual(auth, `Bearer ${token}`)) {
      res.writeHead(req.method !== 'POST' ? 405 : 401).end();
      return;
    }
    let body: any;
    try {
      body = await readBody(req);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const id = String(body.environment_id ?? '');
    const json = (status: number, v: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(v));
    };
    try {
      if (req.url === '/exec') {
        const abort = new AbortController();
        res.on('close', () => {
          if (!res.writableFinished) abort.abort();
        });
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        try {
          const r = await opts.agent.exec(id, {
            command: body.command, cwd: body.cwd, env: body.env,
            stdin: body.stdin !== undefined ? Buffer.from(body.stdin, 'base64') : undefined,
            timeoutMs: body.timeout_ms, maxOutputBytes: body.max_output_bytes,
            onOutput: body.stream ? (o, d) => res.write(`${JSON.stringify({ o, d: d.toString('base64') })}\n`) : undefined,
            signal: abort.signal,
          });
          res.end(`${JSON.stringify({ result: { ...r, stdout: r.stdout.toString('base64'), stderr: r.stderr.toString('base64') } })}\n`);
        } catch (err) {
          res.end(`${JSON.stringify({ error: errorOf(err) })}\n`);
        }
        return;
      }
      if (req.url === '/files/read') {
        const data = await opts.agent.readFile(id, String(body.path), Number(body.max));
        json(200, { data: data.toString('base64') });
        return;
      }
      if (req.url === '/files/write') {
        json(200, await opts.agent.writeFile(id, String(body.path), Buffer.from(String(body.data), 'base64')));
        return;
      }
      json(404, { error: { kind: 'guest_unavailable', message: 'no such call' } });
    } catch (err) {
      json(409, { error: errorOf(err) });
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

const KINDS = new Set(['start_failed', 'exec_failed', 'guest_unavailable', 'file_not_found', 'file_path_refused', 'file_failed']);

function toDriverError(e: { kind?: string; message?: string } | undefined): DriverError {
  const kind = KINDS.has(e?.kind ?? '') ? e!.kind as DriverError['kind'] : 'guest_unavailable';
  return new DriverError(kind, e?.message ?? 'the host could not do it');
}

/** The API side: a host in another process, reached at its registered endpoint. */
export function remoteHost(endpoint: string, token: string, dispatcher: Agent): HostHandle {
  const call = async (path: string, body: unknown, signal?: AbortSignal) => {
    try {
      return await request(`${endpoint.replace(/\/$/, '')}${path}`, {
        method: 'POST', dispatcher, signal,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: 15_000,
        bodyTimeout: 0,
      });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new DriverError('guest_unavailable', 'the environment\'s host cannot be reached');
    }
  };
  return {
    async exec(id, req) {
      const res = await call('/exec', {
        environment_id: id, command: req.command, cwd: req.cwd, env: req.env,
        stdin: req.stdin !== undefined ? Buffer.from(req.stdin).toString('base64') : undefined,
        timeout_ms: req.timeoutMs, max_output_bytes: req.maxOutputBytes, stream: Boolean(req.onOutput),
      }, req.signal);
      if (res.statusCode !== 200) {
        await res.body.dump();
        throw new DriverError('guest_unavailable', `the environment's host refused the call (${res.statusCode})`);
      }
      let buf = '';
      let last: any = null;
      for await (const chunk of res.body) {
        buf += chunk.toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = JSON.parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          if (line.o) req.onOutput?.(line.o, Buffer.from(line.d, 'base64'));
          else last = line;
        }
      }
      if (!last) throw new DriverError('guest_unavailable', 'the environment\'s host disconnected midway');
      if (last.error) throw toDriverError(last.error);
      const r = last.result;
      return { ...r, stdout: Buffer.from(r.stdout, 'base64'), stderr: Buffer.from(r.stderr, 'base64') };
    },
    async readFile(id, path, max) {
      const res = await call('/files/read', { environment_id: id, path, max });
      const body = (await res.body.json()) as any;
      if (res.statusCode !== 200) throw toDriverError(body.error);
      return Buffer.from(body.data, 'base64');
    },
    async writeFile(id, path, data) {
      const res = await call('/files/write', { environment_id: id, path, data: data.toString('base64') });
      const body = (await res.body.json()) as any;
      if (res.statusCode !== 200) throw toDriverError(body.error);
      return body;
    },
    isRunning: () => null,
    notify: () => {},
    nextChange: (ms) => new Promise((r) => setTimeout(r, Math.min(ms, 200))),
  };
}
