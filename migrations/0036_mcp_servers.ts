import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * MCP servers through the gateway (issue 28; docs/mcp.md):
 * - mcp_servers: a developer's registrations (scope '*') and an environment's own (scope =
 *   the environment id), which shadow the developer's of the same name, as secrets do.
 *   `tools` is JSON of the developer's map (tool name → category); `secret` names an
 *   environment or developer secret (its placeholder is the agent's bearer token).
 * - grants.tool, approvals.tool: the MCP tool(s) of the approved request; a grant covers
 *   only requests calling the same tool(s). Null for everything else (and older rows).
 * - audit_log.tool: the tool(s) a request called; hashed into the chain only when not null
 *   (audit/chain.ts), so older entries keep their hashes.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'mcp_servers', (t) => {
    t.string('id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('environment_id', 40).nullable();
    t.string('scope', 40).notNullable();
    t.string('name', 64).notNullable();
    t.string('url', 2048).notNullable();
    t.string('secret', 64).nullable();
    t.text('tools').notNullable();
    t.string('default_category', 32).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['developer_id', 'scope', 'name']);
  });
  await knex.schema.alterTable('grants', (t) => {
    t.text('tool').nullable();
  });
  await knex.schema.alterTable('approvals', (t) => {
    t.text('tool').nullable();
  });
  await knex.schema.alterTable('audit_log', (t) => {
    t.text('tool').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.dropColumn('tool');
  });
  await knex.schema.alterTable('approvals', (t) => {
    t.dropColumn('tool');
  });
  await knex.schema.alterTable('grants', (t) => {
    t.dropColumn('tool');
  });
  await knex.schema.dropTable('mcp_servers');
}
