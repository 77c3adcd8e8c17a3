import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService } from './service.js';
import { startFakeUpstream, type FakeUpstream } from './upstream.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The session cookie the site sets (HttpOnly): what must never reach the agent. */
export const SESSION_SECRET = 'sess-4f1d9c0b7a3e-never-to-the-agent';

/**
 * The browser attack suite's world (test/security/browser-*.test.ts): the whole service with
 * its browser pool, one HTTPS site (`app.example.com`, through the gateway) that signs in
 * with an HttpOnly cookie and serves the pages an attack needs.
 */
export interface BrowserWorld {
  t: TestService;
  up: FakeUpstream;
  env(endUser?: string, extra?: Record<string, unknown>): Promise<{ id: string }>;
  lease(environmentId: string, body?: Record<string, unknown>): Promise<any>;
  /** The lease's browser process (its first process, Chromium's browser process) as the host sees it. */
  browserPid(leaseId: string): number;
  close(): Promise<void>;
}

export const PAGES: Record<string, string> = {
  '/login': '<html><body>signed in</body></html>',
  '/form': '<html><body><input id="pw" type="password" autofocus><button id="go">Sign in</button></body></html>',
  '/upload': '<html><body><input id="f" type="file"><script>window.read = () => new Promise((r) => { const f = document.getElementById("f").files[0]; if (!f) return r(null); const fr = new FileReader(); fr.onload = () => r(fr.result); fr.onerror = () => r("error"); fr.readAsText(f); });</script></body></html>',
  '/download': '<html><body><a id="d" download="cron-job">get</a><script>document.getElementById("d").href = URL.createObjectURL(new Blob(["* * * * * root touch /tmp/pwned\\n"]));</script></body></html>',
};

export async function startBrowserWorld(env: Record<string, string> = {}): Promise<BrowserWorld> {
  const up = await startFakeUpstream();
  up.respond = (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const headers: Record<string, string> = { 'content-type': 'text/html' };
    if (path === '/login') headers['set-cookie'] = `sid=${SESSION_SECRET}; HttpOnly; Secure; Path=/`;
    res.writeHead(200, headers);
    res.end(PAGES[path] ?? `<html><body>${path}</body></html>`);
  };
  const dir = mkdtempSync(join(tmpdir(), 'gw-browser-world-'));
  writeFileSync(join(dir, 'ca.pem'), up.ca.certPem);
  const t = await startTestService({
    GATEWAY_UPSTREAM_OVERRIDES: `app.example.com=127.0.0.1:${up.port}`,
    GATEWAY_UPSTREAM_CA_FILE: join(dir, 'ca.pem'),
    CHROMIUM_PATH: CHROMIUM,
    GATEWAY_BROWSER_LEASES_PER_END_USER: '5',
    ...env,
  });
  let n = 0;
  return {
    t,
    up,
    async env(endUser = `browser-attacker-${++n}-${Math.random().toString(36).slice(2, 8)}`, extra = {}) {
      const r = await t.api.post('/v1/environments', { end_user_id: endUser, egress_allow: ['app.example.com'], ...extra });
      if (r.status !== 201) throw new Error(`environment: ${r.status} ${r.text}`);
      return r.body;
    },
    async lease(environmentId, body = {}) {
      const r = await t.api.post('/v1/browser/leases', { environment_id: environmentId, ...body });
      if (r.status !== 201) throw new Error(`lease: ${r.status} ${r.text}`);
      return r.body;
    },
    browserPid(leaseId) {
      const found = t.svc.browserBroker.browserOf(leaseId);
      if (!found) throw new Error('no browser for the lease');
      // The sandbox's tree: sh → setpriv → bwrap (the spawned pid); Chromium is its descendant.
      const root = found.browser.sandbox.proc.pid!;
      const children = (pid: number): number[] => {
        try {
          return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
        } catch {
          return [];
        }
      };
      const queue = [root];
      while (queue.length) {
        const p = queue.shift()!;
        let cmd = '';
        try {
          cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        } catch { /* gone */ }
        const argv = cmd.split('\0');
        if (argv[0]!.endsWith('/chromium') && !argv.some((a) => a.startsWith('--type='))) return p;
        queue.push(...children(p));
      }
      throw new Error('the browser process was not found');
    },
    async close() {
      await t.close();
      await up.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Whether a directory holds anything (a download that landed). */
export function hasFiles(dir: string): boolean {
  return existsSync(dir) && readdirSync(dir).length > 0;
}
