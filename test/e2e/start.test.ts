import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { freshDatabaseUrl } from '../helpers/db.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const GATEWAY = join(ROOT, 'bin', 'gateway.ts');

/** Starts `gateway start` as `npm start` does and resolves with its ready line. */
function start(env: Record<string, string>, cwd: string): Promise<{ child: ChildProcess; ready: Record<string, unknown>; lines: string[] }> {
  const child = spawn(TSX, [GATEWAY, 'start'], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no ready line: ${lines.join('\n')}`)), 15000);
    child.once('exit', (code) => rej(new Error(`exited ${code}: ${lines.join('\n')}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      const rec = JSON.parse(line);
      if (rec.msg === 'ready') {
        clearTimeout(timer);
        res({ child, ready: rec, lines });
      }
    });
    child.stderr!.on('data', (d) => lines.push(String(d)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((res) => {
    child.once('exit', (code) => res(code));
    child.kill('SIGTERM');
  });
}

describe('the service as a process (npm start)', function () {
  this.timeout(60000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-e2e-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('starts on the embedded default in ./data, logs one ready line, and stops on SIGTERM', async () => {
    const key = `sk_${'ab'.repeat(20)}`;
    const { child, ready, lines } = await start({ API_PORT: '0', PROXY_PORT: '0', GATEWAY_BOOTSTRAP_API_KEY: key, DATABASE_URL: '', DATA_DIR: '' }, dir);
    try {
      expect(ready.api_url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(ready).to.have.property('proxy_url');
      expect(existsSync(join(dir, 'data', 'gateway.sqlite'))).to.equal(true);
      expect(statSync(join(dir, 'data', 'master.key')).mode & 0o777).to.equal(0o600);
      expect(lines.join('\n')).to.include('GATEWAY_MASTER_KEY');
      expect(lines.join('\n')).to.not.include(key);
      const r = await fetch(`${ready.api_url}/v1/environments`, { headers: { authorization: `Bearer ${key}` } });
      expect(r.status).to.equal(200);
    } finally {
      expect(await stop(child)).to.equal(0);
    }
  });

  it('exits 1 naming the variable when the configuration is bad', () => {
    for (const [variable, value] of [['DATABASE_URL', 'oracle://x'], ['GATEWAY_MASTER_KEY', 'dG9vIHNob3J0']]) {
      const r = spawnSync(TSX, [GATEWAY, 'start'], { cwd: dir, env: { ...process.env, [variable as string]: value as string }, encoding: 'utf8' });
      expect(r.status, r.stderr).to.equal(1);
      expect(r.stderr).to.include(variable);
    }
  });

  it('migrate, then keys create | list | revoke', async () => {
    const db = freshDatabaseUrl();
    const env = { ...process.env, DATABASE_URL: db.url, DATA_DIR: join(dir, 'data') };
    try {
      const m = spawnSync(TSX, [GATEWAY, 'migrate'], { cwd: dir, env, encoding: 'utf8' });
      expect(m.status, m.stderr).to.equal(0);
      const c = spawnSync(TSX, [GATEWAY, 'keys', 'create', 'ci'], { cwd: dir, env, encoding: 'utf8' });
      expect(c.status, c.stderr).to.equal(0);
      const key = c.stdout.trim();
      expect(key).to.match(/^sk_[0-9a-f]{40}$/);
      const l = spawnSync(TSX, [GATEWAY, 'keys', 'list'], { cwd: dir, env, encoding: 'utf8' });
      expect(l.stdout).to.include(key.slice(-4)).and.not.include(key);
      const id = /^(key_[0-9a-f]{24})/m.exec(l.stdout)![1]!;

      const { child, ready } = await start({ ...env, API_PORT: '0', PROXY_PORT: '0' } as Record<string, string>, dir);
      try {
        const ok = await fetch(`${ready.api_url}/v1/environments`, { headers: { authorization: `Bearer ${key}` } });
        expect(ok.status).to.equal(200);
        const v = spawnSync(TSX, [GATEWAY, 'keys', 'revoke', id], { cwd: dir, env, encoding: 'utf8' });
        expect(v.status, v.stderr).to.equal(0);
        const denied = await fetch(`${ready.api_url}/v1/environments`, { headers: { authorization: `Bearer ${key}` } });
        expect(denied.status).to.equal(401);
      } finally {
        await stop(child);
      }
    } finally {
      await db.drop();
    }
  });
});
