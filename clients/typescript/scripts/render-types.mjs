// The client's types from an OpenAPI document: openapi-typescript's Node API, run with this
// package's TypeScript 5 (the root has TypeScript 7, the native port, which has no JS API).
// Used by `npm run generate` and by the root's staleness test
// (test/integration/openapi-client-types.test.ts), so both render exactly alike.
import openapiTS, { astToString } from 'openapi-typescript';

export const HEADER = `/**
 * Generated from the gateway's GET /v1/openapi.json by openapi-typescript: do not edit.
 * Regenerate with \`npm run generate\` in clients/typescript (a test fails while stale).
 */

`;

/** `doc`: the parsed document. `servers` is left out: it names one deployment's BASE_URL. */
export async function renderTypes(doc) {
  const { servers: _servers, ...rest } = doc;
  const ast = await openapiTS(rest, { silent: true });
  return HEADER + astToString(ast);
}
