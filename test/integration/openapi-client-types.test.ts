import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startTestService, type TestService } from '../helpers/service.js';
import { ROOT } from '../helpers/child-service.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * The typed client's committed types (clients/typescript/src/schema.d.ts, issue 25 item 4)
 * are what openapi-typescript makes of the document the service serves now: a route or
 * schema changed without `npm run generate` in clients/typescript fails here. The client's
 * own packages (`npm ci --prefix clients/typescript`, as .ci/run does) run the renderer:
 * openapi-typescript needs TypeScript 5's JS API, which the root's TypeScript 7 lacks.
 */
describe('typed client types are current (issue 25, item 4)', function () {
  this.timeout(60_000);
  const pkg = join(ROOT, 'clients', 'typescript');
  let t: TestService;
  before(async function () {
    // Skips (failing under CI) where the client's packages are not installed.
    skipOrFailInCI(this, existsSync(join(pkg, 'node_modules', 'openapi-typescript')) ? null : 'clients/typescript has no node_modules: npm ci --prefix clients/typescript');
    t = await startTestService();
  });
  after(async () => {
    await t?.close();
  });

  it('src/schema.d.ts equals openapi-typescript\'s rendering of GET /v1/openapi.json', async () => {
    const { renderTypes } = await import(pathToFileURL(join(pkg, 'scripts', 'render-types.mjs')).href) as { renderTypes(doc: unknown): Promise<string> };
    const doc = (await t.raw('GET', '/v1/openapi.json')).body;
    const fresh = await renderTypes(doc);
    const committed = readFileSync(join(pkg, 'src', 'schema.d.ts'), 'utf8');
    // Not chai's deep equal of 9,000 lines: the first line that differs says what went stale.
    const a = committed.split('\n');
    const b = fresh.split('\n');
    const at = a.findIndex((line, i) => line !== b[i]);
    const where = at < 0 ? (a.length === b.length ? -1 : Math.min(a.length, b.length)) : at;
    expect(where, `src/schema.d.ts is stale from line ${where + 1} (committed: ${JSON.stringify(a[where])}, now: ${JSON.stringify(b[where])}): run npm run generate in clients/typescript`).to.equal(-1);
  });
});
