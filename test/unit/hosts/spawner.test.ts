import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { Spawner, type Helper } from '../../../hosts/drivers/spawner.js';

/**
 * The resident spawner (hosts/drivers/spawner.ts): the service's helper processes started by
 * a small child of its own, their stdio handed back, so the service's event loop never waits
 * for a fork of itself.
 */
describe('resident spawner', function () {
  this.timeout(20_000);
  const env = { PATH: '/usr/bin:/bin' };
  let s: Spawner;
  beforeEach(() => {
    s = new Spawner(env);
  });
  afterEach(() => s.close());

  const closed = (h: Helper): Promise<[number | null, string | null]> => new Promise((r) => h.once('close', (c, sig) => r([c, sig])));
  const read = (h: Helper, fd: number): (() => string) => {
    let got = '';
    h.stdio[fd]!.on('data', (d: Buffer) => (got += d.toString()));
    return () => got;
  };

  it('a helper gets its argv and environment; its five pipes work both ways; its exit code and close are reported', async () => {
    const h = await s.spawn('/bin/sh', ['-c', 'read x; echo "got $x $V"; echo err >&2; cat <&3 >&4; exit 3'], { n: 5, env: { ...env, V: 'v1' } });
    expect(h.pid).to.be.a('number');
    const out = read(h, 1);
    const err = read(h, 2);
    const four = read(h, 4);
    h.stdin!.end('hello\n');
    h.stdio[3]!.end('via fd 3');
    expect(await closed(h)).to.deep.equal([3, null]);
    expect([out(), err(), four()]).to.deep.equal(['got hello v1\n', 'err\n', 'via fd 3']);
    expect(h.exitCode).to.equal(3);
  });

  it('a helper that exits at once still hands over every pipe and what it wrote (the spawner does not read them)', async () => {
    for (let i = 0; i < 20; i++) {
      const h = await s.spawn('/bin/sh', ['-c', 'echo quick; echo gone >&2'], { n: 3, env });
      const out = read(h, 1);
      const err = read(h, 2);
      expect(await closed(h)).to.deep.equal([0, null]);
      expect([out(), err()]).to.deep.equal(['quick\n', 'gone\n']);
    }
  });

  it('a helper holds no socket but its own pipes: not the spawner\'s channel to the service', async () => {
    // The shell's own fds, listed by ls (a child of it, so the listing's own directory is not among them).
    const h = await s.spawn('/bin/sh', ['-c', 'ls -l /proc/$$/fd'], { n: 5, env });
    const out = read(h, 1);
    await closed(h);
    const fds = out().trim().split('\n').filter((l) => l.includes(' -> ')).map((l) => /(\d+) -> (.*)$/.exec(l)!.slice(1) as [string, string]);
    expect(fds.filter(([fd]) => Number(fd) <= 4).map(([, to]) => to.startsWith('socket:'))).to.deep.equal([true, true, true, true, true]);
    // (An fd the test runner itself inherited without close-on-exec may pass through, as with
    // Node's own spawn: the exec launcher closes every fd above 4 before anything runs.)
    expect(fds.filter(([fd, to]) => Number(fd) > 4 && to.startsWith('socket:'))).to.deep.equal([]);
  });

  it('a file that cannot be run: the spawn rejects; the spawner goes on', async () => {
    let failed: Error | null = null;
    await s.spawn('/nonexistent/helper', [], { n: 3, env }).catch((err: Error) => (failed = err));
    expect(failed).to.be.instanceOf(Error);
    const h = await s.spawn('/bin/true', [], { n: 3, env });
    expect(await closed(h)).to.deep.equal([0, null]);
  });

  it('the spawner killed: a helper it started has its pipes closed and is reported ended, with no code (nobody waits forever); the next spawn starts a new spawner', async () => {
    const h = await s.spawn('/bin/sleep', ['30'], { n: 3, env, detached: true });
    const [pid] = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).filter(isOurSpawner);
    expect(pid, 'the spawner process').to.be.a('number');
    const ended = closed(h);
    process.kill(pid!, 'SIGKILL');
    expect(await ended).to.deep.equal([null, null]);
    const again = await s.spawn('/bin/true', [], { n: 3, env });
    expect(await closed(again)).to.deep.equal([0, null]);
    process.kill(h.pid!, 'SIGKILL'); // the sleep (it lost its pipes, and sleep does not write)
  });

  it('close() while helpers\' pipes are still being handed over: every spawn settles, and the spawner process ends', async () => {
    // A spawner whose channel closes while it waits for the service's acknowledgement of a
    // pipe never sees the disconnect (Node postpones it until its queue of handles is sent),
    // so it neither exits nor reports: a driver closing mid-start waited forever (found by
    // test/security/control-socket-peer-spoof.test.ts, whose service's stop hung ~1 run in 4).
    // Short sleeps: a spawn refused mid-way leaves its helper to end by itself.
    const started = Array.from({ length: 20 }, () => s.spawn('/bin/sleep', ['10'], { n: 5, env, detached: true }));
    const outcomes = started.map((p) => p.then((h) => h, () => null));
    await Promise.race(started); // the first has all its pipes; most of the others are mid-way
    const [spawnerPid] = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).filter(isOurSpawner);
    expect(spawnerPid, 'the spawner process').to.be.a('number');
    s.close();
    const settled = await Promise.race([Promise.all(outcomes), new Promise<'hung'>((r) => setTimeout(() => r('hung'), 5_000))]);
    expect(settled, 'every spawn settled within 5 s of close()').to.not.equal('hung');
    for (const h of settled as Array<Helper | null>) if (h?.pid) process.kill(h.pid, 'SIGKILL');
    for (let i = 0; i < 100 && isOurSpawner(spawnerPid!); i++) await new Promise((r) => setTimeout(r, 20));
    expect(isOurSpawner(spawnerPid!), 'the spawner process ended').to.equal(false);
  });
});

/** A spawner of this test process: a node child whose argv is `-e <the spawner's program>`. */
function isOurSpawner(pid: number): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
    return argv[1] === '-e' && (argv[2] ?? '').includes("process.on('disconnect'") && ppid === String(process.pid);
  } catch {
    return false;
  }
}
