import { expect } from 'chai';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * Issue 24, item 2: host paths were visible inside. `/proc/self/mountinfo` named
 * `DATA_DIR/environments/<id>/disk` (a bind mount shows the path of its source within its
 * filesystem), contrary to docs/environments.md. Now every mount inside comes from a
 * filesystem of its own (the disk's ext4 image, the /run/service and /etc tmpfs) or is a
 * system path (/usr, named files of /etc, /dev nodes), so its root is `/` or that path.
 *
 * Read from inside through exec, as an agent would: this process's mountinfo, the
 * sandbox's first process's, the first process's command line, and the file API.
 */
describe('security: no host path inside the sandbox (issue 24, item 2)', function () {
  this.timeout(60_000);
  let t: TestService;
  let envId: string;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    const created = await t.api.post('/v1/environments', { end_user_id: 'mountinfo-reader', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 }, files: { 'a.txt': 'A' } });
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
  });
  after(async () => t?.close());

  it('mountinfo of the exec and of the sandbox\'s first process: no DATA_DIR, no environments/<id>, no host temp directory', async () => {
    const r = await sh(t.api, envId, 'cat /proc/self/mountinfo; echo ---; cat /proc/1/mountinfo; echo ---; tr "\\0" " " < /proc/1/cmdline; echo; cat /proc/self/mounts');
    expect(r.exit_code, r.stderr).to.equal(0);
    const dataDir = resolve(t.svc.dataDir);
    for (const needle of [dataDir, realpathSync(dataDir), 'environments/env_', envId, 'gw-data-', `${realpathSync(tmpdir())}/gw`, 'disk.img']) {
      expect(r.stdout, `mountinfo names ${needle}`).to.not.include(needle);
    }
  });

  it('every mount\'s root is `/`, /usr, a named file of /etc, or a single name (a tmpfs file, a /dev node): an allow-list', async () => {
    const r = await sh(t.api, envId, 'cat /proc/self/mountinfo');
    const lines = r.stdout.trim().split('\n');
    expect(lines.length).to.be.greaterThan(10);
    const roots = lines.map((l) => {
      const f = l.split(' ');
      return { root: f[3]!, at: f[4]! };
    });
    for (const { root, at } of roots) {
      const ok = root === '/' || root === '/newroot' || root === '/usr' || /^\/etc\/[A-Za-z0-9._-]+$/.test(root) || /^\/usr\/share\/zoneinfo\//.test(root)
        || /^\/usr\/lib\/os-release$/.test(root) || /^\/[A-Za-z0-9._-]+$/.test(root);
      expect(ok, `mount at ${at} has root ${root}`).to.equal(true);
    }
    const byPoint = Object.fromEntries(roots.map((m) => [m.at, m.root]));
    // The data disk, /run/service and the generated /etc files: filesystems of their own.
    expect(byPoint['/home/agent']).to.equal('/');
    expect(byPoint['/run/service']).to.equal('/');
    expect(byPoint['/etc/passwd']).to.equal('/passwd');
  });

  it('the data disk is its own filesystem (ext4 on a loop device), /run/service a tmpfs', async () => {
    const r = await sh(t.api, envId, 'cat /proc/self/mountinfo');
    // <id> <parent> <dev> <root> <mount point> <options> [optional fields] - <type> <source> <super options>
    const got = r.stdout.trim().split('\n').map((l) => {
      const [head, tail] = l.split(' - ');
      return `${head!.split(' ')[4]} ${tail!.split(' ').slice(0, 2).join(' ')}`;
    }).filter((l) => /^\/(home\/agent|run\/service) /.test(l));
    expect(got[0]).to.match(/^\/home\/agent ext4 \/dev\/loop\d+$/);
    expect(got[1]).to.equal('/run/service tmpfs service');
  });
});
