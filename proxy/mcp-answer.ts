import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { MAX_TOOLS_LIST_ANSWER, parseToolsListAnswer, type JsonRpcId } from '../policy-engine/classify/mcp.js';
import type { McpServerRoute } from './credentials.js';
import type { Refusal } from './refusal.js';

/**
 * The MCP side of answers (issue 28, docs/mcp.md): what the gateway reads of a registered
 * server's answer to tools/list (its tools' annotations, per server), and how a refusal of
 * an MCP request reaches the agent's MCP client.
 */

/**
 * Collects the answer to a tools/list request as it streams through (it is forwarded
 * unchanged), up to MAX_TOOLS_LIST_ANSWER bytes, and teaches the server's route its tools'
 * annotations once the answer is complete. A compressed, failed, cut or larger answer
 * teaches nothing.
 */
export class ToolsListTap {
  #chunks: Buffer[] = [];
  #size = 0;
  #off = false;
  #contentType: string | undefined;

  constructor(
    readonly route: McpServerRoute,
    readonly listIds: readonly JsonRpcId[],
  ) {}

  start(status: number, headers: IncomingHttpHeaders): void {
    const enc = String(headers['content-encoding'] ?? '').trim().toLowerCase();
    if (status !== 200 || (enc !== '' && enc !== 'identity')) this.#off = true;
    this.#contentType = typeof headers['content-type'] === 'string' ? headers['content-type'] : undefined;
  }

  push(chunk: Buffer): void {
    if (this.#off) return;
    this.#size += chunk.length;
    if (this.#size > MAX_TOOLS_LIST_ANSWER) {
      this.#off = true;
      this.#chunks = [];
      return;
    }
    this.#chunks.push(chunk);
  }

  end(): void {
    if (this.#off) return;
    this.#off = true;
    const tools = parseToolsListAnswer(this.#contentType, Buffer.concat(this.#chunks, this.#size), this.listIds);
    this.#chunks = [];
    this.route.learn(tools);
  }
}

/** The JSON-RPC error code of every gateway refusal (the implementation-defined server error range). */
export const MCP_REFUSAL_CODE = -32001;

/**
 * A refusal of an MCP request as its client can show it: HTTP 200 with a JSON-RPC error per
 * request id (an array for a batch), `X-Gateway-Error` kept. The official SDK client turns
 * a non-2xx answer into a transport error and drops the body; this one reaches the caller
 * of callTool as an McpError with the gateway's code and message.
 */
export function sendMcpRefusal(req: IncomingMessage, res: ServerResponse, r: Refusal, ids: readonly JsonRpcId[], batch: boolean): void {
  const errors = ids.map((id) => ({ jsonrpc: '2.0', id, error: { code: MCP_REFUSAL_CODE, message: `${r.code}: ${r.message}`, data: { gateway_error: r.code } } }));
  const body = JSON.stringify(batch ? errors : errors[0]);
  if (!res.headersSent) {
    const headers: Record<string, string | number> = {
      'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-gateway-error': r.code, 'cache-control': 'no-store',
    };
    if (r.retryAfter !== undefined) headers['retry-after'] = r.retryAfter;
    res.writeHead(200, headers);
  }
  res.end(body);
  if (!req.complete) req.resume();
}
