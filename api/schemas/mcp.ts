import Joi from 'joi';
import { CATEGORIES } from '../../policy-engine/index.js';

/**
 * PUT `/v1/mcp-servers/{name}` and `/v1/environments/{id}/mcp-servers/{name}` (issue 28,
 * docs/mcp.md): the shape only (422). Values (an https URL, tool names, a secret name, the
 * name in the path) are the service's to check (400).
 */
export const mcpServerPutSchema = Joi.object({
  url: Joi.string().required().description('The server\'s Streamable HTTP endpoint (https://)'),
  secret: Joi.string().allow(null).description('The environment or developer secret whose placeholder the agent sends as its bearer token; swapped only in Authorization, only to this URL\'s host (the secret\'s allowed_hosts must include it)'),
  tools: Joi.object().pattern(/.*/, Joi.string().valid(...CATEGORIES)).allow(null).description('Tool name → category; first in the order map, annotations, default_category'),
  default_category: Joi.string().valid(...CATEGORIES).allow(null).description('Tools neither in the map nor annotated in a tools/list answer; omitted: such a tool is change_permission (fail closed)'),
});

export const mcpServerNameParam = { name: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/).description('The registration name; its requests are connector mcp:<name>') };
