import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { skipWithoutRuntime } from '../helpers/runtime.js';

/**
 * A descriptor the service was started with and that is not close-on-exec (a supervisor's
 * pipe, a socket it was handed) was inherited by every host helper, bubblewrap and every
 * exec: inside the sandbox the agent held a host-side socket or pipe (seen with a test
 * harness's pipe at fd 251), and Chromium's processes held it too. The start and exec
 * launchers and the browser's start now close every descriptor but the ones they pass
 * (hosts/drivers/enter.ts, browser/browser-sandbox.ts).
 * Attack: the service runs with a pipe at fd 50, not close-on-exec (as a supervisor's would be;
 * above the descriptors the browser's start passes), and no process of the sandbox or the
 * browser holds it.
 */
describe('security: descriptors the service inherited never reach a sandbox or a browser (issue 29)', function () {
  this.timeout(90_000);
  let child: ChildProcess;
  let dataDir: string;
  let api: (method: string, path: string, body?: unknown) => Promise<any>;

  before(async function () {
    skipWithoutRuntime(this);
    dataDir = mkdtempSync(join(tmpdir(), 'gw-fds-'));
    const key = `sk_${randomBytes(20).toString('hex')}`;
    const root = resolve(import.meta.dirname, '..', '..');
    // One node process (no tsx launcher in between), started with a pipe at fd 50 that is not
    // close-on-exec, as a supervisor's would be (Perl's dup2 makes it so; then it execs node).
    child = spawn('/usr/bin/perl', ['-MPOSIX', '-e', 'pipe(my $r, my $w) or die; POSIX::dup2(fileno($w), 50) or die; exec { $ARGV[0] } @ARGV', process.execPath, '--import', pathToFileURL(join(root, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href, join(root, 'bin', 'gateway.ts'), 'start'], {
      cwd: dataDir,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin', DATA_DIR: dataDir, DATABASE_URL: `sqlite:${join(dataDir, 'gateway.sqlite')}`, API_PORT: '0', PROXY_PORT: '0',
        GATEWAY_HEALTH_PORT: '0', GATEWAY_RUNTIME: 'process', GATEWAY_BOOTSTRAP_API_KEY: key, GATEWAY_DISK_PREALLOCATE: '0', LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
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

  it('the service holds a pipe at fd 50, not close-on-exec; no process of the sandbox, and no exec, holds it', async () => {
    const held = readlinkSync(`/proc/${child.pid}/fd/50`);
    expect(held).to.match(/^(socket|pipe):\[\d+\]$/);
    expect(readFileSync(`/proc/${child.pid}/fdinfo/50`, 'utf8')).to.match(/^flags:\s+0?[0-7]{1,6}$/m); // not O_CLOEXEC (02000000)
    const env = (await api('POST', '/v1/environments', { end_user_id: 'fd-prober', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } })).body;
    // The exec's command itself: stdin, stdout, stderr and the directory it reads (3), nothing else.
    const own = await api('POST', `/v1/environments/${env.id}/exec`, { command: ['ls', '/proc/self/fd'] });
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(own.body.stdout.trim().split('\n').sort()).to.deep.equal(['0', '1', '2', '3']);
    // And no process of the sandbox (the relay, bubblewrap's init) holds the service's socket.
    const all = await api('POST', `/v1/environments/${env.id}/exec`, { command: ['sh', '-c', 'for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null; done'] });
    expect(all.status, JSON.stringify(all.body)).to.equal(200);
    expect(all.body.stdout).to.include('socket:[');
    expect(all.body.stdout).to.not.include(held);
  });

  it('nor does the environment\'s browser: no process of a lease\'s sandboxed Chromium holds it', async function () {
    const held = readlinkSync(`/proc/${child.pid}/fd/50`);
    const env = (await api('POST', '/v1/environments', { end_user_id: 'fd-browser', resources: { cpus: 1, memory_mib: 1024, disk_gib: 1 } })).body;
    for (let i = 0; i < 300 && (await api('GET', `/v1/environments/${env.id}`)).body.state !== 'running'; i++) await new Promise((r) => setTimeout(r, 50));
    const lease = await api('POST', '/v1/browser/leases', { environment_id: env.id });
    expect(lease.status, JSON.stringify(lease.body)).to.equal(201);
    // The browser's processes: every process in the environment's cgroups that is not the sandbox's (a uid of the browsers' ranges).
    const browser = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return statSync(`/proc/${p}`).uid >= 1_100_000 && readFileSync(`/proc/${p}/cgroup`, 'utf8').includes(env.id);
      } catch {
        return false;
      }
    });
    expect(browser.length, 'the browser runs').to.be.greaterThan(2);
    for (const p of browser) {
      let fds: string[] = [];
      try {
        fds = readdirSync(`/proc/${p}/fd`).map((f) => {
          try {
            return readlinkSync(`/proc/${p}/fd/${f}`);
          } catch {
            return '';
          }
        });
      } catch { /* exited */ }
      expect(fds, `process ${p}`).to.not.include(held);
    }
    await api('POST', `/v1/browser/leases/${lease.body.id}/release`);
  });
});
