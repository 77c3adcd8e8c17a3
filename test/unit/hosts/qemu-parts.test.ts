import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { cpio } from '../../../hosts/drivers/qemu-image.js';
import { surfacePayload } from '../../../hosts/drivers/qemu.js';
import { skipOrFailInCI } from '../../helpers/ci-gate.js';

/**
 * The qemu runtime's pure parts (issue 16), without QEMU: the initramfs writer, the SURFACE
 * frame the in-guest agent parses, and the agent's C compiling cleanly.
 */
describe('qemu runtime parts', () => {
  it('cpio(): a newc archive the kernel unpacks: 4-byte aligned headers, modes, device numbers, data, trailer', () => {
    const archive = cpio([
      { name: 'dev', mode: 0o040755 },
      { name: 'dev/console', mode: 0o020600, rdev: [5, 1] },
      { name: 'init', mode: 0o100755, data: Buffer.from('#!/bin/sh\necho hi\n') },
      { name: 'odd-size', mode: 0o100644, data: Buffer.from('abc') },
    ]);
    // A reader written from the format's definition (linux Documentation/driver-api/early-userspace/buffer-format.rst).
    const out: Array<{ name: string; mode: number; rdev: [number, number]; data: string }> = [];
    let at = 0;
    const align = (n: number) => (n + 3) & ~3;
    for (;;) {
      expect(at % 4).to.equal(0);
      expect(archive.subarray(at, at + 6).toString()).to.equal('070701');
      const f = (k: number) => parseInt(archive.subarray(at + 6 + k * 8, at + 14 + k * 8).toString(), 16);
      const [mode, size, rmaj, rmin, namesize] = [f(1), f(6), f(9), f(10), f(11)];
      const name = archive.subarray(at + 110, at + 110 + namesize - 1).toString();
      expect(archive[at + 110 + namesize - 1]).to.equal(0);
      const dataAt = align(at + 110 + namesize);
      if (name === 'TRAILER!!!') {
        expect(align(dataAt + size)).to.equal(archive.length);
        break;
      }
      out.push({ name, mode, rdev: [rmaj, rmin], data: archive.subarray(dataAt, dataAt + size).toString() });
      at = align(dataAt + size);
    }
    expect(out).to.deep.equal([
      { name: 'dev', mode: 0o040755, rdev: [0, 0], data: '' },
      { name: 'dev/console', mode: 0o020600, rdev: [5, 1], data: '' },
      { name: 'init', mode: 0o100755, rdev: [0, 0], data: '#!/bin/sh\necho hi\n' },
      { name: 'odd-size', mode: 0o100644, rdev: [0, 0], data: 'abc' },
    ]);
  });

  it('surfacePayload(): name NUL length bytes for env, ca.pem, files/ and connections/; names with a slash are left out', () => {
    const p = surfacePayload({
      env: { A: '1', QUOTE: "it's" },
      files: { 'ok.json': Buffer.from('{}'), '../evil': Buffer.from('x'), 'a/b': Buffer.from('y') },
      connections: { gmail: 'tok' },
      caPem: 'PEM',
    });
    const entries: Array<[string, string]> = [];
    for (let at = 0; at < p.length;) {
      const nul = p.indexOf(0, at);
      const name = p.subarray(at, nul).toString('utf8');
      const len = p.readUInt32LE(nul + 1);
      entries.push([name, p.subarray(nul + 5, nul + 5 + len).toString('utf8')]);
      at = nul + 5 + len;
    }
    expect(entries).to.deep.equal([
      ['env', "export A='1'\n"], // a value with a single quote is never written (service.md limits)
      ['ca.pem', 'PEM'],
      ['files/ok.json', '{}'],
      ['connections/gmail', 'tok'],
    ]);
  });

  it('the in-guest agent compiles warning-free as C (where gcc is)', function () {
    skipOrFailInCI(this, spawnSync('sh', ['-c', 'command -v gcc']).status !== 0 ? 'gcc is not installed (apt-get install gcc libc6-dev; .ci/run does)' : null);
    {
      const r = spawnSync('gcc', ['-O2', '-Wall', '-Wextra', '-Wno-format-truncation', '-fsyntax-only', join(import.meta.dirname, '..', '..', '..', 'hosts', 'drivers', 'qemu-guest', 'agent.c')], { encoding: 'utf8' });
      expect(r.stderr).to.equal('');
      expect(r.status).to.equal(0);
    }
  });
});
