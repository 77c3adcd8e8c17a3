/**
 * RAW http-mitm-proxy 1.1.0 as its README sets it up: `new Proxy()`, no hooks, `listen()`.
 * Library defaults everywhere except:
 * - `sslCaDir` in the bench's temp dir (the default is `<cwd>/.http-mitm-proxy`); the
 *   library generates its own CA there and the load generator trusts `certs/ca.pem`;
 * - `host: 127.0.0.1` (loopback only; the default is `localhost`, the same thing here);
 * - `keepAlive` from BENCH_KEEP_ALIVE. The library's default is `keepAlive: false`: it then
 *   answers every request inside a tunnel with `Connection: close` (so the agent opens a
 *   new CONNECT tunnel and TLS handshake for its next request) and uses non-keep-alive
 *   agents upstream (a new TLS connection to the upstream per request);
 * - the upstream's CA is trusted through NODE_EXTRA_CA_CERTS (set by the parent), which
 *   leaves the library's own https.Agent untouched.
 */
import { readFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { Proxy } from 'http-mitm-proxy';
import { ready, serveIpc } from './ipc.js';

const keepAlive = process.env.BENCH_KEEP_ALIVE === '1';
const sslCaDir = path.join(process.env.BENCH_DIR!, `raw-mitm-${keepAlive ? 'ka' : 'noka'}`);
mkdirSync(sslCaDir, { recursive: true });

const proxy = new Proxy();
await new Promise<void>((resolve, reject) =>
  proxy.listen({ host: '127.0.0.1', port: 0, sslCaDir, ...(keepAlive ? { keepAlive: true } : {}) }, (err?: unknown) => (err ? reject(err) : resolve())),
);
const port = (proxy as unknown as { httpPort: number }).httpPort;

serveIpc({
  exit: () => {
    proxy.close();
    setTimeout(() => process.exit(0), 50);
  },
});
ready({ port, caPem: readFileSync(path.join(sslCaDir, 'certs', 'ca.pem'), 'utf8') });
