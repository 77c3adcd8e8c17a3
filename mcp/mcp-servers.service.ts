import { performance } from 'node:perf_hooks';
import type { Db } from '../store/db.js';
import { fromJson, toJson, withTx, isUniqueViolation } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { isCategory, type Category } from '../policy-engine/categories.js';
import { TOOL_NAME, type ListedTool, type McpToolTable } from '../policy-engine/classify/mcp.js';
import { DEVELOPER_SCOPE, mcpServersStore, type McpServerRow } from './mcp-servers.store.js';
import { AnnotationMemory } from './annotations.js';

/** Registration names: what `mcp:<name>` calls the server in policies and the audit log. */
export const MCP_SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** Secret names, as environments/rules.ts SECRET_NAME. */
const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;
export const MAX_MCP_SERVERS_PER_SCOPE = 100;
export const MAX_MAPPED_TOOLS = 1_000;
const MAX_URL = 2048;

export interface McpServerInput {
  url: string;
  secret?: string | null;
  tools?: Record<string, Category> | null;
  default_category?: Category | null;
}

/** The API record. */
export interface McpServerInfo {
  name: string;
  url: string;
  secret: string | null;
  tools: Record<string, string>;
  default_category: string | null;
  /** The policy connector of its requests. */
  connector: string;
  created_at: string | null;
  updated_at: string | null;
}

function toInfo(r: McpServerRow): McpServerInfo {
  return {
    name: r.name,
    url: r.url,
    secret: r.secret ?? null,
    tools: fromJson<Record<string, string>>(r.tools) ?? {},
    default_category: r.default_category ?? null,
    connector: `mcp:${r.name}`,
    created_at: iso(Number(r.created_at)),
    updated_at: iso(Number(r.updated_at)),
  };
}

const invalid = (message: string) => new ServiceError('invalid_request', message);

/** The URL's parts the gateway matches on: https only, no user info, no fragment. */
export function parseServerUrl(url: string): { url: string; host: string; port: number; path: string } | string {
  if (url.length > MAX_URL) return `url must be at most ${MAX_URL} characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'url is not a URL';
  }
  if (u.protocol !== 'https:') return 'url must be https:// (the gateway sends the server\'s credential only over TLS)';
  if (u.username !== '' || u.password !== '') return 'url must not carry a user name or password';
  if (u.hash !== '') return 'url must not have a fragment';
  const host = u.hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (host === '') return 'url has no host';
  return { url: u.toString(), host, port: u.port === '' ? 443 : Number(u.port), path: u.pathname };
}

/** A registered server as the gateway matches and classifies it (proxy/credentials.ts McpServerRoute). */
export interface McpRoute extends McpToolTable {
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly url: string;
  readonly secret: string | null;
  learn(tools: readonly ListedTool[]): void;
}

export interface McpRoutes {
  readonly list: readonly McpRoute[];
  /** The registration whose URL is https://host:port/path (the query is not compared); null: none. */
  match(host: string, port: number, path: string): McpRoute | null;
  /** The registrations on https://host:port, whatever their path. */
  sameOrigin(host: string, port: number): readonly McpRoute[];
}

const NO_ROUTES: McpRoutes = Object.freeze({ list: Object.freeze([]), match: () => null, sameOrigin: () => [] });

interface CacheEntry {
  loadedAt: number;
  promise: Promise<McpRoutes>;
  value?: McpRoutes;
  developerId: string;
}

/**
 * MCP server registrations (issue 28; docs/mcp.md): the developer's (`/v1/mcp-servers`) and
 * an environment's own (`/v1/environments/{id}/mcp-servers`), which shadow the developer's
 * of the same name. The gateway reads an environment's effective registrations through
 * `routesFor` (cached: invalidated after this process's writes, reloaded after `ttlMs`
 * for other processes' writes, a failed load never served) and their hosts join the
 * environment's egress allowlist (`hostsFor`).
 */
export function createMcpServersService(deps: {
  db: Db;
  clock: Clock;
  /** The environment (not destroyed) of this developer; null: 404. */
  environment: (developerId: string, environmentId: string) => Promise<{ destroyed: boolean } | null>;
  /** After every committed write (environmentId null: every environment of the developer): the egress cache drops them. */
  onChanged?: (developerId: string, environmentId: string | null) => void;
  ttlMs?: number;
}) {
  const { db, clock } = deps;
  const ttlMs = deps.ttlMs ?? 1000;
  const memory = new AnnotationMemory();
  const cache = new Map<string, CacheEntry>();

  async function checkScope(developerId: string, environmentId: string | null, write: boolean): Promise<string> {
    if (environmentId === null) return DEVELOPER_SCOPE;
    const env = await deps.environment(developerId, environmentId);
    if (!env) throw notFound();
    if (write && env.destroyed) throw new ServiceError('environment_destroyed', 'the environment is destroyed');
    return environmentId;
  }

  function checkName(name: string): void {
    if (!MCP_SERVER_NAME.test(name)) throw invalid(`MCP server name "${name}" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}`);
  }

  function changed(developerId: string, environmentId: string | null): void {
    if (environmentId === null) {
      for (const [id, e] of cache) if (e.developerId === developerId) cache.delete(id);
    } else cache.delete(environmentId);
    // What a changed registration's server taught is forgotten with it (its key holds the URL, so a new URL starts empty anyway).
    try {
      deps.onChanged?.(developerId, environmentId);
    } catch {
      /* a listener's failure never fails the write */
    }
  }

  async function list(developerId: string, environmentId: string | null): Promise<McpServerInfo[]> {
    const scope = await checkScope(developerId, environmentId, false);
    return (await mcpServersStore.list(db, developerId, scope)).map(toInfo);
  }

  async function get(developerId: string, environmentId: string | null, name: string): Promise<McpServerInfo> {
    checkName(name);
    const scope = await checkScope(developerId, environmentId, false);
    const row = await mcpServersStore.get(db, developerId, scope, name);
    if (!row) throw notFound();
    return toInfo(row);
  }

  /** Creates (created: true) or replaces a registration as a whole. */
  async function put(developerId: string, environmentId: string | null, name: string, input: McpServerInput): Promise<{ created: boolean; server: McpServerInfo }> {
    checkName(name);
    const parsed = parseServerUrl(input.url);
    if (typeof parsed === 'string') throw invalid(parsed);
    if (input.secret != null && !SECRET_NAME.test(input.secret)) throw invalid(`secret "${input.secret}" must be a secret name ([A-Z][A-Z0-9_]{0,63})`);
    const tools = input.tools ?? {};
    const names = Object.keys(tools);
    if (names.length > MAX_MAPPED_TOOLS) throw invalid(`tools maps at most ${MAX_MAPPED_TOOLS} tools`);
    for (const t of names) {
      if (!TOOL_NAME.test(t)) throw invalid(`tools: ${JSON.stringify(t.slice(0, 140))} is not an MCP tool name (1 to 128 of A-Z a-z 0-9 _ - . /)`);
      if (!isCategory(tools[t])) throw invalid(`tools.${t} must be a category`);
    }
    const scope = await checkScope(developerId, environmentId, true);
    const now = clock.nowMs();
    const patch = { url: parsed.url, secret: input.secret ?? null, tools: toJson(tools), default_category: input.default_category ?? null, updated_at: now };
    try {
      return await withTx(db, async (trx) => {
        const existing = await mcpServersStore.get(trx, developerId, scope, name);
        if (existing) {
          await mcpServersStore.update(trx, existing.id, patch);
          return { created: false, server: toInfo({ ...existing, ...patch }) };
        }
        if ((await mcpServersStore.count(trx, developerId, scope)) >= MAX_MCP_SERVERS_PER_SCOPE) {
          throw invalid(`at most ${MAX_MCP_SERVERS_PER_SCOPE} MCP servers per ${environmentId ? 'environment' : 'developer'}; delete one first`);
        }
        const row: McpServerRow = { id: newId('mcp'), developer_id: developerId, environment_id: environmentId, scope, name, created_at: now, ...patch };
        await mcpServersStore.insert(trx, row);
        return { created: true, server: toInfo(row) };
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceError('invalid_request', 'a concurrent write registered this name; send it again');
      throw err;
    } finally {
      changed(developerId, environmentId);
    }
  }

  async function remove(developerId: string, environmentId: string | null, name: string): Promise<void> {
    checkName(name);
    const scope = await checkScope(developerId, environmentId, false);
    try {
      if ((await mcpServersStore.remove(db, developerId, scope, name)) === 0) throw notFound();
    } finally {
      changed(developerId, environmentId);
    }
  }

  function routesOf(environmentId: string, rows: McpServerRow[]): McpRoutes {
    // An environment's registration shadows the developer's of the same name.
    const byName = new Map<string, McpServerRow>();
    for (const r of rows) {
      const seen = byName.get(r.name);
      if (!seen || (seen.scope === DEVELOPER_SCOPE && r.scope !== DEVELOPER_SCOPE)) byName.set(r.name, r);
    }
    if (byName.size === 0) return NO_ROUTES;
    const list: McpRoute[] = [];
    for (const r of [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const u = parseServerUrl(r.url);
      if (typeof u === 'string') continue;
      const key = AnnotationMemory.key(environmentId, r.name, u.url);
      const tools = new Map<string, Category>();
      for (const [t, c] of Object.entries(fromJson<Record<string, string>>(r.tools) ?? {})) if (isCategory(c)) tools.set(t, c);
      list.push(Object.freeze({
        name: r.name, host: u.host, port: u.port, path: u.path, url: u.url, secret: r.secret ?? null, tools,
        defaultCategory: isCategory(r.default_category) ? r.default_category : null,
        annotated: (tool: string) => memory.get(key, tool),
        learn: (listed: readonly ListedTool[]) => memory.learn(key, listed),
      }));
    }
    return Object.freeze({
      list: Object.freeze(list),
      // Two registrations of one URL: the first by name decides (docs/mcp.md).
      match: (host: string, port: number, path: string) => list.find((s) => s.port === port && s.host === host && s.path === path) ?? null,
      sameOrigin: (host: string, port: number) => list.filter((s) => s.port === port && s.host === host),
    });
  }

  function load(developerId: string, environmentId: string): Promise<McpRoutes> {
    const entry: CacheEntry = { loadedAt: performance.now(), developerId, promise: undefined as unknown as Promise<McpRoutes> };
    entry.promise = mcpServersStore.forEnvironment(db, developerId, environmentId).then(
      (rows) => {
        const routes = routesOf(environmentId, rows);
        if (cache.get(environmentId) === entry) entry.value = routes;
        return routes;
      },
      (err: unknown) => {
        if (cache.get(environmentId) === entry) cache.delete(environmentId);
        throw err;
      },
    );
    cache.delete(environmentId);
    cache.set(environmentId, entry);
    if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    return entry.promise;
  }

  /** The gateway's lookup, synchronous when fresh in memory (no allocation); undefined: call routesFor. */
  function cachedRoutes(environmentId: string): McpRoutes | undefined {
    const e = cache.get(environmentId);
    return e?.value !== undefined && performance.now() - e.loadedAt < ttlMs ? e.value : undefined;
  }

  function routesFor(developerId: string, environmentId: string): Promise<McpRoutes> {
    const e = cache.get(environmentId);
    if (e && e.developerId === developerId && performance.now() - e.loadedAt < ttlMs) return e.value !== undefined ? Promise.resolve(e.value) : e.promise;
    return load(developerId, environmentId);
  }

  /** Egress patterns of the environment's registered servers (a port other than 443 named). */
  async function hostsFor(developerId: string, environmentId: string): Promise<string[]> {
    // Names, scopes and URLs only: every environment's egress load parsed every server's tools
    // map to read its URL (100 servers of 1,000 tools: ~85 ms a load; a fourth review).
    const rows = await mcpServersStore.urlsForEnvironment(db, developerId, environmentId);
    const byName = new Map<string, (typeof rows)[number]>();
    for (const r of rows) {
      const seen = byName.get(r.name);
      if (!seen || (seen.scope === DEVELOPER_SCOPE && r.scope !== DEVELOPER_SCOPE)) byName.set(r.name, r);
    }
    const hosts: string[] = [];
    for (const r of [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const s = parseServerUrl(r.url);
      if (typeof s !== 'string') hosts.push(s.port === 443 ? s.host : `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
    }
    return hosts;
  }

  return { list, get, put, remove, routesFor, cachedRoutes, hostsFor, memory };
}

export type McpServersService = ReturnType<typeof createMcpServersService>;
