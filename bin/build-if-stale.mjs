#!/usr/bin/env node
// `npm start` runs the compiled service (dist/). This builds it first when dist/ is missing
// or older than any TypeScript source it is built from, so a fresh clone's `npm ci && npm
// start` works with no other command and an edited checkout never runs stale code. Plain
// JavaScript: it runs before anything is compiled. (docs/operations.md, "Start")
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const config = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8'));
const force = process.argv.includes('--force');
const entry = join(root, 'dist', 'bin', 'gateway.js');

function newestSource() {
  let newest = statSync(join(root, 'tsconfig.build.json')).mtimeMs;
  newest = Math.max(newest, statSync(join(root, 'tsconfig.json')).mtimeMs, statSync(join(root, 'package.json')).mtimeMs);
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  for (const dir of config.include) walk(join(root, dir));
  return newest;
}

if (force || !existsSync(entry) || statSync(entry).mtimeMs < newestSource()) {
  if (!force) process.stderr.write('building dist/ (it is missing, or the TypeScript sources are newer) ...\n');
  // From scratch: a source deleted since the last build (a migration!) must not live on in dist/.
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  const tsc = join(root, 'node_modules', '.bin', 'tsc');
  const r = spawnSync(tsc, ['-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
