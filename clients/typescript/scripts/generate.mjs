#!/usr/bin/env node
// npm run generate: writes src/schema.d.ts from the gateway's OpenAPI document.
//
// The document is the one a service serves (GET /v1/openapi.json, generated from its routes
// at start). With GATEWAY_URL set it is fetched from that service; otherwise this starts the
// repository's own service (`tsx bin/gateway.ts start`, SQLite in a temp dir, ports 0, no
// runtime), reads the document, and stops it.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { renderTypes } from './render-types.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..');
const root = resolve(pkg, '..', '..');

async function fromRunningService(url) {
  const r = await fetch(`${url.replace(/\/$/, '')}/v1/openapi.json`);
  if (!r.ok) throw new Error(`GET ${url}/v1/openapi.json answered ${r.status}`);
  return r.json();
}

async function fromOwnService() {
  const dir = mkdtempSync(join(tmpdir(), 'gw-openapi-'));
  const env = {
    ...process.env,
    API_PORT: '0', PROXY_PORT: '0', DATA_DIR: dir, GATEWAY_RUNTIME: 'none', LOG_LEVEL: 'info',
    GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
    GATEWAY_BOOTSTRAP_API_KEY: `sk_${randomBytes(20).toString('hex')}`,
  };
  delete env.DATABASE_URL; // SQLite in DATA_DIR
  delete env.BASE_URL;
  const child = spawn(join(root, 'node_modules', '.bin', 'tsx'), [join(root, 'bin', 'gateway.ts'), 'start'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const apiUrl = await new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error('the service logged no ready line within 60 s')), 60_000);
      child.once('exit', (code) => rej(new Error(`the service exited (${code}) before it was ready`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        try {
          const rec = JSON.parse(line);
          if (rec.msg === 'ready') {
            clearTimeout(timer);
            res(rec.api_url);
          }
        } catch { /* not a log line */ }
      });
    });
    return await fromRunningService(apiUrl);
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

const doc = process.env.GATEWAY_URL ? await fromRunningService(process.env.GATEWAY_URL) : await fromOwnService();
const out = join(pkg, 'src', 'schema.d.ts');
writeFileSync(out, await renderTypes(doc));
console.log(`wrote ${out} (${Object.keys(doc.paths).length} paths, OpenAPI ${doc.openapi})`);
