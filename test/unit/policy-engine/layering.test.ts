/**
 * policy-engine/ is PURE (ARCHITECTURE.md "The layering rule"): it imports Node built-ins
 * and its own files only. This keeps it that way until the project-wide dependency check
 * lands, and stays as a fast local guard after.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../policy-engine');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g;

describe('policy-engine layering', () => {
  const files = tsFiles(ROOT);

  it('finds the engine files', () => {
    expect(files.length).to.be.greaterThan(5);
  });

  for (const file of files) {
    it(`${relative(ROOT, file)} imports only Node built-ins and policy-engine files`, () => {
      const src = readFileSync(file, 'utf8');
      for (const m of src.matchAll(IMPORT)) {
        const spec = (m[1] ?? m[2] ?? m[3])!;
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          expect(relative(ROOT, target).startsWith('..'), `${spec} leaves policy-engine/`).to.equal(false);
          expect(spec.endsWith('.js'), `${spec} needs a .js extension`).to.equal(true);
        } else {
          const bare = spec.replace(/^node:/, '');
          expect(builtinModules.includes(bare), `${spec} is not a Node built-in`).to.equal(true);
        }
      }
    });
  }
});
