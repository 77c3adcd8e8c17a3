import { expect } from 'chai';
import { ENTER_LAUNCHER, HOST_ENV, START_LAUNCHER, enterPayload } from '../../../hosts/drivers/enter.js';
import { netSealed } from '../../../hosts/drivers/process.js';

/** Pure parts of the process sandbox (issue 24): the exec launcher's payload, the host's environment, the network check. */
describe('hosts: how an exec enters the sandbox', () => {
  it('the host-side environment is fixed: a PATH of system directories, no LD_*, nothing inherited', () => {
    expect(HOST_ENV).to.deep.equal({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' });
    expect(Object.isFrozen(HOST_ENV)).to.equal(true);
  });

  it('the payload carries the filter, the cgroups, the directory, argv and variables as length-prefixed strings (nothing on a host command line)', () => {
    const filter = Buffer.alloc(16, 7);
    const cgroups = { unified: '/sys/fs/cgroup/unified/gw/env_1/x1', v1Procs: ['/sys/fs/cgroup/cpu/gw/env_1/cgroup.procs', '/sys/fs/cgroup/pids/gw/env_1/cgroup.procs'] };
    const p = enterPayload(filter, ['/bin/sh', '-c', 'echo "$A"'], { A: 'x=y', LD_PRELOAD: '/home/agent/x.so', EMPTY: '' }, '/home/agent/src', cgroups);
    expect(p.readUInt32LE(0)).to.equal(16);
    expect(p.subarray(4, 20).equals(filter)).to.equal(true);
    const items: string[] = [];
    for (let at = 20; at < p.length;) {
      const n = p.readUInt32LE(at);
      items.push(p.subarray(at + 4, at + 4 + n).toString('utf8'));
      at += 4 + n;
    }
    expect(items).to.deep.equal([
      cgroups.unified, '2', ...cgroups.v1Procs, '/home/agent/src', '3', '/bin/sh', '-c', 'echo "$A"', 'A=x=y', 'LD_PRELOAD=/home/agent/x.so', 'EMPTY=',
    ]);
    // No cgroups: an empty directory and no files.
    const bare = enterPayload(filter, ['true'], {});
    expect(bare.subarray(20, 32).equals(Buffer.from([0, 0, 0, 0, 1, 0, 0, 0, 0x30, 0, 0, 0]))).to.equal(true);
  });

  it('refuses a NUL in an argument or a value, and a name with "="', () => {
    expect(() => enterPayload(Buffer.alloc(8), ['a\u0000b'], {})).to.throw(/NUL/);
    expect(() => enterPayload(Buffer.alloc(8), ['a'], { A: 'x\u0000' })).to.throw(/NUL/);
    expect(() => enterPayload(Buffer.alloc(8), ['a'], { 'A=B': 'x' })).to.throw(/variable name/);
  });

  it('the launcher loads no module (it runs as root before it joins) and sets no_new_privs and the filter before it becomes the agent', () => {
    expect(ENTER_LAUNCHER).to.not.match(/\b(use|require)\s+\w/);
    expect(ENTER_LAUNCHER).to.not.match(/\bdo\s*['"$(]/); // do FILE
    const at = (s: string) => ENTER_LAUNCHER.indexOf(s);
    expect(at('syscall(157, 38')).to.be.greaterThan(at('fork()'));
    expect(at('syscall(157, 22')).to.be.greaterThan(at('syscall(157, 38'));
    expect(at('syscall(117')).to.be.greaterThan(at('syscall(157, 22'));
    expect(at('%ENV = ()')).to.be.greaterThan(at('syscall(117'));
    // The payload read before it joins any cgroup (a launcher started ahead waits outside
    // them); the cgroup join before it joins anything; the directory and the command looked up as the agent.
    expect(at("fail('payload')")).to.be.lessThan(at('join_procs(splice'));
    expect(at("fail('cgroup')")).to.be.lessThan(at('syscall(308'));
    expect(at('chdir(')).to.be.greaterThan(at('%ENV = ()'));
    expect(at("marker('notfound')")).to.be.greaterThan(at('chdir('));
  });

  it('the start launcher loads no module, joins the cgroup first, unwinds the mounts in its private copy, and drops root last before bubblewrap', () => {
    expect(START_LAUNCHER).to.not.match(/\b(use|require)\s+\w/);
    expect(START_LAUNCHER).to.not.match(/\bdo\s*['"$(]/);
    const at = (s: string) => START_LAUNCHER.indexOf(s);
    expect(at("fail('cgroup'")).to.be.greaterThan(-1);
    expect(at('syscall(272, 0x20000)')).to.be.greaterThan(at("fail('cgroup'"));
    expect(at('syscall(165, $none')).to.be.greaterThan(at('syscall(272'));
    expect(at('syscall(165, $dir')).to.be.greaterThan(at('syscall(165, $none'));
    expect(at('syscall(166')).to.be.greaterThan(at('syscall(165, $dir'));
    expect(at('syscall(116')).to.be.greaterThan(at('syscall(166'));
    expect(at('syscall(117')).to.be.greaterThan(at('syscall(119'));
    expect(at('exec {')).to.be.greaterThan(at('syscall(117'));
  });
});

describe('hosts: a sealed network namespace, as the host reads it', () => {
  const dev = (...ifaces: string[]) => `Inter-|   Receive\n face |bytes\n${ifaces.map((i) => `    ${i}:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0`).join('\n')}\n`;
  const route = (...rows: string[]) => `Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n${rows.join('\n')}${rows.length ? '\n' : ''}`;
  it('loopback only and no route: sealed', () => expect(netSealed(dev('lo'), route())).to.equal(true));
  it('another interface: not sealed', () => expect(netSealed(dev('lo', 'eth0'), route())).to.equal(false));
  it('a route: not sealed', () => expect(netSealed(dev('lo'), route('lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0'))).to.equal(false));
  it('nothing read (the process is gone): not sealed', () => expect(netSealed('', '')).to.equal(false));
});
