import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';

/**
 * The layering rule of ARCHITECTURE.md, checked on every import in the tree:
 * - policy-engine/, lib/ and certs/ import nothing of the project's domains;
 * - domain folders never import the adapters (api/, proxy/, jobs/);
 * - adapters never import each other;
 * - node-forge is imported only in certs/.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const SOURCE_DIRS = ['bin', 'config', 'lib', 'store', 'policy-engine', 'certs', 'policies', 'approvals', 'approval-channels', 'webhooks', 'connections', 'environments', 'hosts', 'browser', 'audit', 'accounts', 'api', 'proxy', 'jobs', 'metrics'];
const DOMAINS = ['policies', 'approvals', 'mcp', 'approval-channels', 'webhooks', 'connections', 'environments', 'hosts', 'browser', 'audit', 'accounts'];
// metrics/ is the Prometheus adapter behind lib/metrics.ts's port (issue 25).
const ADAPTERS = ['api', 'proxy', 'jobs', 'metrics'];
const PURE: Record<string, string[]> = { 'policy-engine': ['policy-engine'], lib: ['lib'], certs: ['certs', 'lib'] };

function* files(dir: string): Generator<string> {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const e of entries) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

function imports(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  return [...src.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => (m[1] ?? m[2])!);
}

function topFolder(path: string): string {
  return relative(ROOT, path).split('/')[0]!;
}

describe('layering (ARCHITECTURE.md)', () => {
  const violations: string[] = [];
  for (const dir of SOURCE_DIRS) {
    for (const file of files(join(ROOT, dir))) {
      const from = topFolder(file);
      for (const spec of imports(file)) {
        if (spec === 'node-forge' && from !== 'certs') violations.push(`${relative(ROOT, file)} imports node-forge`);
        if (!spec.startsWith('.')) continue;
        const to = topFolder(resolve(dirname(file), spec));
        if (to === from) continue;
        const where = `${relative(ROOT, file)} -> ${spec}`;
        if (PURE[from] && !PURE[from]!.includes(to)) violations.push(`${where}: ${from}/ is pure`);
        if (DOMAINS.includes(from) && ADAPTERS.includes(to)) violations.push(`${where}: a domain imports an adapter`);
        if (ADAPTERS.includes(from) && ADAPTERS.includes(to)) violations.push(`${where}: adapters never import each other`);
      }
    }
  }

  it('has no import that breaks the layering rule', () => {
    expect(violations).to.deep.equal([]);
  });

  it('finds the imports it checks (the scan is not empty)', () => {
    const seen = [...files(join(ROOT, 'api'))].flatMap(imports);
    expect(seen.length).to.be.greaterThan(10);
  });
});
