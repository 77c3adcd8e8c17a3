import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startTestService, type TestService } from './service.js';
import { ProcessDriver } from '../../hosts/drivers/process.js';
import { startFakeUpstream, type FakeUpstream } from './upstream.js';
import {
  environmentProcesses, exec, hostAddresses, interfaces, ipv4Routes, ipv6Routes, pollUntil, sameLoopOnHost, sh, skipWithoutRuntime, tcpProbe, tcpProbeFromHost, waitState as waitStateDefault, withDeadline,
} from './runtime.js';

const API_KEY_VALUE = 'sk_real_value_the_vm_must_never_see_0123456789';

export type RuntimeKind = 'process' | 'qemu';

export interface RuntimeSuiteOptions {
  /** Skips the suite (saying why) where this runtime cannot run. */
  skip(ctx: Mocha.Context): void;
  /** Extra service variables (the qemu image directory, say). */
  env?: Record<string, string>;
  /**
   * The process sandbox only: the environment under test is started from a slot of the pool
   * (issue 29) rather than cold, so every test below runs on a claimed sandbox too.
   */
  claimed?: boolean;
}

/**
 * Environments that really run (issues 12 and 16), driver-agnostic: the same tests run
 * against the process sandbox (test/integration/environments-runtime.test.ts) and the QEMU
 * microVM (test/qemu/environments-runtime.test.ts, its own CI step). Each environment is a
 * real sandbox or VM; the gateway in front of it is the real proxy, its upstream a local
 * HTTPS server that stands in for api.example.com. Where the drivers differ by nature (a
 * VM has its own kernel threads, a NIC to the gateway's forwards, an encrypted disk the
 * host cannot read), the expectation says which and why.
 */
export function runtimeSuite(kind: RuntimeKind, opts: RuntimeSuiteOptions = { skip: skipWithoutRuntime }): void {
describe(`environments runtime (${kind === 'process' ? `process sandbox${opts.claimed ? ', started from a slot' : ''}` : 'QEMU microVM'})`, function () {
  this.timeout(kind === 'qemu' ? 240_000 : 60_000);
  const vm = kind === 'qemu';
  const waitState = (api: TestService['api'], id: string, want: string) => waitStateDefault(api, id, want, vm ? 180_000 : 15_000);
  let t: TestService;
  let up: FakeUpstream;
  let dir: string;
  let env: any;
  let slot: { name: string; uid: number } | null = null;

  before(async function () {
    opts.skip(this);
    up = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'gw-runtime-'));
    writeFileSync(join(dir, 'upstream-ca.pem'), up.ca.certPem);
    t = await startTestService({
      GATEWAY_RUNTIME: kind,
      ...opts.env,
      GATEWAY_UPSTREAM_OVERRIDES: ['api.example.com', 'oauth2.googleapis.com', 'gmail.googleapis.com'].map((h) => `${h}=127.0.0.1:${up.port}`).join(','),
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    });
    if (opts.claimed) {
      // A first start leaves a slot of its disk size ready; the environment under test takes it.
      const warm = await t.api.post('/v1/environments', { end_user_id: 'runtime-warm-up', resources: { cpus: 1, memory_mib: 512 } });
      await waitState(t.api, warm.body.id, 'running');
      const driver = t.svc.host!.driver as ProcessDriver;
      slot = (await pollUntil(() => driver.readySlots(), (s) => s.length > 0, 30_000))[0]!;
      expect((await t.api.delete(`/v1/environments/${warm.body.id}`)).status).to.be.oneOf([200, 202]);
    }
    const created = await t.api.post('/v1/environments', {
      end_user_id: 'runtime-user',
      resources: { cpus: 1, memory_mib: 512 },
      env: { GREETING: 'hello' },
      files: { 'settings.json': '{"a":1}' },
      egress_allow: ['api.example.com'],
      secrets: { API_KEY: { value: API_KEY_VALUE, allowed_hosts: ['api.example.com'] } },
    });
    expect(created.status).to.equal(201);
    env = await waitState(t.api, created.body.id, 'running');
  });
  after(async () => {
    await t?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs: placed on the local host, state running, with events placed and running', async () => {
    expect(env.host_id).to.match(/^host_/);
    const events = (await t.api.get(`/v1/environments/${env.id}/events`)).body.data.map((e: any) => `${e.kind}:${e.source}`);
    expect(events).to.include.members(['created:api', 'placed:host', 'running:host']);
    const hosts = await t.api.get('/v1/hosts');
    const host = hosts.body.data.find((h: any) => h.id === env.host_id);
    expect(host.status).to.equal('online');
    expect(host.capabilities).to.include({ network_sealed: true, namespaces: true });
  });

  if (opts.claimed) {
    it('was started from a slot: its processes run as the slot\'s uid, recorded as the environment\'s; in the environment\'s cgroups; its mounts at the environment\'s paths; the slot\'s directory gone', async () => {
      const driver = t.svc.host!.driver as ProcessDriver;
      const { name, uid } = slot!;
      expect(driver.uidOf(env.id)).to.equal(uid);
      const envDir = join(resolve(t.svc.dataDir), 'environments', env.id);
      expect(readFileSync(join(envDir, 'uid'), 'utf8').trim()).to.equal(String(uid));
      const procs = environmentProcesses(env.id);
      expect(procs.map((p) => p.comm)).to.include.members(['bwrap', 'socat']);
      for (const p of procs) expect(p.uids, p.comm).to.deep.equal([uid, uid, uid, uid]);
      const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]);
      expect(mounts).to.include.members(['disk', 'service', 'etc'].map((s) => join(envDir, s)));
      expect(mounts.filter((m) => m?.includes(`/${name}/`))).to.deep.equal([]);
      expect(existsSync(join(resolve(t.svc.dataDir), 'environments', name))).to.equal(false);
      // The next slot is another uid: a slot serves one environment, ever.
      const next = await pollUntil(() => driver.readySlots(), (s) => s.length > 0, 30_000);
      expect(next[0]!.uid).to.not.equal(uid);
      expect(next[0]!.name).to.not.equal(name);
    });
  }

  it('gives processes the placeholder, never the secret value, and the gateway proxy and CA variables', async () => {
    const r = await sh(t.api, env.id, 'printenv API_KEY; printenv GREETING; echo $HTTPS_PROXY; echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE $GIT_SSL_CAINFO; id -un; pwd');
    const [placeholder, greeting, proxy, cas, user, cwd] = r.stdout.trim().split('\n');
    expect(placeholder).to.match(/^svcph_[0-9a-f]+$/);
    expect(greeting).to.equal('hello');
    expect(proxy).to.match(new RegExp(`^http://${env.id}:[^@]+@127\\.0\\.0\\.1:3128$`));
    expect(cas!.split(' ')).to.deep.equal(Array(5).fill('/run/service/ca.pem'));
    expect(user).to.equal('agent');
    expect(cwd).to.equal('/home/agent');
    const all = await sh(t.api, env.id, 'printenv; cat /run/service/env; cat /proc/1/environ; grep -r . /run/service 2>/dev/null');
    expect(all.stdout).to.not.include(API_KEY_VALUE);
    expect(all.stdout).to.not.include('GATEWAY_');
    expect(all.stdout).to.not.include('DATABASE_URL');
  });

  it('has /run/service: env, read-only config files, the CA', async () => {
    const r = await sh(t.api, env.id, 'cat /run/service/files/settings.json; echo; . /run/service/env; echo $GREETING; head -1 /run/service/ca.pem; echo x > /run/service/files/settings.json 2>/dev/null && echo WRITABLE || echo readonly');
    expect(r.stdout.replace(/\r/g, '').split('\n')).to.deep.equal(['{"a":1}', 'hello', '-----BEGIN CERTIFICATE-----', 'readonly', '']);
  });

  it('curl inside reaches an allowed host through the gateway with the real secret swapped in, and it is audited', async () => {
    expect((await t.api.put(`/v1/environments/${env.id}/policy`, { rules: [{ connector: 'secret:API_KEY', category: 'read', effect: 'allow' }] })).status).to.equal(200);
    up.seen.length = 0;
    const r = await sh(t.api, env.id, 'curl -sS -H "Authorization: Bearer $API_KEY" https://api.example.com/v1/things');
    expect(r.exit_code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.include({ ok: true, url: '/v1/things' });
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${API_KEY_VALUE}`);
    const audit = await t.api.get(`/v1/audit-log?environment_id=${env.id}`);
    expect(audit.body.data.some((e: any) => e.host === 'api.example.com' && e.path === '/v1/things' && e.decision === 'allow')).to.equal(true);
  });

  it('python and node inside trust the gateway CA with no set-up', async () => {
    const py = await sh(t.api, env.id, `python3 -c "import urllib.request,os; print(urllib.request.urlopen(urllib.request.Request('https://api.example.com/py', headers={'Authorization': 'Bearer '+os.environ['API_KEY']})).status)"`);
    expect(py.stdout.trim(), py.stderr).to.equal('200');
  });

  it('a connection\'s stand-in reaches /run/service/connections and the control socket; the gateway swaps it for the real token', async () => {
    const GOOGLE_TOKEN = 'ya29.real-google-access-token-never-inside';
    const respond = up.respond;
    let scope = '';
    up.respond = (req, res) => {
      if (req.url === '/token') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ access_token: GOOGLE_TOKEN, refresh_token: '1//r', expires_in: 3599, scope, token_type: 'Bearer' }));
      }
      respond(req, res);
    };
    await t.api.put('/v1/oauth-clients/google', { client_id: 'g', client_secret: 'gs' });
    const link = await t.api.post('/v1/connections/authorize', { end_user_id: 'runtime-user', connectors: ['gmail'], return_url: 'https://app.example.com/done' });
    expect(link.status, link.text).to.equal(201);
    const state = new URL(link.body.url).searchParams.get('state')!;
    scope = new URL(link.body.url).searchParams.get('scope')!;
    const cb = await fetch(`${t.url}/v1/oauth/google/callback?${new URLSearchParams({ state, code: 'c1' })}`, { redirect: 'manual' });
    expect(new URL(cb.headers.get('location')!).searchParams.get('status'), cb.headers.get('location')!).to.equal('ok');
    const standIn = (await t.api.get(`/v1/environments/${env.id}/stand-in-tokens`)).body.data[0].token as string;
    const file = await pollUntil(async () => (await sh(t.api, env.id, 'cat /run/service/connections/gmail 2>/dev/null || true')).stdout, (f) => f !== '', 10_000, 200);
    expect(file).to.equal(standIn);
    const ctl = await sh(t.api, env.id, 'curl -sS --unix-socket /run/service/control.sock http://control/connections; echo; curl -s -o /dev/null -w "%{http_code}" --unix-socket /run/service/control.sock http://control/nope');
    const [listed, notFound] = ctl.stdout.split('\n');
    expect(JSON.parse(listed!).data).to.deep.equal([{ connector: 'gmail', connection_id: JSON.parse(listed!).data[0].connection_id, token: standIn }]);
    expect(notFound).to.equal('404');
    await t.api.put(`/v1/environments/${env.id}/policy`, { rules: [{ connector: 'secret:API_KEY', category: 'read', effect: 'allow' }, { connector: 'gmail', category: 'read', effect: 'allow' }] });
    up.seen.length = 0;
    const r = await sh(t.api, env.id, 'curl -sS -H "Authorization: Bearer $(cat /run/service/connections/gmail)" https://gmail.googleapis.com/gmail/v1/users/me/messages');
    expect(r.exit_code, r.stderr).to.equal(0);
    expect(up.seen.at(-1)!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
    const inside = await sh(t.api, env.id, 'grep -r . /run/service /home/agent 2>/dev/null; printenv');
    expect(inside.stdout).to.not.include(GOOGLE_TOKEN);
    up.respond = respond;
  });

  it('memory_mib is a ceiling: a process that allocates past it is killed, the environment lives on', async () => {
    const r = await exec(t.api, env.id, ['python3', '-c', 'b = bytearray(700 * 1024 * 1024); print("allocated")']);
    expect(r.status).to.equal(200);
    expect(r.body.stdout).to.not.include('allocated');
    // The process sandbox's cgroup kills it (SIGKILL, 137); a VM's kernel has no more memory
    // to give and refuses the allocation (MemoryError, 1) or its OOM killer ends it (137).
    if (vm) expect([1, 137]).to.include(r.body.exit_code);
    else expect(r.body.exit_code).to.equal(137);
    expect((await sh(t.api, env.id, 'echo alive')).stdout).to.equal('alive\n');
  });

  describe('escape attempts from inside', () => {
    it('cannot go around the proxy: curl --noproxy, raw TCP to the world, UDP', async () => {
      const noproxy = await sh(t.api, env.id, "curl -sS --noproxy '*' --max-time 5 https://example.com; echo rc=$?");
      expect(noproxy.stdout).to.match(/rc=[1-9]/);
      const py = await sh(t.api, env.id, `python3 - <<'EOF'
import socket
for host, port in [('1.1.1.1', 443), ('8.8.8.8', 53), ('169.254.169.254', 80)]:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); print('CONNECTED', host, port)
    except Exception as e:
        print('refused', host, port, type(e).__name__)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b'x', ('1.1.1.1', 53)); print('UDP SENT')
except Exception as e:
    print('udp refused', type(e).__name__)
EOF`);
      expect(py.stdout).to.include('refused 1.1.1.1 443');
      expect(py.stdout).to.not.include('CONNECTED');
      // No route to 1.1.1.1 in either (a VM's one IPv4 route is slirp's subnet).
      expect(py.stdout).to.include('udp refused');
    });

    it('reaches no port of the host: the API, the proxy, the upstream, MySQL on every host address, 10.0.2.2 and slirp\'s others; the same probe reaches the relay inside, and the host reaches those ports', async () => {
      // Issue 24, item 6: a VM with both sealing layers removed reached the host's API at
      // 10.0.2.2 (slirp's alias of the host's loopback) while this suite stayed green.
      const ports = [Number(new URL(t.url).port), Number(new URL(t.svc.proxyUrl!).port), up.port, 3306];
      const hosts = [...new Set([...hostAddresses(), '127.0.0.1', '10.0.2.2', '10.0.2.3', '10.0.2.100', 'fec0::2', '169.254.169.254'])];
      // The controls: from the host, the service's ports answer (they are there to be reached)...
      const fromHost = tcpProbeFromHost(ports.slice(0, 3).map((p) => ['127.0.0.1', p]));
      expect(Object.values(fromHost), JSON.stringify(fromHost)).to.deep.equal(['connected', 'connected', 'connected']);
      // ...and inside, the same program reaches the relay to the gateway (and, in a VM, slirp's forward behind it).
      const controls: Array<[string, number]> = vm ? [['127.0.0.1', 3128], ['10.0.2.100', 3128]] : [['127.0.0.1', 3128]];
      const r = await exec(t.api, env.id, ['python3', '-'], { stdin: tcpProbe([...controls, ...hosts.flatMap((h) => ports.map((p): [string, number] => [h, p]))], vm ? 10 : 5), timeout_secs: 120 });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.exit_code, r.body.stderr).to.equal(0);
      const seen = JSON.parse(r.body.stdout) as Record<string, string>;
      const why = JSON.stringify(seen, null, 1);
      for (const [h, p] of controls) expect(seen[`${h} ${p}`], why).to.equal('connected');
      const probed = Object.entries(seen).filter(([k]) => !controls.some(([h, p]) => k === `${h} ${p}`));
      expect(probed).to.have.length(hosts.length * ports.length);
      expect(probed.filter(([, v]) => v === 'connected'), why).to.deep.equal([]);
      for (const [k, v] of probed) {
        const host = k.split(' ')[0]!;
        if (host.includes(':') && v === 'EAFNOSUPPORT') continue; // a kernel without IPv6: nothing to reach it with
        if (!vm) {
          // Its own loopback has nothing on those ports; no other address has a route.
          expect(v, k).to.equal(host === '127.0.0.1' || host === '::1' ? 'ECONNREFUSED' : 'ENETUNREACH');
        } else {
          // slirp answers for 10.0.2.0/24 (and, by its router advertisement, IPv6) with a
          // reset; no other IPv4 address has a route. Nothing is silently dropped.
          expect(v, k).to.be.oneOf(['ECONNREFUSED', 'ENETUNREACH']);
        }
      }
    });

    it(vm
      ? 'has exactly slirp\'s network: lo and eth0, one IPv4 route (10.0.2.0/24, no gateway), no IPv6 route but eth0\'s link-local ones'
      : 'has exactly a loopback: no other interface, no IPv4 route, no IPv6 route off lo', async () => {
      const r = await sh(t.api, env.id, 'cat /proc/net/dev; echo @@; cat /proc/net/route; echo @@; cat /proc/net/ipv6_route 2>/dev/null; echo @@; cat /proc/net/if_inet6 2>/dev/null');
      const [dev, v4, v6, addrs] = r.stdout.split('@@\n');
      const routes6 = ipv6Routes(v6!).filter((x) => x.iface !== 'lo');
      if (!vm) {
        expect(interfaces(dev!)).to.deep.equal(['lo']);
        expect(ipv4Routes(v4!)).to.deep.equal([]);
        expect(routes6).to.deep.equal([]);
        return;
      }
      expect(interfaces(dev!)).to.deep.equal(['lo', 'eth0']);
      // The one route the kernel makes for eth0's address (10.0.2.15/24): no default route.
      expect(ipv4Routes(v4!)).to.deep.equal([{ iface: 'eth0', dest: '0002000A', gateway: '00000000', mask: '00FFFFFF' }]);
      // IPv6: slirp runs with ipv6=off (it would advertise fec0::/64 and a default route via
      // fe80::2 some seconds after boot): the kernel's own link-local routes for eth0 only, no
      // fec0::/64, no default route, whenever this runs.
      const own = new Set(addrs!.split('\n').filter((l) => l.trim()).map((l) => l.trim().split(/\s+/)[0]!));
      const FE80 = 'fe800000000000000000000000000000';
      const ZERO = '00000000000000000000000000000000';
      for (const x of routes6) {
        const known = x.iface === 'eth0' && (
          (x.mask === '80' && own.has(x.dest) && x.dest.startsWith('fe80') && x.gateway === ZERO) // its own link-local address
          || (x.dest === FE80 && x.mask === '40' && x.gateway === ZERO)
          || (x.dest === 'ff000000000000000000000000000000' && x.mask === '08'));
        expect(known, `an IPv6 route beyond eth0's link-local ones: ${JSON.stringify(x)}`).to.equal(true);
      }
      expect([...own].filter((a) => !a.startsWith('fe80') && a !== '00000000000000000000000000000001'), 'IPv6 addresses beyond link-local').to.deep.equal([]);
    });

    it('runs as a host uid of its own: two environments\' processes, seen from the host, run as two uids, neither root nor the service\'s', async () => {
      const other = await t.api.post('/v1/environments', { end_user_id: 'runtime-uid', resources: { cpus: 1, memory_mib: 512 } });
      expect(other.status).to.equal(201);
      await waitState(t.api, other.body.id, 'running');
      try {
        for (const id of [env.id, other.body.id]) expect((await sh(t.api, id, 'echo up')).stdout).to.equal('up\n');
        const seen = [env.id, other.body.id].map((id) => environmentProcesses(id));
        const why = JSON.stringify(seen);
        const uidOf = seen.map((procs) => {
          expect(procs.length, `no process found in the environment's cgroups: ${why}`).to.be.greaterThan(0);
          // What runs it, from outside: the sandbox's tree, or the VM's QEMU.
          expect(procs.map((p) => p.comm), why).to.include(vm ? 'qemu-system-x86' : 'bwrap');
          // Every process of it, real, effective, saved and filesystem ids alike.
          const uids = new Set(procs.flatMap((p) => [...p.uids, ...p.gids]));
          expect([...uids], why).to.have.length(1);
          return [...uids][0]!;
        });
        expect(uidOf[0], why).to.not.equal(uidOf[1]);
        for (const u of uidOf) expect(u, why).to.not.be.oneOf([0, process.getuid!()]);
      } finally {
        await t.api.delete(`/v1/environments/${other.body.id}`);
      }
    });

    it('cannot read the host\'s files: the master key, the store, DATA_DIR, another environment\'s disk', async () => {
      const dataDir = resolve(t.svc.dataDir);
      const other = await t.api.post('/v1/environments', { end_user_id: 'runtime-other', resources: { cpus: 1, memory_mib: 512 } });
      await waitState(t.api, other.body.id, 'running');
      await sh(t.api, other.body.id, 'echo other-secret > mine.txt');
      // The process runtime's disk is a directory; a VM's an encrypted qcow2 the host cannot read.
      const otherDisk = vm ? join(dataDir, 'environments', other.body.id, 'disk.qcow2') : join(dataDir, 'environments', other.body.id, 'disk', 'mine.txt');
      expect(existsSync(otherDisk)).to.equal(true);
      const r = await sh(t.api, env.id, `for p in ${dataDir}/master.key ${dataDir} ${otherDisk} /work /root /proc/1/root${dataDir} /etc/shadow /etc/mysql; do cat "$p" 2>/dev/null && echo "READ $p"; ls "$p" >/dev/null 2>&1 && echo "LISTED $p"; done; ls /; find / -name 'master.key' -o -name '*.sqlite' 2>/dev/null | head`);
      expect(r.stdout).to.not.match(/READ|LISTED/);
      expect(r.stdout).to.not.include('other-secret');
      expect(r.stdout).to.not.include('master.key');
      expect(r.stdout.split('\n').slice(0, 12).join(' ')).to.not.include('work');
      await t.api.delete(`/v1/environments/${other.body.id}`);
    });

    it('sees only its own processes and holds no capability', async () => {
      // A VM's own kernel threads (children of its kthreadd, pid 2) are not processes of anyone's.
      const count = vm ? "ps -eo pid,ppid --no-headers | awk '$1!=2 && $2!=2' | wc -l" : 'ps -eo pid,user,comm --no-headers | wc -l';
      const r = await sh(t.api, env.id, `${count}; grep -E '^(Cap[A-Za-z]+|NoNewPrivs):' /proc/self/status; cat /proc/self/uid_map`);
      const lines = r.stdout.trim().split('\n');
      expect(Number(lines[0])).to.be.lessThan(12);
      expect(lines).to.include.members(['CapPrm:\t0000000000000000', 'CapEff:\t0000000000000000', 'NoNewPrivs:\t1']);
      // The process sandbox's exec also drops the bounding set (nothing an exec'd file could
      // regain, whatever its file capabilities) and holds no inheritable or ambient one.
      if (!vm) expect(lines).to.include.members(['CapInh:\t0000000000000000', 'CapBnd:\t0000000000000000', 'CapAmb:\t0000000000000000']);
    });
  });

  describe('exec', () => {
    it('takes argv, cwd, env and stdin, and reports exit code and duration', async () => {
      const r = await exec(t.api, env.id, ['/bin/sh', '-c', 'pwd; echo "$FOO"; cat; exit 3'], { cwd: '/tmp', env: { FOO: 'bar' }, stdin: 'from-stdin' });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({ exit_code: 3, stdout: '/tmp\nbar\nfrom-stdin', stderr: '' });
      expect(r.body.duration_ms).to.be.a('number');
    });

    it('a command that is not there is 503 exec_failed', async () => {
      const r = await exec(t.api, env.id, ['no-such-command-here']);
      expect(r.status).to.equal(503);
      expect(r.body.error).to.equal('exec_failed');
    });

    it('past timeout_secs: 503 exec_timeout, and the whole process tree is killed', async () => {
      const r = await exec(t.api, env.id, ['/bin/sh', '-c', 'sleep 300 & sleep 301'], { timeout_secs: 1 });
      expect(r.status).to.equal(503);
      expect(r.body.error).to.equal('exec_timeout');
      const ps = await sh(t.api, env.id, 'ps -eo args --no-headers | grep -c "^sleep 30[01]" || true');
      expect(ps.stdout.trim()).to.equal('0');
    });

    it('caps stdout at 1 MiB and says it truncated', async () => {
      const r = await sh(t.api, env.id, 'head -c 1500000 /dev/zero | tr "\\0" a');
      expect(r.stdout.length).to.equal(1024 * 1024);
      expect((r as any).stdout_truncated).to.equal(true);
      expect((r as any).stderr_truncated).to.equal(false);
    });

    it('streams output as server-sent events with Accept: text/event-stream', async () => {
      const res = await fetch(`${t.url}/v1/environments/${env.id}/exec`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.api.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ command: ['/bin/sh', '-c', 'echo one; sleep 0.3; echo two >&2; exit 4'] }),
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
      const text = await res.text();
      expect(text).to.include('event: stdout\ndata: {"data":"one\\n"}');
      expect(text).to.include('event: stderr\ndata: {"data":"two\\n"}');
      expect(text).to.match(/event: exit\ndata: \{"exit_code":4,/);
    });

    it('validates its body: 422 for a wrong shape, 400 for out-of-range timeout', async () => {
      expect((await t.api.post(`/v1/environments/${env.id}/exec`, { command: 'ls' })).status).to.equal(422);
      expect((await t.api.post(`/v1/environments/${env.id}/exec`, { command: [] })).status).to.equal(400);
      expect((await t.api.post(`/v1/environments/${env.id}/exec`, { command: ['ls'], timeout_secs: 601 })).status).to.equal(400);
      expect((await t.api.post(`/v1/environments/env_000000000000000000000000/exec`, { command: ['ls'] })).status).to.equal(404);
    });
  });

  describe('files', () => {
    it('writes and reads utf8 and base64 on the data disk; relative paths are relative to it', async () => {
      const w = await t.api.put(`/v1/environments/${env.id}/files`, { path: 'notes/today.txt', content: 'héllo' });
      expect(w.status).to.equal(200);
      expect(w.body).to.deep.equal({ path: '/home/agent/notes/today.txt', size: 6 });
      const r = await t.api.get(`/v1/environments/${env.id}/files?path=/home/agent/notes/today.txt`);
      expect(r.body).to.deep.equal({ path: '/home/agent/notes/today.txt', content: Buffer.from('héllo').toString('base64'), encoding: 'base64', size: 6 });
      const bin = Buffer.from([0, 1, 2, 255]);
      expect((await t.api.put(`/v1/environments/${env.id}/files`, { path: 'b.bin', content: bin.toString('base64'), encoding: 'base64' })).body.size).to.equal(4);
      const seen = await sh(t.api, env.id, 'od -An -tx1 b.bin; stat -c %U notes/today.txt');
      expect(seen.stdout.replace(/\s+/g, ' ').trim()).to.equal('00 01 02 ff agent');
    });

    it('refuses .., paths off the disk and symlinks out of it with 400; a missing file is 404', async () => {
      await sh(t.api, env.id, 'ln -sf /etc/passwd link-out; ln -sfn /etc dir-out');
      for (const path of ['../etc/passwd', '/home/agent/../agent/x', '/etc/passwd', '/tmp/x', 'link-out', 'dir-out/passwd']) {
        const r = await t.api.get(`/v1/environments/${env.id}/files?path=${encodeURIComponent(path)}`);
        expect(r.status, path).to.equal(400);
        const w = await t.api.put(`/v1/environments/${env.id}/files`, { path, content: 'x' });
        expect(w.status, path).to.equal(400);
      }
      expect((await t.api.get(`/v1/environments/${env.id}/files?path=nope.txt`)).status).to.equal(404);
      expect((await t.api.get(`/v1/environments/${env.id}/files`)).status).to.equal(400);
    });
  });

  describe('state moves for real', () => {
    it('suspend freezes the tree with memory kept; resume continues from the same value', async () => {
      // The count lives in the shell's memory; the file on the data disk shows it to the host.
      await sh(t.api, env.id, 'nohup sh -c \'i=0; while :; do i=$((i+1)); echo $i > c.new; mv c.new counter; sleep 0.05; done\' >/dev/null 2>&1 &');
      const counter = join(t.svc.dataDir, 'environments', env.id, 'disk', 'counter');
      // A VM's disk is encrypted on the host: read inside (and not while it sleeps, which would wake it).
      const read = async (): Promise<number> => Number(vm ? (await sh(t.api, env.id, 'cat counter 2>/dev/null || echo 0')).stdout : existsSync(counter) ? readFileSync(counter, 'utf8') : 0);
      const poll = (done: (n: number) => boolean) => pollUntil(read, done, vm ? 60_000 : 15_000, vm ? 100 : 10);
      // Counting, and past 10: a count restarted from 1 would show below it.
      const before = await poll((n) => n >= 10);
      expect(before).to.be.at.least(10);
      expect((await t.api.post(`/v1/environments/${env.id}/suspend`)).status).to.equal(200);
      await waitState(t.api, env.id, 'suspended');
      expect(t.svc.host!.driver.status(env.id)).to.equal('suspended');
      const frozen = vm ? before : await read();
      if (!vm) {
        // Not a moment's luck: the counter stays while the very same loop, run on the host,
        // counts 10 (a loaded machine slows both alike).
        await sameLoopOnHost(10);
        expect(await read(), 'the counter moved while suspended').to.equal(frozen);
      } else {
        // Nothing of it runs: QEMU has exited, its memory is in the snapshot.
        expect(existsSync(join(t.svc.dataDir, 'environments', env.id, 'snapshot.zst'))).to.equal(true);
      }
      expect((await t.api.post(`/v1/environments/${env.id}/resume`)).status).to.equal(200);
      await waitState(t.api, env.id, 'running');
      const after = await poll((n) => n !== frozen);
      // Continued from where it was (a restarted process would count from 1 again).
      expect(after).to.be.greaterThan(frozen);
      expect(after).to.be.lessThan(frozen + (vm ? 200 : 20));
    });

    it('exec on a suspended environment wakes it (an event, activity) and runs', async () => {
      await t.api.post(`/v1/environments/${env.id}/suspend`);
      await waitState(t.api, env.id, 'suspended');
      const before = (await t.api.get(`/v1/environments/${env.id}`)).body.last_active_at;
      // Service time moves on a second: the exec's activity is stamped after it, whatever the wall clock does.
      await t.advance(1);
      const r = await sh(t.api, env.id, 'echo awake');
      expect(r.stdout).to.equal('awake\n');
      const after = (await t.api.get(`/v1/environments/${env.id}`)).body;
      expect(after.desired_state).to.equal('running');
      expect(after.state).to.equal('running');
      expect(Date.parse(after.last_active_at)).to.be.at.least(Date.parse(before) + 1000);
      const kinds = (await t.api.get(`/v1/environments/${env.id}/events?kind=wake`)).body.data;
      expect(kinds.at(-1).data).to.include({ reason: 'exec', from: 'suspended' });
    });

    it('a config update reaches /run/service of a running environment within 10 s, without a restart', async () => {
      const pid1 = (await sh(t.api, env.id, 'cat /proc/1/stat | cut -d" " -f22')).stdout;
      expect((await t.api.put(`/v1/environments/${env.id}/config`, { env: { GREETING: 'bonjour', NEW_VAR: '1' }, files: { 'b.txt': 'B' } })).status).to.equal(200);
      const seen = await pollUntil(async () => (await sh(t.api, env.id, 'cat /run/service/files/b.txt 2>/dev/null; ls /run/service/files; . /run/service/env; echo $GREETING')).stdout, (o) => o.startsWith('B'), 10_000, 200);
      expect(seen).to.equal('Bb.txt\nbonjour\n');
      expect((await sh(t.api, env.id, 'echo $NEW_VAR $GREETING')).stdout).to.equal('1 bonjour\n');
      expect((await sh(t.api, env.id, 'cat /proc/1/stat | cut -d" " -f22')).stdout).to.equal(pid1);
    });

    it('a config update does not wake a suspended environment, yet its files change', async () => {
      await t.api.post(`/v1/environments/${env.id}/suspend`);
      await waitState(t.api, env.id, 'suspended');
      // The event waited on: the host hands the new surface to the driver (the process
      // sandbox writes it at once; a VM's driver keeps it for the resume). Whatever the host
      // does with a suspended environment it does in that pass; after it, it is still asleep.
      const driver = t.svc.host!.driver;
      let handed!: () => void;
      const applied = new Promise<void>((r) => (handed = r));
      driver.applySurface = async (id, s) => {
        await Object.getPrototypeOf(driver).applySurface.call(driver, id, s);
        if (id === env.id && s.files['c.txt']) handed();
      };
      try {
        await t.api.put(`/v1/environments/${env.id}/config`, { env: {}, files: { 'c.txt': 'C' } });
        await withDeadline(applied, vm ? 60_000 : 15_000, 'the host to hand the update to the driver');
      } finally {
        delete (driver as { applySurface?: unknown }).applySurface;
      }
      if (!vm) expect(existsSync(join(t.svc.dataDir, 'environments', env.id, 'service', 'files', 'c.txt'))).to.equal(true);
      const e = (await t.api.get(`/v1/environments/${env.id}`)).body;
      expect(e.state).to.equal('suspended');
      expect(e.desired_state).to.equal('suspended');
      await t.api.post(`/v1/environments/${env.id}/resume`);
      await waitState(t.api, env.id, 'running');
      // A VM gets the files kept for it as it resumes.
      if (vm) expect((await sh(t.api, env.id, 'cat /run/service/files/c.txt')).stdout).to.equal('C');
    });

    it('stop kills the tree and keeps the data disk; the next start boots fresh with the data kept', async () => {
      await sh(t.api, env.id, 'echo kept > kept.txt; echo gone > /tmp/gone.txt; nohup sleep 1000 >/dev/null 2>&1 &');
      const env2 = await t.api.post(`/v1/environments/${env.id}/suspend`);
      expect(env2.status).to.equal(200);
      await waitState(t.api, env.id, 'suspended');
      // Stop is the idle ladder's move; through the service (the API has no stop call).
      await t.svc.db('environments').where({ id: env.id }).update({ desired_state: 'stopped' });
      t.svc.host!.notify();
      await waitState(t.api, env.id, 'stopped');
      expect(t.svc.host!.driver.status(env.id)).to.equal('absent');
      const r = await sh(t.api, env.id, 'cat kept.txt; ls /tmp; pgrep -c sleep || true');
      expect(r.stdout).to.equal('kept\n0\n');
    });

    it('destroy deletes the data disk and the sandbox; the end user may create a new environment', async () => {
      const other = await t.api.post('/v1/environments', { end_user_id: 'runtime-destroy', resources: { cpus: 1, memory_mib: 512 } });
      await waitState(t.api, other.body.id, 'running');
      await sh(t.api, other.body.id, 'echo x > x.txt');
      const dirOf = join(t.svc.dataDir, 'environments', other.body.id);
      expect(existsSync(dirOf)).to.equal(true);
      expect((await t.api.delete(`/v1/environments/${other.body.id}`)).status).to.equal(200);
      await waitState(t.api, other.body.id, 'destroyed');
      expect(existsSync(dirOf)).to.equal(false);
      const r = await exec(t.api, other.body.id, ['true']);
      expect(r.status).to.equal(409);
      expect(r.body.error).to.equal('environment_destroyed');
      const again = await t.api.post('/v1/environments', { end_user_id: 'runtime-destroy', resources: { cpus: 1, memory_mib: 512 } });
      expect(again.status).to.equal(201);
      await waitState(t.api, again.body.id, 'running');
      expect((await sh(t.api, again.body.id, 'ls')).stdout).to.equal('');
      await t.api.delete(`/v1/environments/${again.body.id}`);
    });
  });
});
}
