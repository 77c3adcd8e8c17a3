import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { exec, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';
import { ProcessDriver } from '../../hosts/drivers/process.js';
import { silentLogger } from '../../lib/log.js';

/**
 * Issue 24, item 4: the disk was unlimited. `disk_gib` was not enforced by the process
 * runtime: `fallocate -l 3G` took 3 GiB of the host's disk, and the SQLite store and the
 * audit log live on that disk; the audit fails closed, so one agent could stop every
 * tenant. Now the disk is an ext4 image of `disk_gib`, preallocated: writing past it is
 * the agent's ENOSPC, and the host's filesystem does not move.
 *
 * As an agent: fill a 1 GiB disk with 1.5 GiB (fallocate, then dd in 8 MiB blocks), while
 * the gateway keeps auditing its requests; then the disk's life: kept across stop and
 * start, grown by a resources update, never shrunk, deleted with the environment.
 */
const GIB = 1024 ** 3;

describe('security: disk_gib is enforced (issue 24, item 4)', function () {
  this.timeout(180_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let envId: string;
  let img: string;

  before(async function () {
    skipWithoutRuntime(this);
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-quota-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_RUNTIME: 'process', GATEWAY_DISK_PREALLOCATE: '1', GATEWAY_UPSTREAM_OVERRIDES: `api.example.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'disk-filler', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 }, egress_allow: ['api.example.com'],
    });
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
    img = join(t.svc.dataDir, 'environments', envId, 'disk.img');
  });
  after(async () => {
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const allocated = (): number => statSync(img).blocks * 512;
  const diskSize = async (): Promise<number> => Number((await sh(t.api, envId, 'df -B1 --output=size /home/agent | tail -1')).stdout.trim());

  it('the host says so: disk_quota true, and nothing about disk_gib in missing', async () => {
    const host = (await t.api.get('/v1/hosts')).body.data[0];
    expect(host.capabilities.disk_quota).to.equal(true);
    expect(host.capabilities.missing.join(' ')).to.not.match(/disk_gib/);
  });

  it('the disk is a 1 GiB filesystem of its own, its image preallocated on the host', async () => {
    const size = await diskSize();
    expect(size).to.be.within(0.85 * GIB, GIB);
    expect(statSync(img).size).to.equal(GIB);
    expect(allocated()).to.be.at.least(GIB);
  });

  it('attack: a 1 GiB environment cannot write 1.5 GiB (ENOSPC inside); the host\'s filesystem does not move; the gateway keeps auditing meanwhile', async () => {
    const before = allocated();
    const fa = await exec(t.api, envId, ['fallocate', '-l', '1536M', 'big']);
    expect(fa.status).to.equal(200);
    expect(fa.body.exit_code).to.not.equal(0);
    expect(fa.body.stderr).to.match(/No space left on device/);
    const dd = await sh(t.api, envId, 'rm -f big; dd if=/dev/zero of=fill bs=8M count=192 2>&1; echo "rc=$?"; stat -c %s fill; df -B1 --output=avail /home/agent | tail -1', { timeout_secs: 120 });
    expect(dd.stdout).to.match(/No space left on device/);
    expect(dd.stdout).to.match(/rc=1/);
    const [written, avail] = dd.stdout.trim().split('\n').slice(-2).map(Number);
    expect(written).to.be.lessThan(GIB);
    expect(written).to.be.greaterThan(0.8 * GIB);
    expect(avail).to.be.lessThan(8 * 1024 * 1024);
    // The image took nothing more of the host: its blocks were the environment's from creation.
    expect(allocated()).to.equal(before);
    // The store (on the host's disk, as DATA_DIR) still takes the gateway's audit entries.
    up.seen.length = 0;
    const curl = await sh(t.api, envId, 'curl -sS -o /dev/null -w "%{http_code}" https://api.example.com/while-full');
    expect(curl.stdout).to.equal('200');
    const audit = await t.api.get(`/v1/audit-log?environment_id=${envId}`);
    expect(audit.body.data.some((e: any) => e.path === '/while-full' && e.host === 'api.example.com')).to.equal(true);
    // And the full disk is only the agent's problem: it can free it.
    expect((await sh(t.api, envId, 'rm -f fill; echo freed')).stdout).to.equal('freed\n');
  });

  it('the disk\'s data survives stop and start', async () => {
    await sh(t.api, envId, 'echo kept > kept.txt');
    await t.svc.db('environments').where({ id: envId }).update({ desired_state: 'stopped' });
    t.svc.host!.notify();
    await waitState(t.api, envId, 'stopped');
    // Stopped: nothing of it is mounted on the host any more.
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    expect(mounts).to.not.include(join(t.svc.dataDir, 'environments', envId));
    expect((await sh(t.api, envId, 'cat kept.txt')).stdout).to.equal('kept\n');
    expect(await diskSize()).to.be.within(0.85 * GIB, GIB);
  });

  it('a resources update grows the disk (online where the host\'s root may, else at the next start); a smaller disk_gib is refused', async () => {
    // Online growth is an ext4 ioctl that needs CAP_SYS_RESOURCE (bit 24), which some hosts' root lacks.
    const online = (BigInt(`0x${/^CapEff:\s+([0-9a-f]+)/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]}`) >> 24n) & 1n;
    await t.svc.db('environments').where({ id: envId }).update({ disk_gib: 2 });
    await t.svc.host!.tick();
    expect(statSync(img).size).to.equal(2 * GIB);
    if (!online) {
      expect(await diskSize()).to.be.within(0.85 * GIB, GIB);
      await t.svc.db('environments').where({ id: envId }).update({ desired_state: 'stopped' });
      t.svc.host!.notify();
      await waitState(t.api, envId, 'stopped');
    }
    expect(await diskSize()).to.be.within(1.85 * GIB, 2 * GIB);
    const fa = await sh(t.api, envId, 'fallocate -l 1536M big && echo fits; rm -f big');
    expect(fa.stdout).to.equal('fits\n');
    await t.svc.db('environments').where({ id: envId }).update({ disk_gib: 1 });
    await t.svc.host!.tick();
    expect(await diskSize()).to.be.within(1.85 * GIB, 2 * GIB);
    // A start with the smaller size keeps the disk too, and its data.
    await t.svc.db('environments').where({ id: envId }).update({ desired_state: 'stopped' });
    t.svc.host!.notify();
    await waitState(t.api, envId, 'stopped');
    expect((await sh(t.api, envId, 'cat kept.txt')).stdout).to.equal('kept\n');
    expect(await diskSize()).to.be.within(1.85 * GIB, 2 * GIB);
  });

  it('a disk the host has no room for is refused at start (the service keeps its reserve), never overcommitted', async function () {
    const fs = statfsSync(join(t.svc.dataDir, 'environments'));
    skipOrFailInCI(this, fs.bavail * fs.bsize > 150 * GIB ? 'this machine has room for a 200 GiB disk: nothing to refuse' : null);
    const big = await t.api.post('/v1/environments', { end_user_id: 'disk-hog', resources: { cpus: 1, memory_mib: 512, disk_gib: 200 } });
    const e = await waitState(t.api, big.body.id, 'failed');
    expect(e.failure_reason).to.match(/no room for a 200 GiB disk/);
    expect(e.failure_reason).to.not.include(t.svc.dataDir);
    expect(existsSync(join(t.svc.dataDir, 'environments', big.body.id, 'disk.img'))).to.equal(false);
    await t.api.delete(`/v1/environments/${big.body.id}`);
  });

  it('no other sandbox holds this disk (its namespaces began as copies of the host\'s); destroy deletes the image and lets go of its loop device', async () => {
    const loopOf = () => execFileSync('/usr/sbin/losetup', ['--list', '--noheadings', '--output', 'NAME', '--associated', img], { encoding: 'utf8' }).trim();
    expect(loopOf()).to.match(/^\/dev\/loop\d+$/);
    // Started while this disk is mounted on the host.
    const other = (await t.api.post('/v1/environments', { end_user_id: 'disk-neighbour', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } })).body.id;
    await waitState(t.api, other, 'running');
    // Its processes on the host side (bwrap's outer one lives in the wrapper's copy of the
    // host's mount namespace) hold no mount of this environment.
    const uid = (t.svc.host!.driver as ProcessDriver).uidOf(other)!;
    const theirs = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return statSync(`/proc/${p}`).uid === uid;
      } catch {
        return false;
      }
    });
    expect(theirs.length).to.be.greaterThan(0);
    for (const p of theirs) {
      let mounts = '';
      try {
        mounts = readFileSync(`/proc/${p}/mountinfo`, 'utf8');
      } catch { /* gone */ }
      expect(mounts, `process ${p} of another sandbox holds this disk`).to.not.include(envId);
    }
    await t.api.delete(`/v1/environments/${envId}`);
    await waitState(t.api, envId, 'destroyed');
    expect(existsSync(img)).to.equal(false);
    expect(existsSync(join(t.svc.dataDir, 'environments', envId))).to.equal(false);
    const list = execFileSync('/usr/sbin/losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'], { encoding: 'utf8' });
    expect(list).to.not.include(envId);
    expect((await sh(t.api, other, 'echo alive')).stdout).to.equal('alive\n');
  });
});

describe('security: a crashed host\'s disk mounts and loop devices are released at the next start (issue 24, item 4)', function () {
  this.timeout(60_000);
  let root: string;

  before(function () {
    skipWithoutRuntime(this);
    root = mkdtempSync(join(tmpdir(), 'gw-crash-'));
  });
  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('the environments directory is root\'s only (0700), also when it was there before with a wider mode: each disk is reached through it', async () => {
    const rootDir = join(root, 'wide');
    mkdirSync(rootDir, { mode: 0o755 });
    chmodSync(rootDir, 0o755);
    const driver = new ProcessDriver({ rootDir, proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_modetest', insecure: false, log: silentLogger });
    try {
      expect(statSync(rootDir).mode & 0o777).to.equal(0o700);
    } finally {
      await driver.close();
    }
  });

  it('what a run that died left (its tmpfs, its image mounted on a loop device) is found as a leftover and stopped', async () => {
    const id = 'env_0123456789abcdef01234567';
    const options = { rootDir: join(root, 'environments'), proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_crashtest', insecure: false, log: silentLogger };
    const first = new ProcessDriver(options);
    await first.create({ id, cpus: 1, memoryMib: 512, diskGib: 1 });
    // As a crash leaves it: mounted on the host, with no process of the driver's left.
    const dir = join(options.rootDir, id);
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', 'service', join(dir, 'service')]);
    const loop = execFileSync('/usr/sbin/losetup', ['--find', '--show', join(dir, 'disk.img')], { encoding: 'utf8' }).trim();
    execFileSync('/usr/bin/mount', [loop, join(dir, 'disk')]);
    const next = new ProcessDriver(options);
    expect(next.leftovers()).to.include(id);
    await next.stop(id); // what the host agent's recovery does with each leftover
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).to.not.include(dir);
    expect(execFileSync('/usr/sbin/losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'], { encoding: 'utf8' })).to.not.include(dir);
    expect(next.leftovers()).to.not.include(id);
    await next.destroy(id);
    expect(existsSync(dir)).to.equal(false);
  });
});
