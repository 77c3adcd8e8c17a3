import type { Category } from '../policy-engine/categories.js';
import type { ListedTool } from '../policy-engine/classify/mcp.js';

/** Servers (environment × registration) remembered; the least recently taught go first. */
export const MAX_SERVERS = 10_000;
/** Tools remembered per server; a longer list teaches only its first ones. */
export const MAX_TOOLS_PER_SERVER = 1_000;

/**
 * What the gateway learned from tools/list answers it forwarded (issue 28, docs/mcp.md
 * "Annotations"): per (environment, registration name, registration URL), tool name → the
 * category its annotations give. Never shared across servers: another server's answer
 * cannot teach this one anything. In this process only (a node learns from the answers it
 * forwarded; elsewhere an unlearned tool falls back to default_category or fails closed),
 * bounded (MAX_SERVERS × MAX_TOOLS_PER_SERVER), and forgotten when the registration changes.
 */
export class AnnotationMemory {
  readonly #servers = new Map<string, Map<string, Category>>();

  static key(environmentId: string, name: string, url: string): string {
    return `${environmentId}\u0000${name}\u0000${url}`;
  }

  /** A later answer replaces what an earlier one taught. */
  learn(key: string, tools: readonly ListedTool[]): void {
    if (tools.length === 0) return;
    let m = this.#servers.get(key);
    if (m) this.#servers.delete(key);
    else m = new Map();
    for (const t of tools) {
      if (!m.has(t.name) && m.size >= MAX_TOOLS_PER_SERVER) continue;
      m.set(t.name, t.category);
    }
    this.#servers.set(key, m);
    if (this.#servers.size > MAX_SERVERS) this.#servers.delete(this.#servers.keys().next().value as string);
  }

  get(key: string, tool: string): Category | undefined {
    return this.#servers.get(key)?.get(tool);
  }

  /** Forgets every server whose key starts with `prefix` (an environment, or everything: ''). */
  forget(prefix: string): void {
    for (const k of this.#servers.keys()) if (k.startsWith(prefix)) this.#servers.delete(k);
  }

  get size(): number {
    return this.#servers.size;
  }
}
