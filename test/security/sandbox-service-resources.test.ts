import { expect } from 'chai';
import { connect } from 'node:net';
import { readdirSync } from 'node:fs';
import { startTestService, type TestService } from '../helpers/service.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { MAX_SOCKET_CONNECTIONS } from '../../hosts/drivers/process.js';
import { MAX_EXECS_PER_ENVIRONMENT } from '../../api/routes/runtime.js';

/**
 * The service's own resources, spent from inside one environment or by one client
 * (a third review's availability findings): what one tenant holds must not stop the others.
 *
 * - Connections to /run/service/gateway.sock without end: each was up to three of the
 *   service's file descriptors; one agent took the service to its limit (EMFILE for every
 *   tenant's requests and starts). Now each environment's sockets take a bounded number.
 * - A streamed exec whose client stops reading: the service held all of `yes`'s output
 *   (~100 MiB/s). Now past the backlog the command is killed and the stream cut.
 */
describe('security: one tenant cannot spend the service\'s descriptors or memory', function () {
  this.timeout(90_000);
  let t: TestService;
  let envId: string;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    const created = await t.api.post('/v1/environments', { end_user_id: 'resource-hog', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } });
    expect(created.status).to.equal(201);
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
  });
  after(async () => {
    await t?.close();
  });

  const fds = (): number => readdirSync('/proc/self/fd').length;

  it('attack: an agent holding connections to gateway.sock open gets at most its cap; the service\'s descriptors stay bounded', async () => {
    const cap = MAX_SOCKET_CONNECTIONS.gateway;
    const before = fds();
    // One process inside opens 3 × the cap and holds them (python3: no reads, no closes).
    const hold = `import socket, time
held = []
for i in range(${cap * 3}):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect('/run/service/gateway.sock'); held.append(s)
    except OSError:
        pass
open('/tmp/held', 'w').write(str(len(held)))
time.sleep(20)`;
    await t.api.put(`/v1/environments/${envId}/files`, { path: 'hold.py', content: hold });
    const started = await sh(t.api, envId, 'ulimit -n 8192 2>/dev/null; setsid python3 hold.py >/dev/null 2>&1 < /dev/null & for i in $(seq 200); do [ -s /tmp/held ] && break; sleep 0.1; done; cat /tmp/held');
    expect(Number(started.stdout)).to.be.greaterThan(0);
    // What the service holds for them: at most the cap's worth (up to three each), not 3 × the cap's.
    let grown = 0;
    for (let i = 0; i < 20; i++) {
      grown = fds() - before;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(grown).to.be.at.most(cap * 3 + 16);
    // The API (every tenant's) still answers meanwhile.
    expect((await t.api.get(`/v1/environments/${envId}`)).status).to.equal(200);
    await sh(t.api, envId, 'pkill -f hold.py; true');
  });

  it('attack: a connection the proxy ended is closed inside too, not kept half-open for as long as the agent holds it', async () => {
    // Each connection is refused by the proxy (a request line it cannot parse: 400, then it
    // closes). The agent reads to the end and keeps its end open; a write then finds the
    // service's end closed (EPIPE), where a half-open one took it (and kept a descriptor).
    const probe = `import socket, time
socks = []
for i in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect('/run/service/gateway.sock')
    s.sendall(b'\\x00 not http\\r\\n\\r\\n'); socks.append(s)
for s in socks:
    s.settimeout(10)
    while s.recv(65536): pass
time.sleep(0.5)
closed = 0
for s in socks:
    try:
        for i in range(3):
            s.sendall(b'x' * 1024); time.sleep(0.05)
    except OSError:
        closed += 1
print(closed)`;
    await t.api.put(`/v1/environments/${envId}/files`, { path: 'probe.py', content: probe });
    const r = await sh(t.api, envId, 'python3 probe.py');
    expect(r.stdout.trim(), r.stderr).to.equal('20');
  });

  it('attack: a config file of a 255-character name reaches the environment and does not stop another\'s refresh; a file named like an Object.prototype member is removed when dropped (a fourth review)', async () => {
    const other = await t.api.post('/v1/environments', { end_user_id: 'resource-neighbour', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } });
    expect(other.status).to.equal(201);
    await waitState(t.api, other.body.id, 'running');
    const long = 'a'.repeat(255);
    expect((await t.api.put(`/v1/environments/${envId}/config`, { files: { [long]: 'x', constructor: 'secret-ish' } })).status).to.equal(200);
    expect((await t.api.put(`/v1/environments/${other.body.id}/config`, { files: { hello: 'neighbour' } })).status).to.equal(200);
    const seen = async (id: string, cmd: string, want: string): Promise<string> => {
      let out = '';
      for (let i = 0; i < 75 && out !== want; i++) {
        out = (await sh(t.api, id, cmd)).stdout.trim();
        if (out !== want) await new Promise((r) => setTimeout(r, 200));
      }
      return out;
    };
    expect(await seen(other.body.id, 'cat /run/service/files/hello 2>/dev/null || true', 'neighbour')).to.equal('neighbour');
    expect(await seen(envId, `cat /run/service/files/${long} 2>/dev/null || true`, 'x')).to.equal('x');
    expect((await t.api.put(`/v1/environments/${envId}/config`, { files: {} })).status).to.equal(200);
    expect(await seen(envId, 'ls /run/service/files | wc -l', '0')).to.equal('0');
    await t.api.delete(`/v1/environments/${other.body.id}`);
  });

  it('attack: execs at once are capped per environment (503 exec_failed past the cap); argv and env past the kernel\'s 2 MiB are refused before anything starts (a fourth review)', async () => {
    const big = await t.api.post(`/v1/environments/${envId}/exec`, { command: ['true', ...Array.from({ length: 17 }, () => 'x'.repeat(128 * 1024))] });
    expect(big.status).to.equal(400);
    expect(big.body.error).to.equal('invalid_request');
    const sleeping = Array.from({ length: MAX_EXECS_PER_ENVIRONMENT }, () => t.api.post(`/v1/environments/${envId}/exec`, { command: ['sleep', '6'] }));
    // Once all have arrived, one more is refused (before, a quick one still fits and runs).
    let over: { status: number; body: any } | null = null;
    for (let i = 0; i < 100; i++) {
      const r = await t.api.post(`/v1/environments/${envId}/exec`, { command: ['true'] });
      if (r.status !== 200) {
        over = r;
        break;
      }
      await new Promise((res) => setTimeout(res, 20));
    }
    expect(over?.status).to.equal(503);
    expect(over?.body.error).to.equal('exec_failed');
    expect(over?.body.message).to.match(/already runs 64 commands/);
    expect((await Promise.all(sleeping)).every((r) => r.status === 200)).to.equal(true);
    expect((await t.api.post(`/v1/environments/${envId}/exec`, { command: ['true'] })).status).to.equal(200);
  });

  it('attack: a streamed exec whose client stops reading is killed past its backlog; the output is not all held', async () => {
    const u = new URL(t.svc.apiUrl);
    const body = JSON.stringify({ command: ['/bin/sh', '-c', 'yes 0123456789012345678901234567890123456789012345678901234567890123456789'], timeout_secs: 60 });
    const sock = connect(Number(u.port), u.hostname);
    await new Promise((r) => sock.once('connect', r));
    // Reads nothing after sending: the kernel's buffers fill, then the service's.
    sock.pause();
    sock.write(`POST /v1/environments/${envId}/exec HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${t.api.key}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // Well before the 60 s timeout the command is gone (killed for its unread backlog).
    let running = '';
    for (let i = 0; i < 150; i++) {
      await new Promise((r) => setTimeout(r, 100));
      running = (await sh(t.api, envId, 'pgrep -x yes || true')).stdout.trim();
      if (i > 10 && running === '') break;
    }
    expect(running, 'yes still running').to.equal('');
    sock.destroy();
  });
});
