import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { constantTimeEqual } from '../lib/crypto.js';
import { DriverError, EXEC_STREAM_BACKLOG_BYTES, type ExecRequest, type ExecResult } from './driver.js';
import type { HostAgent } from './host-agent.js';

/**
 * The RPC every node serves (docs/deploy.md, "Nodes"; docs/environments.md, Several hosts).
 * Every process that runs a gateway proxy (`gateway start`, `gateway host`) listens on
 * GATEWAY_HOST_RPC_PORT and registers GATEWAY_HOST_RPC_URL (default http://HOST:port):
 *
 * - node calls, on every node: `POST /approvals/decided {approval_id}` from the node where
 *   an approval was decided to the node whose proxy holds the agent's request. It carries
 *   only the id: the holder reads the outcome from the store itself, so a poke can at most
 *   cause one read, and only for an approval this node is waiting on. 204 whatever the
 *   approval (it never tells a caller which ids are held).
 * - host calls, where an environment host runs: exec and files for API processes elsewhere.
 *
 * Authentication: `Authorization: Bearer HMAC-SHA256(subkey, id)`, the subkey derived from
 * the master key every process of one deployment shares, so no token is stored or
 * configured; host calls use the `host-rpc` subkey over the host id (a token opens one host
 * only), node calls the `node-rpc` subkey over the node id (a token pokes one node only, for
 * its life: the id is new at every start). Bodies are JSON, bounded; exec answers NDJSON
 * lines (`{o, d}` output chunks when streaming, then one `{result}` or `{error}`), so a long
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

/** Host calls carry files and stdin (64 MiB); a node call is one id. */
const MAX_BODY = 64 * 1024 * 1024;
const MAX_NODE_BODY = 1024;
const APPROVAL_ID = /^apr_[0-9a-f]{24}$/;

class BodyError extends Error {
  constructor(readonly status: 400 | 413) {
    super(status === 413 ? 'body too large' : 'body is not a JSON object');
  }
}

/** The request's JSON object; BodyError(413) past `max` bytes, BodyError(400) for anything but an object. */
function readBody(req: IncomingMessage, max: number): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.resume();
        reject(new BodyError(413));
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (size > max) return;
      try {
        const v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (v === null || typeof v !== 'object' || Array.isArray(v)) reject(new BodyError(400));
        else resolve(v);
      } catch {
        reject(new BodyError(400));
      }
    });
    req.on('error', reject);
  });
}

function errorOf(err: unknown): { kind: string; message: string } {
  return err instanceof DriverError ? { kind: err.kind, message: err.message } : { kind: 'guest_unavailable', message: 'the host could not do it' };
}

export interface NodeRpcOptions {
  host: string;
  port: number;
  /** keyring.deriveSubkey('host-rpc'): host calls, once serveAgent() gave the server a host. */
  hostSubkey: Buffer;
  /** Node calls; null: this server answers none (401). */
  node: {
    /** The token node calls must carry (hosts/nodes.service.ts nodeToken of this node's id). */
    token: string;
    /** An approval this node may hold was decided elsewhere: re-read it and release its waiters. Must not throw. */
    onDecided(approvalId: string): Promise<void>;
  } | null;
}

export interface NodeRpc {
  server: Server;
  port: number;
  /** From now on, also serve this host's exec and files. */
  serveAgent(agent: HostAgent): void;
  close(): Promise<void>;
}

/** A node's RPC server (see above). Answers 405 to anything but POST, 401 before reading a body, never 5xx for garbage. */
export async function startNodeRpc(opts: NodeRpcOptions): Promise<NodeRpc> {
  let agent: HostAgent | null = null;
  let agentToken: string | null = null;
  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(400).end();
      else res.destroy();
    });
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const auth = req.headers.authorization ?? '';
    if (req.method !== 'POST') {
      res.writeHead(405, { connection: 'close' }).end();
      return;
    }
    if (req.url === '/approvals/decided') {
      if (!opts.node || !constantTimeEqual(auth, `Bearer ${opts.node.token}`)) {
        res.writeHead(401, { connection: 'close' }).end();
        return;
      }
      let body: Record<string, any>;
      try {
        body = await readBody(req, MAX_NODE_BODY);
      } catch (err) {
        res.writeHead(err instanceof BodyError ? err.status : 400, { connection: 'close' }).end();
        return;
      }
      const id = body.approval_id;
      if (typeof id !== 'string' || !APPROVAL_ID.test(id)) {
        res.writeHead(400).end();
        return;
      }
      await opts.node.onDecided(id).catch(() => {});
      res.writeHead(204).end();
      return;
    }
    if (!agent || !agentToken || !constantTimeEqual(auth, `Bearer ${agentToken}`)) {
      res.writeHead(401, { connection: 'close' }).end();
      return;
    }
    const host = agent;
    let body: Record<string, any>;
    try {
      body = await readBody(req, MAX_BODY);
    } catch (err) {
      res.writeHead(err instanceof BodyError ? err.status : 400, { connection: 'close' }).end();
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
          const r = await host.exec(id, {
            command: body.command, cwd: body.cwd, env: body.env,
            stdin: body.stdin !== undefined ? Buffer.from(body.stdin, 'base64') : undefined,
            timeoutMs: body.timeout_ms, maxOutputBytes: body.max_output_bytes,
            onOutput: body.stream
              ? (o, d) => {
                if (res.destroyed) return;
                res.write(`${JSON.stringify({ o, d: d.toString('base64') })}\n`);
                // The node reading this stream stopped (its own client did): cut it, never hold it all.
                if (res.writableLength > EXEC_STREAM_BACKLOG_BYTES) {
                  abort.abort();
                  res.destroy();
                }
              }
              : undefined,
            signal: abort.signal,
          });
          res.end(`${JSON.stringify({ result: { ...r, stdout: r.stdout.toString('base64'), stderr: r.stderr.toString('base64') } })}\n`);
        } catch (err) {
          res.end(`${JSON.stringify({ error: errorOf(err) })}\n`);
        }
        return;
      }
      if (req.url === '/files/read') {
        const data = await host.readFile(id, String(body.path), Number(body.max));
        json(200, { data: data.toString('base64') });
        return;
      }
      if (req.url === '/files/write') {
        json(200, await host.writeFile(id, String(body.path), Buffer.from(String(body.data), 'base64')));
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
    serveAgent(a) {
      agent = a;
      agentToken = hostToken(opts.hostSubkey, a.hostId);
    },
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
