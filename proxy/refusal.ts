import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERROR_CODES, type ErrorCode } from '../lib/errors.js';

/**
 * The one place a refusal becomes a response: JSON `{error, message}` with the status of
 * the error registry and `X-Gateway-Error: <code>`, so an agent can tell the gateway's
 * refusal from an upstream's answer. A refusal is a value in the pipeline, not an exception.
 */
export interface Refusal {
  code: ErrorCode;
  message: string;
  /** Seconds for `Retry-After` (a node stopping: issue 25, item 7); absent on most refusals. */
  retryAfter?: number;
}

export const refusal = (code: ErrorCode, message: string): Refusal => ({ code, message });

export function sendRefusal(req: IncomingMessage, res: ServerResponse, r: Refusal): number {
  const status = ERROR_CODES[r.code].status;
  const body = JSON.stringify({ error: r.code, message: r.message });
  if (!res.headersSent) {
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-gateway-error': r.code,
      'cache-control': 'no-store',
    };
    if (r.code === 'proxy_auth_required') headers['proxy-authenticate'] = 'Basic realm="agent-gateway"';
    if (r.retryAfter !== undefined) headers['retry-after'] = r.retryAfter;
    res.writeHead(status, headers);
  }
  res.end(body);
  // Drain what the client still sends so the connection stays usable for keep-alive.
  if (!req.complete) req.resume();
  return status;
}

/** A refusal on a raw CONNECT socket, before any tunnel exists (407 and friends). */
export function refuseSocket(socket: Duplex, r: Refusal): void {
  const status = ERROR_CODES[r.code].status;
  const body = JSON.stringify({ error: r.code, message: r.message });
  // The standard reason phrase: a 502 or 503 on a raw socket read "Error" before.
  const reason = STATUS_CODES[status] ?? 'Error';
  const extra = (status === 407 ? 'Proxy-Authenticate: Basic realm="agent-gateway"\r\n' : '') + (r.retryAfter !== undefined ? `Retry-After: ${r.retryAfter}\r\n` : '');
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Gateway-Error: ${r.code}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

/** `Proxy-Authorization: Basic base64(<environment id>:<password>)`. */
export function parseProxyAuthorization(header: string | undefined): { user: string; password: string } | null {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
