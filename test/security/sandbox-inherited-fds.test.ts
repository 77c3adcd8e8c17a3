import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { skipWithoutRuntime } from '../helpers/runtime.js';

/**
 * A descriptor the service was started with and that is not close-on-exec (a supervisor's
 * pipe, a socket it was handed) was inherited by every host helper, bubblewrap and every
 * exec: inside the sandbox the agent held a host-side socket or pipe (seen with a test
 * harness's pipe at fd 251). The start and exec launchers now close every descriptor but the
 * ones they pass (hosts/drivers/enter.ts). Attack: the service runs with an extra socket at
 * fd 3 (as a supervisor would start it), and no process of the sandbox holds it.
 */
describe('security: descriptors the service inherited never reach a sandbox (issue 29)', function () {
  this.timeout(90_000);
  let child: ChildProcess;
  let dataDir: string;
  let api: (method: string, path: string, body?: unknown) => Promise<any>;

  before(async function () {
    skipWithoutRuntime(this);
    dataDir = mkdtempSync(join(tmpdir(), 'gw-fds-'));
    const key = `sk_${randomBytes(20).toString('hex')}`;
    const root = resolve(import.meta.dirname, '..', '..');
    // One node process (no tsx launcher in between, which would not pass fd 3 on).
    child = spawn(process.execPath, ['--import', pathToFileURL(join(root, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href, join(root, 'bin', 'gateway.ts'), 'start'], {
      cwd: dataDir,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin', DATA_DIR: dataDir, DATABASE_URL: `sqlite:${join(dataDir, 'gateway.sqlite')}`, API_PORT: '0', PROXY_PORT: '0',
        GATEWAY_HEALTH_PORT: '0', GATEWAY_RUNTIME: 'process', GATEWAY_BOOTSTRAP_API_KEY: key, GATEWAY_DISK_PREALLOCATE: '0', LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    child.stderr!.on('data', (d) => lines.push(String(d)));
    const ready = await new Promise<Record<string, any>>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no ready line:\n${lines.join('\n')}`)), 60_000);
      child.once('exit', () => rej(new Error(`exited:\n${lines.join('\n')}`)));
      createInterface({ input: child.stdout! }).on('line', (line) => {
        lines.push(line);
        if (line.includes('"msg":"ready"')) {
          clearTimeout(timer);
          res(JSON.parse(line));
        }
      });
    });
    api = async (method, path, body) => {
      const r = await fetch(`${ready.api_url}${path}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined,
      });
      return { status: r.status, body: await r.json() };
    };
  });
  after(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the service holds the socket at fd 3; no process of the sandbox, and no exec, holds it', async () => {
    const held = readlinkSync(`/proc/${child.pid}/fd/3`);
    expect(held).to.match(/^socket:\[\d+\]$/);
    const env = (await api('POST', '/v1/environments', { end_user_id: 'fd-prober', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } })).body;
    const r = await api('POST', `/v1/environments/${env.id}/exec`, {
      command: ['sh', '-c', 'ls -l /proc/$$/fd | tail -n +2 | wc -l; for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null; done'],
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const [count, ...rest] = r.body.stdout.split('\n');
    // The exec's shell: stdin, stdout, stderr; nothing else.
    expect(count.trim()).to.equal('3');
    expect(rest.join('\n')).to.not.include(held);
  });
});
