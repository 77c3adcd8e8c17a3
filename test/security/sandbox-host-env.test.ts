import { expect } from 'chai';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { exec, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * Issue 24, item 1: exec variables reached the host side. The `env` of an exec (and of the
 * configuration) was the environment of the host-side root shell that joins the cgroup,
 * which then found `nsenter` through PATH: a file written into the disk as `bin/nsenter`
 * and `PATH=<DATA_DIR>/environments/<id>/disk/bin:...` ran as uid 0 on the host, and
 * `LD_*` reached host processes.
 *
 * The attack, as an agent (files written into its disk) and a developer's backend (an
 * exec's `env`, the configuration's `env`) would make it: a program planted under every
 * name the host side calls, each writing a marker into a directory that exists only on the
 * host, and variables that point every lookup of the host side at the disk's host path.
 * A marker there means a host process ran it. The same programs are run inside by name,
 * to prove they do write their marker when they run (inside, the directory is made in the
 * sandbox's own /tmp).
 */
const NAMES = [
  'sh', 'bash', 'dash', 'env', 'nsenter', 'setpriv', 'unshare', 'mount', 'umount', 'bwrap', 'perl', 'losetup', 'mkfs.ext4',
  'resize2fs', 'fallocate', 'awk', 'sort', 'cp', 'ss', 'socat', 'cat', 'id', 'ip', 'node', 'python3',
];

describe('security: nothing the caller sets runs on the host (issue 24, item 1)', function () {
  this.timeout(90_000);
  let t: TestService;
  let envId: string;
  let mark: string;
  let hostDisk: string;
  let cc = false;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    mark = mkdtempSync(join(tmpdir(), 'gw-hostmark-'));
    // Writable by whatever uid a host-side run would have (root, or the environment's).
    chmodSync(mark, 0o777);
    const created = await t.api.post('/v1/environments', { end_user_id: 'host-env-attacker', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } });
    expect(created.status).to.equal(201);
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
    hostDisk = join(resolve(t.svc.dataDir), 'environments', envId, 'disk');
    // The agent plants its programs, a Perl module and (where a compiler is installed) a
    // shared library whose constructor writes a marker; plus a text file as LD_PRELOAD
    // and a broken libc.so.6 for LD_LIBRARY_PATH, which a host process would choke on.
    const plant = await sh(t.api, envId, `set -e
mkdir -p bin lib
for n in ${NAMES.join(' ')}; do printf '#!/bin/sh\\n/usr/bin/mkdir -p ${mark} 2>/dev/null\\necho "$(/usr/bin/id -u) $0" >> ${mark}/ran-%s\\n' "$n" > "bin/$n"; chmod 755 "bin/$n"; done
printf 'package Planted; mkdir("${mark}"); if (open(my $f, ">>", "${mark}/ran-perl5opt")) { print $f "$<\\\\n" } 1;\\n' > lib/Planted.pm
echo 'not an ELF object' > not-elf.so
echo 'not a libc' > lib/libc.so.6
if command -v gcc >/dev/null; then
  printf '#include <fcntl.h>\\n#include <sys/stat.h>\\n#include <unistd.h>\\n__attribute__((constructor)) static void planted(void) { mkdir("${mark}", 0777); int fd = open("${mark}/ran-ld-preload", O_WRONLY | O_CREAT | O_APPEND, 0666); if (fd >= 0) { write(fd, "x\\\\n", 2); close(fd); } }\\n' > planted.c
  gcc -shared -fPIC -o planted.so planted.c && echo cc-ok
fi`);
    expect(plant.exit_code, plant.stderr).to.equal(0);
    cc = plant.stdout.includes('cc-ok');
    // The host sees the planted files at the disk's host path (what the attack points at).
    expect(existsSync(join(hostDisk, 'bin', 'nsenter'))).to.equal(true);
  });

  after(async () => {
    await t?.close();
    if (mark) rmSync(mark, { recursive: true, force: true });
  });

  const ranOnHost = (): string[] => (existsSync(mark) ? readdirSync(mark) : []);
  // Each attack is judged on its own markers.
  beforeEach(() => {
    for (const f of ranOnHost()) rmSync(join(mark, f), { force: true });
  });

  it('exec env: PATH, SHELL, BASH_ENV and ENV at the planted programs run none of them on the host; the command runs inside with exactly those variables', async () => {
    const env = {
      PATH: `${hostDisk}/bin:/home/agent/bin:/usr/bin:/bin`, SHELL: `${hostDisk}/bin/sh`, BASH_ENV: `${hostDisk}/bin/sh`, ENV: `${hostDisk}/bin/sh`,
    };
    const r = await exec(t.api, envId, ['/bin/sh', '-c', 'echo inside-ok; printenv PATH SHELL'], { env });
    expect(ranOnHost(), 'planted programs ran on the host').to.deep.equal([]);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.stdout).to.equal(`inside-ok\n${env.PATH}\n${env.SHELL}\n`);
    // Exactly: the environment's own variables (those the service wrote to /run/service/env)
    // and the request's, none of the host launcher's (its fixed PATH and LC_ALL).
    const names = (out: string) => out.split('\0').filter(Boolean).map((kv) => kv.slice(0, kv.indexOf('='))).sort();
    const surface = await exec(t.api, envId, ['/bin/sed', '-n', 's/^export \\([^=]*\\)=.*/\\1/p', '/run/service/env'], {});
    const own = surface.body.stdout.trim().split('\n').sort();
    expect(own).to.include.members(['HOME', 'HTTPS_PROXY', 'PATH']);
    expect(names((await exec(t.api, envId, ['/usr/bin/env', '-0'], {})).body.stdout)).to.deep.equal(own);
    expect(names((await exec(t.api, envId, ['/usr/bin/env', '-0'], { env: { ONLY_HERE: '1' } })).body.stdout)).to.deep.equal([...own, 'ONLY_HERE'].sort());
  });

  it('exec env: LD_PRELOAD at a library in the disk (by its host path) reaches no host process', async () => {
    const preload = cc ? `${hostDisk}/planted.so` : `${hostDisk}/not-elf.so`;
    const r = await exec(t.api, envId, ['/bin/sh', '-c', 'echo inside-ok'], { env: { LD_PRELOAD: preload, PATH: '/usr/bin:/bin' } });
    expect(ranOnHost(), 'the preloaded library ran on the host').to.deep.equal([]);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.stdout).to.equal('inside-ok\n');
    // A host process would have loaded it (marker) or said it is not an ELF object; the
    // processes inside cannot open that path at all.
    expect(r.body.stderr).to.not.match(/invalid ELF header|file too short/);
  });

  it('exec env: LD_LIBRARY_PATH at a broken libc in the disk, LD_AUDIT, PERL5LIB/PERL5OPT at a planted module: no host process takes them', async () => {
    const env = {
      LD_LIBRARY_PATH: `${hostDisk}/lib`, LD_AUDIT: `${hostDisk}/not-elf.so`, PERL5LIB: `${hostDisk}/lib`, PERL5OPT: '-MPlanted', PATH: '/usr/bin:/bin',
    };
    const r = await exec(t.api, envId, ['/bin/sh', '-c', 'echo inside-ok'], { env });
    expect(ranOnHost(), 'the planted module ran on the host').to.deep.equal([]);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.stdout).to.equal('inside-ok\n');
    expect(r.body.stderr).to.not.match(/libc\.so\.6|invalid ELF header|Planted/);
  });

  it('configuration env: the same variables set as the environment\'s configuration reach no host process either', async () => {
    const put = await t.api.put(`/v1/environments/${envId}/config`, {
      env: { PATH: `${hostDisk}/bin:/usr/bin:/bin`, LD_PRELOAD: cc ? `${hostDisk}/planted.so` : `${hostDisk}/not-elf.so`, PERL5LIB: `${hostDisk}/lib`, PERL5OPT: '-MPlanted', SHELL: `${hostDisk}/bin/sh` },
    });
    expect(put.status, put.text).to.equal(200);
    const r = await exec(t.api, envId, ['/bin/sh', '-c', 'echo inside-ok; printenv PERL5OPT']);
    expect(ranOnHost(), 'a planted program ran on the host').to.deep.equal([]);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.stdout).to.equal('inside-ok\n-MPlanted\n');
    // A file call runs through the same entry.
    expect((await t.api.get(`/v1/environments/${envId}/files?path=lib/Planted.pm`)).status).to.equal(200);
    expect(ranOnHost()).to.deep.equal([]);
    await t.api.put(`/v1/environments/${envId}/config`, { env: {} });
  });

  it('the sandbox\'s root is read-only: no /etc/ld.so.preload or replaced /lib64 link can be planted for what runs there next', async () => {
    const r = await sh(t.api, envId, 'for p in /etc/ld.so.preload /lib64.new /bin.new; do touch "$p" 2>/dev/null && echo "WROTE $p"; done; mv /lib64 /lib64.old 2>/dev/null && echo MOVED; ls -ld / | cut -c1-10; echo ok');
    expect(r.stdout).to.not.match(/WROTE|MOVED/);
    expect(r.stdout).to.match(/ok\n$/);
  });

  it('the planted programs, module and library do run when called inside: each writes its marker (in the sandbox\'s /tmp, never the host\'s)', async () => {
    const r = await sh(t.api, envId, `for n in ${NAMES.join(' ')}; do "$n"; done
PERL5LIB=/home/agent/lib PERL5OPT=-MPlanted /usr/bin/perl -e 1
${cc ? 'LD_PRELOAD=/home/agent/planted.so /usr/bin/true' : 'true'}
ls ${mark}`, { env: { PATH: '/home/agent/bin:/usr/bin:/bin' } });
    const inside = r.stdout.trim().split('\n');
    const want = [...NAMES.map((n) => `ran-${n}`), 'ran-perl5opt', ...(cc ? ['ran-ld-preload'] : [])];
    expect(want.filter((m) => !inside.includes(m)), r.stderr).to.deep.equal([]);
    expect(ranOnHost(), 'a marker reached the host').to.deep.equal([]);
  });
});
