import { createServer as createHttpsServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { generateCa, type CaMaterial } from '../../certs/ca.js';
import { createLeafIssuer } from '../../certs/leaf.js';
import { createTlsServerOptions } from '../../certs/mitm.js';

/** What the MCP server saw of each HTTP request (the bearer it got, its session). */
export interface McpSeen {
  method: string;
  url: string;
  authorization: string | undefined;
  sessionId: string | undefined;
}

export interface ToolSpec {
  name: string;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean };
}

export interface TestMcpServer {
  port: number;
  ca: CaMaterial;
  seen: McpSeen[];
  /** Tool calls the server ran: tool name and the Authorization it was called with. */
  calls: Array<{ tool: string; authorization: string | undefined; args: unknown }>;
  sessions: Set<string>;
  close(): Promise<void>;
}

/**
 * A real MCP server (the official SDK's McpServer over StreamableHTTPServerTransport, with
 * sessions) behind HTTPS with a certificate from its own CA, at /mcp. Every tool answers a
 * text naming the tool and echoing the Authorization header it was called with (so a test
 * can prove the gateway redacts the real value from the answer).
 */
export async function startMcpServer(tools: ToolSpec[], opts: { ca?: CaMaterial } = {}): Promise<TestMcpServer> {
  const ca = opts.ca ?? (await generateCa({ commonName: 'Test MCP CA' }));
  const seen: McpSeen[] = [];
  const calls: TestMcpServer['calls'] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const sessions = new Set<string>();

  function makeServer(): McpServer {
    const server = new McpServer({ name: 'test-mcp', version: '1.0.0' });
    for (const t of tools) {
      const inputSchema = { repo: z.string().optional() };
      server.registerTool(t.name, { description: `the ${t.name} tool`, inputSchema, ...(t.annotations ? { annotations: t.annotations } : {}) }, async (args, extra) => {
        const authorization = extra.requestInfo?.headers?.authorization as string | undefined;
        calls.push({ tool: t.name, authorization, args });
        return { content: [{ type: 'text', text: `${t.name} ran with ${authorization ?? 'no credential'}` }] };
      });
    }
    return server;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const sid = req.headers['mcp-session-id'] as string | undefined;
    seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, sessionId: sid });
    if (!req.url?.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    let t = sid ? transports.get(sid) : undefined;
    if (!t) {
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, created);
          sessions.add(id);
        },
      });
      t = created;
      await makeServer().connect(t);
    }
    await t.handleRequest(req, res);
  }

  const issuer = await createLeafIssuer(ca);
  const server: Server = createHttpsServer(createTlsServerOptions(issuer, { defaultHostname: 'localhost' }), (req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    ca,
    seen,
    calls,
    sessions,
    close: async () => {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
