import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { imageKey, newestImage, pruneGuestImages, recordImageUse } from '../../../hosts/drivers/qemu-image.js';

/**
 * Guest images of the qemu runtime over time (hosts/drivers/qemu-image.ts): named by
 * everything that went in, versions included, so an update is a new image; and the images
 * no VM needs are removed, never one a VM may still restore on. Directories only: no QEMU.
 */
describe('qemu guest images: keys and pruning', () => {
  const DAY = 24 * 3600_000;
  const NOW = Date.now();
  let base: string;
  let envs: string;
  beforeEach(() => {
    base = mkdtempSync(join(tmpdir(), 'gw-images-'));
    envs = mkdtempSync(join(tmpdir(), 'gw-envs-'));
  });
  afterEach(() => {
    rmSync(base, { recursive: true, force: true });
    rmSync(envs, { recursive: true, force: true });
  });

  let n = 0;
  /** An image directory as the builder leaves it, built `ageMs` ago (by agent and builder `build`). */
  function image(ageMs: number, build = 'aaaaaaaaaaaaaaaa'): string {
    const dir = join(base, (++n).toString(16).padStart(16, '0'));
    mkdirSync(dir);
    for (const f of ['vmlinux', 'initrd.cpio', 'rootfs.img']) writeFileSync(join(dir, f), f);
    writeFileSync(join(dir, 'done'), `linux-image-6.1.0-28-amd64\ncurl python3\nbuild ${build}\n`); // as the builder writes it
    const t = (NOW - ageMs) / 1000;
    utimesSync(join(dir, 'done'), t, t);
    return dir;
  }
  /** A VM record (vm.json) naming `imageDir`, its use marked as the driver marks it, `usedAgoMs` ago. */
  function vm(imageDir: string, usedAgoMs: number): string {
    const dir = join(envs, `env_${(++n).toString(16).padStart(24, '0')}`);
    mkdirSync(dir);
    const record = join(dir, 'vm.json');
    writeFileSync(record, JSON.stringify({ imageDir, argv: [], accel: 'tcg' }));
    recordImageUse(imageDir, record);
    const t = (NOW - usedAgoMs) / 1000;
    utimesSync(join(imageDir, 'used'), t, t);
    return record;
  }

  it('imageKey: a new version of any package or of the kernel is a new image; the order packages come in is not', () => {
    const parts = {
      kernel: { name: 'linux-image-6.1.0-28-amd64', version: '6.1.119-1' },
      packages: new Map([['curl', '7.88.1-10+deb12u8'], ['python3', '3.11.2-1+b1']]),
      agentSource: Buffer.from('int main(){}'),
      builderSource: Buffer.from('builder'),
    };
    const key = imageKey(parts);
    expect(key).to.match(/^[0-9a-f]{16}$/);
    expect(imageKey({ ...parts, packages: new Map([['python3', '3.11.2-1+b1'], ['curl', '7.88.1-10+deb12u8']]) })).to.equal(key);
    // A security update of curl on the host, and a kernel fix within the same ABI (same package name):
    expect(imageKey({ ...parts, packages: new Map([['curl', '7.88.1-10+deb12u9'], ['python3', '3.11.2-1+b1']]) })).to.not.equal(key);
    expect(imageKey({ ...parts, kernel: { name: 'linux-image-6.1.0-28-amd64', version: '6.1.123-1' } })).to.not.equal(key);
    expect(imageKey({ ...parts, packages: new Map([['curl', '7.88.1-10+deb12u8']]) })).to.not.equal(key);
    expect(imageKey({ ...parts, agentSource: Buffer.from('int main(){return 1;}') })).to.not.equal(key);
  });

  it('keeps the current image, images a VM record names, and images built or used within the grace period; removes the rest', () => {
    const current = image(30 * DAY);
    const suspendedOn = image(30 * DAY);
    vm(suspendedOn, 10 * DAY); // a VM suspended ten days ago restores only on this one
    const unused = image(30 * DAY);
    const recentlyBuilt = image(DAY / 2);
    const recentlyUsed = image(30 * DAY);
    const record = vm(recentlyUsed, DAY / 2);
    rmSync(record); // its VM was destroyed since, but a host that started before an update may still boot from it
    const { removed, kept } = pruneGuestImages(base, current, { nowMs: NOW });
    expect(removed).to.deep.equal([unused]);
    expect(kept.sort()).to.deep.equal([suspendedOn, recentlyBuilt, recentlyUsed].sort());
    expect(existsSync(current) && existsSync(suspendedOn) && !existsSync(unused)).to.equal(true);
    expect(readdirSync(base).filter((f) => f.startsWith('.trash'))).to.deep.equal([]);
  });

  it('a marker whose VM is gone, or whose VM booted a newer image since, no longer keeps an image (and is removed)', () => {
    const current = image(30 * DAY);
    const old = image(30 * DAY);
    const destroyed = vm(old, 10 * DAY);
    rmSync(destroyed);
    const rebooted = vm(old, 10 * DAY);
    writeFileSync(rebooted, JSON.stringify({ imageDir: current, argv: [], accel: 'tcg' })); // booted fresh on the current image
    expect(readdirSync(join(old, 'users'))).to.have.length(2);
    expect(pruneGuestImages(base, current, { nowMs: NOW }).removed).to.deep.equal([old]);
  });

  it('a VM record that is unreadable keeps nothing; the current image is never removed, even unused and old', () => {
    const current = image(90 * DAY);
    const old = image(30 * DAY);
    const record = vm(old, 10 * DAY);
    writeFileSync(record, '{ not json');
    expect(pruneGuestImages(base, current, { nowMs: NOW }).removed).to.deep.equal([old]);
    expect(existsSync(join(current, 'done'))).to.equal(true);
  });

  it('removes pointers to removed images and the leftovers of processes that are gone; keeps a live build and unknown files', async () => {
    const current = image(30 * DAY);
    const old = image(30 * DAY);
    writeFileSync(join(base, 'last-aaaaaaaaaaaaaaaa'), `${old}\n`);
    writeFileSync(join(base, 'last-bbbbbbbbbbbbbbbb'), `${current}\n`);
    // A process that has exited (its pid is free: waited for) and one that is alive (this one).
    const child = spawn(process.execPath, ['-e', '0']);
    const deadPid = await new Promise<number>((resolve) => child.on('exit', () => resolve(child.pid!)));
    const deadBuild = join(base, `0123456789abcdef.tmp-${deadPid}`);
    const deadTrash = join(base, `.trash-0123456789abcdef-${deadPid}`);
    const liveBuild = join(base, `fedcba9876543210.tmp-${process.pid}`);
    for (const d of [deadBuild, deadTrash, liveBuild]) mkdirSync(d);
    writeFileSync(join(base, 'README'), 'kept');
    const { removed } = pruneGuestImages(base, current, { nowMs: NOW });
    expect(removed.sort()).to.deep.equal([old, deadBuild, deadTrash].sort());
    expect(readdirSync(base).sort()).to.deep.equal([current.slice(base.length + 1), 'README', 'last-bbbbbbbbbbbbbbbb', liveBuild.slice(base.length + 1)].sort());
  });

  it('recordImageUse on an image that was removed fails and does not bring its directory back', () => {
    const gone = join(base, 'ffffffffffffffff');
    expect(() => recordImageUse(gone, join(envs, 'vm.json'))).to.throw(/ENOENT/);
    expect(existsSync(gone)).to.equal(false);
  });

  it('newestImage (what a host boots from when a new image cannot be built): the most recently completed one of the same agent and builder, never a partial one', () => {
    const build = 'aaaaaaaaaaaaaaaa';
    expect(newestImage(base, build)).to.equal(null);
    image(3 * DAY);
    const newer = image(DAY);
    const partial = image(0);
    rmSync(join(partial, 'done')); // a build that did not finish has no `done`
    image(0, 'bbbbbbbbbbbbbbbb'); // newer, but another agent: it would not speak this driver's protocol
    mkdirSync(join(base, `0123456789abcdef.tmp-${process.pid}`));
    expect(newestImage(base, build)?.dir).to.equal(newer);
    expect(newestImage(base, build)?.kernelVersion).to.equal('6.1.0-28-amd64');
  });

  it('a directory that does not exist yet is nothing to prune', () => {
    expect(pruneGuestImages(join(base, 'nope'), join(base, 'nope', 'x'))).to.deep.equal({ removed: [], kept: [] });
  });
});
