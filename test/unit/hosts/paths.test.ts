import { expect } from 'chai';
import { diskPath } from '../../../hosts/runtime.service.js';
import { envFile, sandboxUid } from '../../../hosts/drivers/process.js';
import { ServiceError } from '../../../lib/errors.js';

describe('hosts: file paths on the data disk', () => {
  const ok: Array<[string, string]> = [
    ['a.txt', '/home/agent/a.txt'],
    ['notes/today.txt', '/home/agent/notes/today.txt'],
    ['/home/agent/x', '/home/agent/x'],
    ['./x//y/', '/home/agent/x/y'],
    ['/home/agent//deep/./x', '/home/agent/deep/x'],
  ];
  for (const [input, want] of ok) {
    it(`${JSON.stringify(input)} → ${want}`, () => expect(diskPath(input)).to.equal(want));
  }
  const refused = ['', '..', '../x', 'a/../../etc/passwd', '/home/agent/../agent/x', '/etc/passwd', '/home/agent', '/home/agent/', '/home/agentx/a', '/tmp/x', 'a\u0000b', 'a\nb', 'x'.repeat(5000)];
  for (const input of refused) {
    it(`refuses ${JSON.stringify(input.slice(0, 40))} with 400 invalid_request`, () => {
      try {
        diskPath(input);
        expect.fail('accepted');
      } catch (err) {
        expect(err).to.be.instanceOf(ServiceError);
        expect((err as ServiceError).code).to.equal('invalid_request');
      }
    });
  }
});

describe('hosts: /run/service/env', () => {
  it('is shell-sourceable export lines, and drops a value a single quote could break out of', () => {
    expect(envFile({ A: 'b c', B: '$HOME `x`' , C: "it's" })).to.equal("export A='b c'\nexport B='$HOME `x`'\n");
  });
});

describe('hosts: per-environment uids', () => {
  it('are unprivileged, stable and spread', () => {
    const ids = Array.from({ length: 200 }, (_, i) => `env_${i.toString(16).padStart(24, '0')}`);
    const uids = ids.map(sandboxUid);
    expect(Math.min(...uids)).to.be.at.least(200_000);
    expect(Math.max(...uids)).to.be.below(1_000_000);
    expect(sandboxUid(ids[0]!)).to.equal(uids[0]);
    expect(new Set(uids).size).to.be.greaterThan(195);
  });
});
