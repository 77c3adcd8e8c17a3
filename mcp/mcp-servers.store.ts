import type { Queryable } from '../store/db.js';

/** A row of `mcp_servers` (migrations/0036_mcp_servers.ts). */
export interface McpServerRow {
  id: string;
  developer_id: string;
  environment_id: string | null;
  /** '*' for a developer-level registration, else the environment id. */
  scope: string;
  name: string;
  url: string;
  secret: string | null;
  /** JSON object: tool name → category. */
  tools: string;
  default_category: string | null;
  created_at: number;
  updated_at: number;
}

export const DEVELOPER_SCOPE = '*';

/** The only module that queries `mcp_servers`. */
export const mcpServersStore = {
  list(db: Queryable, developerId: string, scope: string): Promise<McpServerRow[]> {
    return db<McpServerRow>('mcp_servers').where({ developer_id: developerId, scope }).orderBy('name');
  },
  get(db: Queryable, developerId: string, scope: string, name: string): Promise<McpServerRow | undefined> {
    return db<McpServerRow>('mcp_servers').where({ developer_id: developerId, scope, name }).first();
  },
  async insert(db: Queryable, row: McpServerRow): Promise<void> {
    await db('mcp_servers').insert(row);
  },
  async update(db: Queryable, id: string, patch: Pick<McpServerRow, 'url' | 'secret' | 'tools' | 'default_category' | 'updated_at'>): Promise<void> {
    await db('mcp_servers').where({ id }).update(patch);
  },
  remove(db: Queryable, developerId: string, scope: string, name: string): Promise<number> {
    return db('mcp_servers').where({ developer_id: developerId, scope, name }).delete();
  },
  count(db: Queryable, developerId: string, scope: string): Promise<number> {
    return db('mcp_servers').where({ developer_id: developerId, scope }).count({ n: '*' }).first().then((r) => Number(r?.n ?? 0));
  },
  /** An environment's own registrations and its developer's, in one query. */
  forEnvironment(db: Queryable, developerId: string, environmentId: string): Promise<McpServerRow[]> {
    return db<McpServerRow>('mcp_servers').where({ developer_id: developerId }).whereIn('scope', [environmentId, DEVELOPER_SCOPE]).orderBy('name');
  },
  /** The same rows, their name, scope and URL only (the egress allowlist reads no tools map). */
  urlsForEnvironment(db: Queryable, developerId: string, environmentId: string): Promise<Array<Pick<McpServerRow, 'name' | 'scope' | 'url'>>> {
    return db<McpServerRow>('mcp_servers').where({ developer_id: developerId }).whereIn('scope', [environmentId, DEVELOPER_SCOPE]).orderBy('name').select('name', 'scope', 'url');
  },
};
