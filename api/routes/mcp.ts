import { Router, type Request } from 'express';
import type { McpServerInput, McpServersService } from '../../mcp/mcp-servers.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam } from '../schemas/common.js';
import { mcpServerNameParam, mcpServerPutSchema } from '../schemas/mcp.js';
import { mcpServerList, mcpServerRecord } from '../schemas/records.js';

/**
 * MCP server registrations (issue 28, docs/mcp.md): the developer's (`/mcp-servers`) and an
 * environment's own (`/environments/{id}/mcp-servers`), which override the developer's of
 * the same name, as secrets do. PUT answers 201 when it created one and 200 when it replaced one.
 */
export function mcpRouter(deps: { mcp: McpServersService }): Router {
  const { mcp } = deps;
  const r = Router();
  const env = (req: Request): string | null => (req.params.id as string | undefined) ?? null;
  const put = async (req: Request, res: import('express').Response) => {
    const body = validateBody<McpServerInput>(mcpServerPutSchema, requireJson(req));
    const out = await mcp.put(developerOf(req).id, env(req), req.params.name as string, body);
    res.status(out.created ? 201 : 200).json(out.server);
  };
  const envName = { ...environmentIdParam, ...mcpServerNameParam };

  r.get('/mcp-servers', describeRoute({ summary: 'List the developer\'s MCP server registrations', responses: { 200: mcpServerList } }), async (req, res) => {
    res.json({ data: await mcp.list(developerOf(req).id, null) });
  });
  r.get('/mcp-servers/:name', describeRoute({ params: mcpServerNameParam, summary: 'Get a developer-level MCP server registration', responses: { 200: mcpServerRecord } }), async (req, res) => {
    res.json(await mcp.get(developerOf(req).id, null, req.params.name as string));
  });
  r.put('/mcp-servers/:name', describeRoute({ params: mcpServerNameParam, summary: 'Register (201) or replace (200) an MCP server for every environment', body: mcpServerPutSchema, responses: { 201: mcpServerRecord, 200: mcpServerRecord } }), put);
  r.delete('/mcp-servers/:name', describeRoute({ params: mcpServerNameParam, summary: 'Remove a developer-level MCP server registration', responses: { 204: null } }), async (req, res) => {
    await mcp.remove(developerOf(req).id, null, req.params.name as string);
    res.status(204).end();
  });

  r.get('/environments/:id/mcp-servers', describeRoute({ params: environmentIdParam, summary: 'List the environment\'s own MCP server registrations', responses: { 200: mcpServerList } }), async (req, res) => {
    res.json({ data: await mcp.list(developerOf(req).id, req.params.id as string) });
  });
  r.get('/environments/:id/mcp-servers/:name', describeRoute({ params: envName, summary: 'Get an environment\'s MCP server registration', responses: { 200: mcpServerRecord } }), async (req, res) => {
    res.json(await mcp.get(developerOf(req).id, req.params.id as string, req.params.name as string));
  });
  r.put('/environments/:id/mcp-servers/:name', describeRoute({ params: envName, summary: 'Register (201) or replace (200) an MCP server for this environment (overrides the developer\'s of the same name)', body: mcpServerPutSchema, responses: { 201: mcpServerRecord, 200: mcpServerRecord }, errors: ['environment_destroyed'] }), put);
  r.delete('/environments/:id/mcp-servers/:name', describeRoute({ params: envName, summary: 'Remove an environment\'s MCP server registration', responses: { 204: null } }), async (req, res) => {
    await mcp.remove(developerOf(req).id, req.params.id as string, req.params.name as string);
    res.status(204).end();
  });
  return r;
}
