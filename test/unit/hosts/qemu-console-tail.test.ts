import { expect } from 'chai';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTail } from '../../../hosts/drivers/qemu.js';

/**
 * A fourth review: the QEMU console file lives in the VM uid's directory, and its last lines go
 * into a failed start's reason, which the tenant reads. An escaped QEMU could make it a symlink
 * to the master key; it was followed. Now only a regular file, opened without following links.
 */
describe('hosts/drivers/qemu readTail (the console in a failure reason)', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-tail-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the last three lines of a regular file, at most 400 characters', () => {
    writeFileSync(join(dir, 'console.log'), `${'x'.repeat(10_000)}\nline a\nline b\nline c\n`);
    expect(readTail(join(dir, 'console.log'))).to.equal('line a | line b | line c');
  });

  it('attack: a symlink to a host file (the master key) reads as nothing', () => {
    writeFileSync(join(dir, 'master.key'), 'MASTER-KEY-MATERIAL');
    symlinkSync(join(dir, 'master.key'), join(dir, 'evil.log'));
    expect(readTail(join(dir, 'evil.log'))).to.equal('');
  });

  it('a directory, a missing file: nothing', () => {
    expect(readTail(dir)).to.equal('');
    expect(readTail(join(dir, 'nope'))).to.equal('');
  });
});
