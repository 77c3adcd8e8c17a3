import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { peerOf, peerStats } from '../../hosts/peer.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * Issue 24, item 5: "keep-awake's caller can be faked". The caller was found by matching
 * `pid=(\d+)` in `ss -xp` output, where a client socket bound at `/tmp/pid=1` put the text
 * `pid=1` first: the hold was tied to the host's init and outlived the process that asked.
 * Now the caller is the socket's peer credentials (SO_PEERCRED, hosts/peer.ts), which
 * nothing the agent writes can change.
 */
describe('peerOf: the process that connected, by SO_PEERCRED (no sandbox needed)', () => {
  it('names the connecting child process, even bound at a path that says pid=1; not a process of the given sandbox: unidentified', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-peer-'));
    const path = join(dir, 'control.sock');
    let accept!: (s: Socket) => void;
    const accepted = new Promise<Socket>((resolve) => (accept = resolve));
    const server = createServer((s) => {
      accept(s);
      server.close();
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    // A python client bound at <dir>/pid=1 (what ss printed first) that stays connected.
    const bound = join(dir, 'pid=1');
    const child = spawn('/usr/bin/python3', ['-c', `import socket, time\ns = socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(bound)}); s.connect(${JSON.stringify(path)})\ntime.sleep(60)`], { stdio: 'ignore' });
    try {
      const socket = await accepted;
      const spawned = peerStats.spawned;
      const who = await peerOf(socket, process.pid);
      expect(peerStats.spawned - spawned).to.equal(1);
      expect(who).to.deep.include({ pid: child.pid });
      expect(who!.unidentified).to.equal(undefined);
      expect(who!.start).to.match(/^\d+$/);
      // Asked for a process of another pid namespace (a sandbox it is not in): refused.
      if (process.getuid?.() === 0 && existsSync('/usr/bin/unshare')) {
        const sandbox = spawn('/usr/bin/unshare', ['--pid', '--fork', '--kill-child', '/bin/sleep', '60'], { stdio: 'ignore' });
        let inner = 0;
        for (let i = 0; i < 200 && !inner; i++) {
          try {
            inner = Number(readFileSync(`/proc/${sandbox.pid}/task/${sandbox.pid}/children`, 'utf8').trim().split(' ')[0]) || 0;
          } catch { /* not yet */ }
          if (!inner) await new Promise((r) => setTimeout(r, 10));
        }
        const other = await peerOf(socket, inner);
        sandbox.kill('SIGKILL');
        expect(other).to.deep.include({ pid: child.pid, unidentified: 'the caller is not a process of this sandbox' });
      }
      socket.destroy();
      const closed = await peerOf(socket);
      expect(closed!.unidentified).to.equal('the connection is closed');
    } finally {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('control socket: the keep-awake caller cannot be faked (process sandbox)', function () {
  this.timeout(90_000);
  let t: TestService;
  let n = 0;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
  });
  after(async () => {
    await t?.close();
  });

  async function create(): Promise<any> {
    const r = await t.api.post('/v1/environments', { end_user_id: `spoof-${++n}`, resources: { cpus: 1, memory_mib: 512 } });
    expect(r.status).to.equal(201);
    const e = await waitState(t.api, r.body.id, 'running');
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { keep_awake_max_secs: 3600, keep_awake_daily_secs: 86_400 });
    return e;
  }
  /** A python client bound at `bind` asks for a keep-awake; `wait`: it reads the answer and lives on, else it exits at once. */
  function client(bind: string, wait: boolean): string {
    return [
      'import os, socket, time',
      `path = ${JSON.stringify(bind)}`,
      'if os.path.exists(path): os.unlink(path)',
      's = socket.socket(socket.AF_UNIX); s.bind(path); s.connect("/run/service/control.sock")',
      "body = b'{\"seconds\": 600}'",
      "s.sendall(b'POST /keep-awake HTTP/1.1\\r\\nHost: c\\r\\nContent-Type: application/json\\r\\nContent-Length: ' + str(len(body)).encode() + b'\\r\\nConnection: close\\r\\n\\r\\n' + body)",
      wait ? "open('/tmp/answer.txt', 'wb').write(s.recv(4096)); s.close()\ntime.sleep(100000)" : 'os._exit(0)',
    ].join('\n');
  }
  const events = async (id: string, kind: string) => (await t.api.get(`/v1/environments/${id}/events?kind=${kind}`)).body.data;
  const holding = async (id: string) => t.svc.db('keep_awakes').where({ environment_id: id, source: 'agent' }).whereNull('released_at');
  /** Polls until /proc/<pid> is gone (a killed process is reaped by the sandbox's init). */
  async function gone(pid: number): Promise<void> {
    for (let i = 0; i < 200 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 25));
  }

  it('a client socket bound at /tmp/pid=1: the hold is tied to the real caller and ends when it exits', async () => {
    const e = await create();
    await t.api.put(`/v1/environments/${e.id}/files`, { path: 'spoof.py', content: client('/tmp/pid=1', true) });
    const r = await sh(t.api, e.id, 'rm -f /tmp/answer.txt; nohup python3 spoof.py >/dev/null 2>&1 & for i in $(seq 100); do [ -s /tmp/answer.txt ] && break; sleep 0.1; done; head -1 /tmp/answer.txt');
    expect(r.stdout).to.match(/^HTTP\/1.1 200/);
    const [row] = await holding(e.id);
    expect(row, 'a held keep-awake').to.not.equal(undefined);
    expect(row.pid).to.not.equal(1);
    // The pid is the host's view of the python process that asked.
    expect(readFileSync(`/proc/${row.pid}/cmdline`, 'utf8')).to.include('spoof.py');
    await t.svc.host!.checkHolds();
    expect(await holding(e.id)).to.have.length(1);
    await sh(t.api, e.id, 'pkill -f spoof.py; true');
    await gone(row.pid);
    await t.svc.host!.checkHolds();
    expect(await holding(e.id)).to.have.length(0);
    expect((await events(e.id, 'keep_awake_released')).map((x: any) => x.data.reason)).to.deep.equal(['process_exited']);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('a caller that exits right after sending holds nothing past its life (found by its credentials, or refused)', async () => {
    const e = await create();
    await t.api.put(`/v1/environments/${e.id}/files`, { path: 'quick.py', content: client('/tmp/pid=1', false) });
    const r = await sh(t.api, e.id, 'python3 quick.py & echo $!; wait');
    const innerPid = Number(r.stdout.trim());
    expect(innerPid).to.be.greaterThan(0);
    // Its request is answered (granted to its pid, or refused caller_unknown) once it is gone.
    let outcome: any[] = [];
    for (let i = 0; i < 200 && outcome.length === 0; i++) {
      outcome = [...(await events(e.id, 'keep_awake')), ...(await events(e.id, 'agent_request_rejected'))];
      if (outcome.length === 0) await new Promise((res) => setTimeout(res, 25));
    }
    expect(outcome).to.have.length(1);
    if (outcome[0].kind === 'agent_request_rejected') expect(outcome[0].data.reason).to.equal('caller_unknown');
    else expect(outcome[0].data.pid).to.not.equal(1);
    const rows = await t.svc.db('keep_awakes').where({ environment_id: e.id, source: 'agent' });
    for (const x of rows) {
      expect(x.pid).to.not.equal(null);
      await gone(x.pid);
    }
    await t.svc.host!.checkHolds();
    expect(await holding(e.id)).to.have.length(0);
    console.log(`      the quick caller: ${outcome[0].kind === 'keep_awake' ? `granted to pid ${outcome[0].data.pid}, released when it was gone` : `refused caller_unknown (${outcome[0].data.why}, pid ${outcome[0].data.pid})`}`);
    await t.api.delete(`/v1/environments/${e.id}`);
  });
});
