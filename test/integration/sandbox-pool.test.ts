import { expect } from 'chai';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ProcessDriver, startTime, type ProcessDriverOptions } from '../../hosts/drivers/process.js';
import { ENTER_LAUNCHER, HOST_ENV, PERL, enterPayload } from '../../hosts/drivers/enter.js';
import { mountsUnder } from '../../hosts/drivers/disk-image.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { pollUntil, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { silentLogger } from '../../lib/log.js';

/**
 * The process sandbox's pool (issue 29): sandboxes started ahead, each claimed by one
 * environment's first start of its disk size. The runtime suite runs whole on a claimed
 * sandbox (test/integration/environments-runtime.test.ts); here, what decides a claim and
 * what a crash leaves.
 */
describe('environments: the process sandbox pool', function () {
  this.timeout(90_000);
  let t: TestService;
  let driver: ProcessDriver;
  let initial: { gib: number };
  const envDir = (id: string): string => join(resolve(t.svc.dataDir), 'environments', id);

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process', GATEWAY_SANDBOX_POOL: '1' });
    driver = t.svc.host!.driver as ProcessDriver;
    // The host's own start fills the pool, with the API's default disk size (its first environment is a first start too).
    initial = (await pollUntil(() => driver.readySlots(), (s) => s.length === 1, 30_000))[0]!;
    const first = await t.api.post('/v1/environments', { end_user_id: 'pool-first', resources: { cpus: 1, memory_mib: 512, disk_gib: 2 } });
    await waitState(t.api, first.body.id, 'running');
    // Cold (the pool starts with the API's default size, 10 GiB), then a slot of 2 GiB.
    await pollUntil(() => driver.readySlots(), (s) => s.length === 1 && s[0]!.gib === 2, 30_000);
    expect(driver.readySlots()[0]!.uid).to.not.equal(driver.uidOf(first.body.id));
  });
  after(async () => t?.close());

  it('the pool is filled at the host\'s start, with the API\'s default disk size; cgroup2 has favordynmods (a process joins its cgroups without waiting for an RCU grace period)', () => {
    expect(initial.gib).to.equal(10);
    const unified = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '));
    expect(unified?.split(' - ')[1]?.split(' ')[2]?.split(',')).to.include('favordynmods');
  });

  it('an environment of another disk size starts cold (a uid of its own, allocated and recorded: not the slot\'s); the pool then follows the size last asked for', async () => {
    const slot = driver.readySlots()[0]!;
    const other = await t.api.post('/v1/environments', { end_user_id: 'pool-other-size', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } });
    await waitState(t.api, other.body.id, 'running');
    const uid = driver.uidOf(other.body.id);
    expect(uid).to.not.equal(slot.uid);
    expect(readFileSync(join(envDir(other.body.id), 'uid'), 'utf8').trim()).to.equal(String(uid));
    const next = await pollUntil(() => driver.readySlots(), (s) => s.length === 1 && s[0]!.gib === 1, 30_000);
    expect(next[0]!.name).to.not.equal(slot.name);
    await t.api.delete(`/v1/environments/${other.body.id}`);
    // Back to 2 GiB for the tests below (a cold start of that size).
    const again = await t.api.post('/v1/environments', { end_user_id: 'pool-back', resources: { cpus: 1, memory_mib: 512, disk_gib: 2 } });
    await waitState(t.api, again.body.id, 'running');
    await t.api.delete(`/v1/environments/${again.body.id}`);
  });

  it('two first starts at once with one slot ready: one takes it, the other starts cold; two uids; both run', async () => {
    const ready = await pollUntil(() => driver.readySlots(), (s) => s.length === 1 && s[0]!.gib === 2, 30_000);
    const [a, b] = await Promise.all(['pool-a', 'pool-b'].map((u) => t.api.post('/v1/environments', { end_user_id: u, resources: { cpus: 1, memory_mib: 512, disk_gib: 2 } })));
    await Promise.all([a, b].map((c) => waitState(t.api, c!.body.id, 'running')));
    const uids = [a, b].map((c) => driver.uidOf(c!.body.id));
    expect(uids).to.include(ready[0]!.uid);
    expect(uids[0]).to.not.equal(uids[1]);
    for (const [i, c] of [a, b].entries()) expect(readFileSync(join(envDir(c!.body.id), 'uid'), 'utf8').trim()).to.equal(String(uids[i]));
    for (const c of [a, b]) expect((await sh(t.api, c!.body.id, 'echo ok > f && cat f && id -u')).stdout).to.equal('ok\n1000\n');
  });

  it('a claimed environment keeps its uid across a stop and a start, and its files', async () => {
    const ready = await pollUntil(() => driver.readySlots(), (s) => s.length === 1 && s[0]!.gib === 2, 30_000);
    const c = await t.api.post('/v1/environments', { end_user_id: 'pool-restart', resources: { cpus: 1, memory_mib: 512, disk_gib: 2 } });
    await waitState(t.api, c.body.id, 'running');
    expect(driver.uidOf(c.body.id)).to.equal(ready[0]!.uid);
    await sh(t.api, c.body.id, 'echo kept > mine.txt');
    // Stop is the idle ladder's move; through the service (the API has no stop call). An exec starts it again.
    await t.svc.db('environments').where({ id: c.body.id }).update({ desired_state: 'stopped' });
    t.svc.host!.notify();
    await waitState(t.api, c.body.id, 'stopped');
    expect((await sh(t.api, c.body.id, 'cat mine.txt; stat -c %u mine.txt')).stdout).to.equal('kept\n1000\n');
    expect(driver.uidOf(c.body.id)).to.equal(ready[0]!.uid);
  });

  it('the first exec\'s launcher started with the slot never outlives its sandbox: a stop before any exec ends it (it would enter whatever process took the pid next)', async () => {
    await pollUntil(() => driver.readySlots(), (s) => s.length === 1 && s[0]!.gib === 2, 30_000);
    const c = await t.api.post('/v1/environments', { end_user_id: 'pool-launcher', resources: { cpus: 1, memory_mib: 512, disk_gib: 2 } });
    await waitState(t.api, c.body.id, 'running');
    const uid = driver.uidOf(c.body.id)!;
    // The enter launchers waiting for an exec whose sandbox runs as this environment's uid.
    const waiting = () => spareLaunchers().filter((l) => uidOf(l.target) === uid);
    const [launcher] = waiting();
    expect(launcher, 'a launcher started with the slot waits for the first exec').to.not.equal(undefined);
    await t.svc.db('environments').where({ id: c.body.id }).update({ desired_state: 'stopped' });
    t.svc.host!.notify();
    await waitState(t.api, c.body.id, 'stopped');
    expect(await pollUntil(() => alive(launcher!.pid), (a) => !a, 3_000), 'the launcher ended with its sandbox').to.equal(false);
    // The next start is cold (no slot of this environment's own): its first exec spawns a launcher and works.
    expect((await sh(t.api, c.body.id, 'id -u')).stdout).to.equal('1000\n');
  });
});

/** Enter launchers (hosts/drivers/enter.ts) alive on the machine: their pid and the sandbox pid they would enter. */
function spareLaunchers(): Array<{ pid: number; target: number }> {
  const out: Array<{ pid: number; target: number }> = [];
  for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
      if (argv[1] === '-e' && argv[2] === ENTER_LAUNCHER) out.push({ pid: Number(p), target: Number(argv[3]) });
    } catch {
      // gone
    }
  }
  return out;
}

function uidOf(pid: number): number | null {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  } catch {
    return null;
  }
}

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('environments: a sandbox slot a crashed run left is removed at the next start', function () {
  this.timeout(60_000);
  let root: string;

  before(function () {
    skipWithoutRuntime(this);
    root = mkdtempSync(join(tmpdir(), 'gw-slot-crash-'));
  });
  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('its mounts, loop device and directory go (a live process\'s slot stays)', async () => {
    const rootDir = join(root, 'environments');
    // A pid that is not alive: past the kernel's pid_max.
    const dead = join(rootDir, `slot_${(0x7ffffff0).toString(16)}0123456789abcdef`);
    const live = join(rootDir, `slot_${process.pid.toString(16).padStart(8, '0')}0123456789abcdef`);
    for (const d of [dead, live]) mkdirSync(join(d, 'service'), { recursive: true });
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', 'service', join(dead, 'service')]);
    execFileSync('/usr/bin/truncate', ['-s', '64M', join(dead, 'disk.img')]);
    execFileSync('/usr/sbin/mkfs.ext4', ['-q', join(dead, 'disk.img')]);
    mkdirSync(join(dead, 'disk'));
    const loop = execFileSync('/usr/sbin/losetup', ['--find', '--show', join(dead, 'disk.img')], { encoding: 'utf8' }).trim();
    execFileSync('/usr/bin/mount', [loop, join(dead, 'disk')]);
    const driver = new ProcessDriver({ rootDir, proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_slotcrash', insecure: false, log: silentLogger });
    await driver.slotsReaped();
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).to.not.include(dead);
    expect(execFileSync('/usr/sbin/losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'], { encoding: 'utf8' })).to.not.include(dead);
    expect(existsSync(dead)).to.equal(false);
    expect(existsSync(live)).to.equal(true);
    await driver.close();
  });
});

describe('environments: a stop that lands while a slot is being destroyed', function () {
  this.timeout(60_000);
  let root: string;

  before(function () {
    skipWithoutRuntime(this);
    root = mkdtempSync(join(tmpdir(), 'gw-slot-stop-'));
  });
  after(() => {
    if (!root) return;
    for (const m of mountsUnder(root).reverse()) spawnSync('/usr/bin/umount', ['-l', m]);
    rmSync(root, { recursive: true, force: true });
  });

  it('close() waits for it: a SIGTERM to the whole process group kills the slot\'s sandbox first, and nothing of it stays mounted', async () => {
    const rootDir = join(root, 'environments');
    const driver = new ProcessDriver({ rootDir, proxy: { host: '127.0.0.1', port: 9 }, hostTag: 'host_slotstop', insecure: false, log: silentLogger, sandboxPool: 1, poolDiskGib: 1 });
    driver.warmUp();
    const [slot] = await pollUntil(() => driver.readySlots(), (s) => s.length === 1, 30_000);
    expect(mountsUnder(rootDir).length).to.be.greaterThan(0);
    // The slot's sandbox dies (as a group SIGTERM kills it): its exit handler destroys it, and the stop follows at once.
    spawnSync('/usr/bin/pkill', ['-KILL', '-u', String(slot!.uid)]);
    await pollUntil(() => driver.readySlots(), (s) => s.length === 0, 10_000, 1);
    await driver.close();
    expect(mountsUnder(rootDir)).to.deep.equal([]);
  });
});

describe('environments: a sandbox that ends by itself while the service stops', function () {
  this.timeout(60_000);
  const id = 'env_0000000000000000005a4e22';
  const w = driverWithEnvironment('env-stop', id);

  it('close() waits for its teardown: a SIGTERM to the whole process group kills the sandbox first, and nothing of it stays mounted', async () => {
    const dir = join(w.root, 'environments', id);
    expect(mountsUnder(dir).length).to.be.greaterThan(0);
    // Its processes die (as a group SIGTERM kills them): the exit handler tears it down, and the stop follows at once.
    spawnSync('/usr/bin/pkill', ['-KILL', '-u', String(w.driver.uidOf(id))]);
    await pollUntil(() => w.driver.status(id), (s) => s === 'absent', 10_000, 1);
    await w.driver.close();
    expect(mountsUnder(dir)).to.deep.equal([]);
  });
});

/**
 * A driver of its own for the describe it is called in (a temp root, no pool), with one
 * environment `id` started cold before its tests and everything of it gone after them.
 */
function driverWithEnvironment(tag: string, id: string, opts: Partial<ProcessDriverOptions> = {}): { readonly driver: ProcessDriver; readonly root: string } {
  const w = {} as { driver: ProcessDriver; root: string };
  before(async function () {
    skipWithoutRuntime(this);
    w.root = mkdtempSync(join(tmpdir(), `gw-${tag}-`));
    w.driver = new ProcessDriver({ rootDir: join(w.root, 'environments'), proxy: { host: '127.0.0.1', port: 9 }, hostTag: `host_${tag.replace(/-/g, '')}`, insecure: false, log: silentLogger, sandboxPool: 0, ...opts });
    await w.driver.slotsReaped();
    await w.driver.start({ id, cpus: 1, memoryMib: 256, diskGib: 1 }, { env: {}, files: {}, connections: {}, caPem: '' });
  });
  after(async () => {
    if (!w.root) return;
    await w.driver?.destroy(id).catch(() => {});
    await w.driver?.close().catch(() => {});
    for (const m of mountsUnder(w.root).reverse()) spawnSync('/usr/bin/umount', ['-l', m]);
    rmSync(w.root, { recursive: true, force: true });
  });
  return w;
}

describe('environments: after each exec the next one\'s launcher is started ahead (issue 29)', function () {
  this.timeout(60_000);
  const id = 'env_0000000000000000005a4e11';
  const w = driverWithEnvironment('next-launcher', id, { spareLauncherMs: 2500 });
  const run = (command: string[]) => w.driver.exec(id, { command, timeoutMs: 10_000, maxOutputBytes: 4096 });
  const waiting = () => spareLaunchers().filter((l) => uidOf(l.target) === w.driver.uidOf(id)).map((l) => l.pid);

  it('none before the first exec of a cold start; after an exec one waits, and the next exec takes it (another waits then)', async () => {
    expect(waiting()).to.deep.equal([]);
    expect((await run(['id', '-u'])).stdout.toString()).to.equal('1000\n');
    const [first, ...more] = await pollUntil(waiting, (w) => w.length > 0, 2_000);
    expect(first, 'one launcher waits after an exec').to.be.a('number');
    expect(more).to.deep.equal([]);
    const r = await run(['sh', '-c', 'pwd && id -u']);
    expect(r.stdout.toString()).to.equal('/home/agent\n1000\n');
    // Taken, it ran the command and ends; its exit may follow the answer by a moment on a
    // loaded machine. Not taken, it would wait until spareLauncherMs (2.5 s) had passed.
    const firstAlive = await pollUntil(() => alive(first!), (a) => !a, 1_500);
    expect(firstAlive, 'the second exec took the waiting launcher').to.equal(false);
    const next = await pollUntil(waiting, (w) => w.length > 0, 2_000);
    expect(next).to.have.length(1);
    expect(next[0]).to.not.equal(first);
  });

  it('it is started by the resident spawner, not by the service (whose fork would stop its event loop ~40 µs per MiB of its RSS)', async () => {
    const [pid] = await pollUntil(waiting, (w) => w.length > 0, 2_000);
    const parent = parentOf(pid!);
    expect(parent).to.not.equal(process.pid);
    expect(parentOf(parent), 'the spawner is the service\'s child').to.equal(process.pid);
    expect(readFileSync(`/proc/${parent}/cmdline`, 'utf8').split('\0')[1]).to.equal('-e');
  });

  it('unused, it ends after its time (spareLauncherMs); the next exec starts its own and works', async () => {
    const [pid] = waiting();
    expect(pid).to.be.a('number');
    expect(await pollUntil(() => alive(pid!), (a) => !a, 8_000)).to.equal(false);
    expect(waiting()).to.deep.equal([]);
    expect((await run(['true'])).exitCode).to.equal(0);
  });

  it('a suspended environment holds none (it is outside the frozen cgroup); after resume an exec works', async () => {
    await run(['true']);
    expect(await pollUntil(waiting, (w) => w.length > 0, 2_000)).to.have.length(1);
    await w.driver.suspend(id);
    // Well within its 2.5 s of waiting: the suspend ended it, not its time.
    expect(await pollUntil(() => waiting(), (w) => w.length === 0, 1_000)).to.deep.equal([]);
    await w.driver.resume(id);
    expect((await run(['echo', 'back'])).stdout.toString()).to.equal('back\n');
  });

  it('a stop ends the one waiting with the sandbox', async () => {
    await run(['true']);
    const [pid] = await pollUntil(waiting, (w) => w.length > 0, 2_000);
    expect(pid).to.be.a('number');
    await w.driver.stop(id);
    expect(await pollUntil(() => alive(pid!), (a) => !a, 1_000)).to.equal(false);
  });
});

describe('environments: exec with the resident spawner off (the service spawns its launchers itself)', function () {
  this.timeout(60_000);
  const id = 'env_0000000000000000005a4e12';
  const w = driverWithEnvironment('no-spawner', id, { residentSpawner: false });

  it('execs work, and the launcher waiting for the next one is the service\'s own child', async () => {
    const r = await w.driver.exec(id, { command: ['sh', '-c', 'echo ok; id -u'], timeoutMs: 10_000, maxOutputBytes: 4096 });
    expect(r.stdout.toString()).to.equal('ok\n1000\n');
    const [pid] = await pollUntil(() => spareLaunchers().filter((l) => uidOf(l.target) === w.driver.uidOf(id)).map((l) => l.pid), (x) => x.length > 0, 2_000);
    expect(parentOf(pid!)).to.equal(process.pid);
  });
});

describe('attack: an exec\'s launcher given a pid its sandbox no longer holds (a pid reused by another process)', function () {
  this.timeout(60_000);
  const id = 'env_00000000000000000000a11d';
  const w = driverWithEnvironment('pid-reuse', id);

  it('refused before it joins anything when the pid\'s process started at another time; the same launcher with the sandbox\'s own start time enters', async () => {
    const uid = w.driver.uidOf(id)!;
    // A process of the sandbox (any one: they share its namespaces), and its real start time.
    const ownUserNs = readlinkSync('/proc/self/ns/user');
    const inside = (p: number) => {
      try {
        return uidOf(p) === uid && readlinkSync(`/proc/${p}/ns/user`) !== ownUserNs;
      } catch {
        return false;
      }
    };
    const pid = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).find(inside)!;
    expect(pid, 'a process of the sandbox').to.be.a('number');
    const start = startTime(pid);
    const disk = join(w.root, 'environments', id, 'disk');
    const wrong = await enterWith(pid, start + 1);
    expect(wrong.status).to.equal(125);
    expect(wrong.marker).to.equal('enter');
    expect(wrong.stderr).to.match(/^enter: sandbox: /);
    expect(existsSync(join(disk, 'entered')), 'nothing ran in the sandbox').to.equal(false);
    const right = await enterWith(pid, start);
    expect(right.status, right.stderr).to.equal(0);
    expect(right.stdout).to.equal('in\n');
    expect(readFileSync(join(disk, 'entered'), 'utf8')).to.equal('entered\n');
  });
});

/** The enter launcher as the driver runs it (payload on fd 4, marker on fd 3), against `pid` said to have started at `start`. */
function enterWith(pid: number, start: number): Promise<{ status: number | null; marker: string; stdout: string; stderr: string }> {
  const payload = enterPayload(Buffer.from([0x06, 0, 0, 0, 0, 0, 0xff, 0x7f]), ['/bin/sh', '-c', 'echo entered > /home/agent/entered; echo in'], { PATH: '/usr/bin:/bin' }, '/home/agent');
  const child = spawn(PERL, ['-e', ENTER_LAUNCHER, String(pid), String(start), '1000', '1000'], { stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'], env: { ...HOST_ENV } });
  let stdout = '';
  let stderr = '';
  let marker = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  (child.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => (marker += d));
  (child.stdio[4] as NodeJS.WritableStream).end(payload);
  child.stdin!.end();
  return new Promise((resolve) => child.once('close', (status) => resolve({ status, marker, stdout, stderr })));
}
