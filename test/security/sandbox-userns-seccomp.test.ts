import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { exec, sandboxProcess, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { ProcessDriver } from '../../hosts/drivers/process.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Issue 24, item 3: nested user namespaces and no seccomp. `unshare -Ur` inside gave uid 0
 * and every capability in a new namespace (the door to most kernel exploits from
 * containers), and `Seccomp: 0`. Now bubblewrap disables nested user namespaces and loads
 * the sandbox's filter (hosts/drivers/seccomp.ts), and an exec, which enters from the
 * host, loads the same filter before it becomes the agent (hosts/drivers/enter.ts).
 *
 * From inside, as an agent: the filter's mode in /proc, unshare(1) of each namespace, and
 * each denied system call made directly (python3 ctypes, so no libc wrapper hides the
 * answer), from an exec and from a daemon the sandbox's first process started. Then the
 * Debian tools an agent uses, to show they still work under it.
 */
const CALLS = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, 'OK' if r >= 0 else errno.errorcode[ctypes.get_errno()])
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x20000, 0x40000000, 17
call('keyctl', 250, 0, 0, 0, 0, 0)
call('add_key', 248, 0, 0, 0, 0, 0)
call('request_key', 249, 0, 0, 0, 0)
call('bpf', 321, 0, 0, 0)
call('userfaultfd', 323, 0)
call('perf_event_open', 298, 0, 0, -1, -1, 0)
call('io_uring_setup', 425, 1, 0)
call('open_by_handle_at', 304, -100, 0, 0)
call('name_to_handle_at', 303, -100, 0, 0, 0, 0)
call('init_module', 175, 0, 0, 0)
call('finit_module', 313, -1, 0, 0)
call('delete_module', 176, 0, 0)
call('kexec_load', 246, 0, 0, 0, 0)
call('kexec_file_load', 320, -1, -1, 0, 0, 0)
call('mount', 165, 0, 0, 0, 0, 0)
call('umount2', 166, 0, 0)
call('pivot_root', 155, 0, 0)
call('fsopen', 430, 0, 0)
call('open_tree', 428, -100, 0, 0)
call('setns', 308, -1, 0)
call('unshare_user', 272, CLONE_NEWUSER)
call('unshare_mnt', 272, CLONE_NEWNS)
call('unshare_net', 272, CLONE_NEWNET)
call('clone_user', 56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
call('clone3', 435, 0, 0)
call('modify_ldt', 154, 0, 0, 0)
call('personality_no_aslr', 135, 0x0040000)
call('syslog', 103, 3, 0, 0)
call('getpid', 39)
pid = os.fork()
if pid == 0: os._exit(0)
print('fork', 'OK' if os.waitpid(pid, 0)[1] == 0 else 'FAILED')
`;

describe('security: no nested user namespace, and a seccomp filter on every process (issue 24, item 3)', function () {
  this.timeout(120_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let envId: string;

  before(async function () {
    skipWithoutRuntime(this);
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-seccomp-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_RUNTIME: 'process', GATEWAY_UPSTREAM_OVERRIDES: `api.example.com=127.0.0.1:${up.port}`, GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'seccomp-prober', resources: { cpus: 1, memory_mib: 1024, disk_gib: 2 }, egress_allow: ['api.example.com'],
    });
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
  });
  after(async () => {
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('an exec runs under the filter (Seccomp: 2, no_new_privs), and so does the sandbox\'s first process', async () => {
    const r = await sh(t.api, envId, 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status; grep "^Seccomp:" /proc/1/status');
    expect(r.stdout).to.equal('NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp:\t2\n');
  });

  it('unshare -Ur (and every other namespace) fails from an exec', async () => {
    const r = await sh(t.api, envId, 'for f in -Ur -U -m -n -p -i -u -C "-U --map-root-user --mount"; do unshare $f true 2>/dev/null && echo "ALLOWED $f" || echo "refused $f"; done; id -u');
    expect(r.stdout).to.not.include('ALLOWED');
    expect(r.stdout.trim().split('\n').at(-1)).to.equal('1000');
  });

  it('the second wall on its own: a process in the sandbox\'s user namespace without the filter still cannot make a nested one (bubblewrap --disable-userns)', () => {
    // Every process inside carries the filter, which refuses CLONE_NEW* too, so from inside
    // the test above holds with either wall alone. Here the host enters the sandbox's user
    // namespace with no filter (nsenter as root) and tries: only the namespace limit that
    // --disable-userns sets answers (ENOSPC, "No space left on device"). As the agent's uid
    // (1000 inside), which without that limit may make one (the control below shows it can enter).
    const uid = (t.svc.host!.driver as ProcessDriver).uidOf(envId)!;
    const pid = sandboxProcess(uid);
    expect(pid, 'a process of the sandbox').to.be.a('string');
    const control = spawnSync('/usr/bin/nsenter', ['-t', pid!, '-U', '-S', '1000', '-G', '1000', '/usr/bin/id', '-u'], { encoding: 'utf8' });
    expect(control.status, `control: entering works (${control.stderr})`).to.equal(0);
    expect(control.stdout.trim()).to.equal('1000');
    const r = spawnSync('/usr/bin/nsenter', ['-t', pid!, '-U', '-S', '1000', '-G', '1000', '/usr/bin/unshare', '-U', '/usr/bin/true'], { encoding: 'utf8' });
    expect(r.status, 'a nested user namespace was created').to.not.equal(0);
    expect(r.stderr).to.match(/No space left on device/);
  });

  it('each denied system call answers EPERM (ENOSYS for io_uring and clone3), the rest still work', async () => {
    const r = await exec(t.api, envId, ['python3', '-c', CALLS]);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const got = Object.fromEntries(r.body.stdout.trim().split('\n').map((l: string) => l.split(' ')));
    const eperm = ['keyctl', 'add_key', 'request_key', 'bpf', 'userfaultfd', 'perf_event_open', 'open_by_handle_at', 'name_to_handle_at', 'init_module', 'finit_module', 'delete_module',
      'kexec_load', 'kexec_file_load', 'mount', 'umount2', 'pivot_root', 'fsopen', 'open_tree', 'setns', 'unshare_user', 'unshare_mnt', 'unshare_net', 'clone_user', 'modify_ldt',
      'personality_no_aslr', 'syslog'];
    for (const name of eperm) expect(got[name], name).to.equal('EPERM');
    expect(got.io_uring_setup).to.equal('ENOSYS');
    expect(got.clone3).to.equal('ENOSYS');
    expect(got.getpid).to.equal('OK');
    expect(got.fork).to.equal('OK');
  });

  it('a daemon the exec leaves behind keeps the filter (no way around it by detaching)', async () => {
    const script = [
      'sleep 0.3', // the exec that started it is gone by then
      'unshare -Ur true 2>/dev/null && echo userns-ALLOWED || echo userns-refused',
      'python3 -c "import ctypes, errno; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(250, 0, 0, 0, 0, 0); print(\'keyctl\', \'OK\' if r >= 0 else errno.errorcode[ctypes.get_errno()])"',
      'echo done',
    ].join('\n');
    expect((await t.api.put(`/v1/environments/${envId}/files`, { path: 'daemon.sh', content: script })).status).to.equal(200);
    await sh(t.api, envId, 'rm -f daemon.out; nohup sh daemon.sh > daemon.out 2>&1 &');
    let out = '';
    for (const t0 = Date.now(); Date.now() - t0 < 10_000 && !out.includes('done'); await new Promise((r) => setTimeout(r, 100))) {
      out = (await sh(t.api, envId, 'cat daemon.out 2>/dev/null || true')).stdout;
    }
    expect(out).to.equal('userns-refused\nkeyctl EPERM\ndone\n');
  });

  it('Debian\'s tools still work under it: git, curl through the gateway, python3 (threads, subprocess), node (worker threads, child processes), pip, npm', async () => {
    up.seen.length = 0;
    const r = await sh(t.api, envId, `set -e
cd "$(mktemp -d /home/agent/work.XXXX)"
git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m one && git log --oneline | wc -l
curl -sS -o /dev/null -w '%{http_code}\\n' https://api.example.com/ping
python3 -c "
import threading, subprocess, concurrent.futures
t = threading.Thread(target=lambda: None); t.start(); t.join()
with concurrent.futures.ProcessPoolExecutor(2) as ex: print(sum(ex.map(abs, [-1, -2])))
print(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())"
node -e "
const { Worker } = require('worker_threads');
new Worker('require(\\'worker_threads\\').parentPort.postMessage(42)', { eval: true }).on('message', (m) => {
  console.log('worker', m);
  console.log(require('child_process').execFileSync('echo', ['child']).toString().trim());
});"
pip --version | cut -d' ' -f1
npm --version >/dev/null && npm init -y >/dev/null && echo npm-ok
`, { timeout_secs: 120 });
    expect(r.exit_code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n')).to.deep.equal(['1', '200', '3', 'sub', 'worker 42', 'child', 'pip', 'npm-ok']);
    expect(up.seen.some((s) => s.url === '/ping')).to.equal(true);
  });
});
