import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { startService, type RunningService } from '../../bin/service.js';
import { createAccountsService, type AccountsService } from '../../accounts/accounts.service.js';
import { freshDatabaseUrl, migratedFromTemplate } from './db.js';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface ApiClient {
  key: string;
  request<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  get<T = any>(path: string, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  patch<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  delete<T = any>(path: string, headers?: Record<string, string>): Promise<ApiResponse<T>>;
}

export interface TestService {
  svc: RunningService;
  url: string;
  api: ApiClient;
  accounts: AccountsService;
  /** A client for a second, unrelated developer (404s for the first one's resources). */
  otherDeveloper(): Promise<ApiClient>;
  /** A raw request: body sent exactly as given (string/Buffer), no headers added. */
  raw(method: string, path: string, init?: { body?: string | Buffer; headers?: Record<string, string> }): Promise<ApiResponse>;
  advance(seconds: number): Promise<void>;
  close(): Promise<void>;
}

async function toResponse(res: Response): Promise<ApiResponse> {
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body, text };
}

export function client(url: string, key: string): ApiClient {
  const request = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const h: Record<string, string> = { authorization: `Bearer ${key}`, ...headers };
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      h['content-type'] ??= 'application/json';
    }
    return toResponse(await fetch(`${url}${path}`, { method, headers: h, body: payload }));
  };
  return {
    key,
    request,
    get: (p, h) => request('GET', p, undefined, h),
    post: (p, b, h) => request('POST', p, b, h),
    put: (p, b, h) => request('PUT', p, b, h),
    patch: (p, b, h) => request('PATCH', p, b, h),
    delete: (p, h) => request('DELETE', p, undefined, h),
  };
}

/** The whole service in this process on port 0, on a fresh database, with the test clock. */
export async function startTestService(env: Record<string, string> = {}): Promise<TestService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-data-'));
  const db = freshDatabaseUrl();
  await migratedFromTemplate(db.url);
  const key = `sk_${randomBytes(20).toString('hex')}`;
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    API_PORT: '0',
    PROXY_PORT: '0',
    GATEWAY_TEST_CLOCK: '1',
    GATEWAY_RUNTIME: 'none',
    // Sparse data disks in tests: the limit inside is the same, and a suite that holds a few
    // environments of the default 10 GiB does not need tens of GiB of this machine's disk
    // (test/security/sandbox-disk-quota.test.ts runs them preallocated, as production does).
    GATEWAY_DISK_PREALLOCATE: '0',
    // A suite's close() cuts what is still under way after a second, not the production 30.
    GATEWAY_SHUTDOWN_GRACE_SECS: '1',
    GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
    GATEWAY_BOOTSTRAP_API_KEY: key,
    LOG_LEVEL: 'silent',
    // One warm browser, not production's two: a suite's service still takes its first lease
    // from the pool (issue 29), and starts one unused browser less per service (~15 % of the
    // browser suites' CPU on a 2-core machine; the pool's own tests set their sizes).
    GATEWAY_BROWSER_POOL_SIZE: '1',
    ...env,
  });
  const svc = await startService(config, silentLogger);
  const accounts = createAccountsService({ db: svc.db, clock: svc.clock });
  const api = client(svc.apiUrl, key);
  return {
    svc,
    url: svc.apiUrl,
    api,
    accounts,
    async otherDeveloper() {
      const id = `dev_${randomBytes(12).toString('hex')}`;
      await accounts.ensureDeveloper(id, 'other');
      const { key: k } = await accounts.createApiKey(id);
      return client(svc.apiUrl, k);
    },
    async raw(method, path, init = {}) {
      return toResponse(await fetch(`${svc.apiUrl}${path}`, { method, headers: init.headers, body: init.body as BodyInit | undefined }));
    },
    async advance(seconds: number) {
      const r = await api.post('/v1/test-clock/advance', { seconds });
      if (r.status !== 200) throw new Error(`advance failed: ${r.status} ${r.text}`);
    },
    async close() {
      // A close that hangs (a suite's "after all" hook timing out) says on stderr where.
      let step = 'the service';
      const report = setInterval(() => {
        process.stderr.write(`[test service] close() still waiting on ${step}${step === 'the service' ? ` (${svc.stopStep() ?? 'no step'})` : ''}\n`);
      }, 20_000);
      report.unref();
      try {
        await svc.close();
        step = 'dropping its database';
        await db.drop();
      } finally {
        clearInterval(report);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
