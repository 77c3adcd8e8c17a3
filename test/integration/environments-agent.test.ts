import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';

/**
 * The agent's control socket (issue 13, items 3 and 4), driven from inside real sandboxes
 * with curl and python over /run/service/control.sock, on the test clock: schedules with
 * the agent-settings caps, refusals as events and webhooks, one environment never reaching
 * another's schedules, a schedule that wakes an environment the idle ladder suspended and
 * runs its handler, daylight saving in Europe/Berlin, and keep-awakes held by a process.
 */
describe('agent control socket: schedules and keep-awake (process sandbox, test clock)', function () {
  this.timeout(90_000);
  let t: TestService;
  let n = 0;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    expect((await t.api.put('/v1/webhook-endpoint', { url: 'https://hooks.example.com/agent' })).status).to.equal(200);
  });
  after(async () => {
    await t?.close();
  });

  async function create(extra: Record<string, unknown> = {}): Promise<any> {
    const r = await t.api.post('/v1/environments', { end_user_id: `agent-${++n}`, resources: { cpus: 1, memory_mib: 512 }, ...extra });
    expect(r.status).to.equal(201);
    return waitState(t.api, r.body.id, 'running');
  }
  /** One control-socket call from inside: [status, body]. */
  async function ctl(id: string, method: string, path: string, body?: unknown): Promise<[number, any]> {
    const data = body === undefined ? '' : `-H 'content-type: application/json' --data-binary @- `;
    const r = await sh(t.api, id, `curl -sS -o /tmp/out -w '%{http_code}' -X ${method} ${data}--unix-socket /run/service/control.sock 'http://control${path}'; echo; cat /tmp/out`, body === undefined ? {} : { stdin: JSON.stringify(body) });
    const [code, ...rest] = r.stdout.split('\n');
    const text = rest.join('\n');
    return [Number(code), text ? JSON.parse(text) : null];
  }
  /** A process in the VM that asks for a keep-awake of `seconds` and lives on (python3 holder.py). */
  async function holdFromProcess(id: string, seconds: number): Promise<string> {
    const holder = [
      'import socket, sys, time',
      "s = socket.socket(socket.AF_UNIX); s.connect('/run/service/control.sock')",
      `body = b'{"seconds": ${seconds}}'`,
      "s.sendall(b'POST /keep-awake HTTP/1.1\\r\\nHost: c\\r\\nContent-Type: application/json\\r\\nContent-Length: ' + str(len(body)).encode() + b'\\r\\nConnection: close\\r\\n\\r\\n' + body)",
      "open('/tmp/ka.txt', 'wb').write(s.recv(4096)); s.close()",
      'time.sleep(100000)',
    ].join('\n');
    await t.api.put(`/v1/environments/${id}/files`, { path: 'holder.py', content: holder });
    return (await sh(t.api, id, 'rm -f /tmp/ka.txt; nohup python3 holder.py >/dev/null 2>&1 & for i in $(seq 50); do [ -s /tmp/ka.txt ] && break; sleep 0.1; done; head -1 /tmp/ka.txt')).stdout;
  }
  const events = async (id: string, kind: string) => (await t.api.get(`/v1/environments/${id}/events?kind=${kind}`)).body.data;
  const webhooks = async (id: string, type: string) => t.svc.db('webhook_events').where({ environment_id: id, type });

  it('registers, lists, replaces and deletes its schedules; each action is an agent event and webhook; the developer sees them', async () => {
    const e = await create();
    const [s1, b1] = await ctl(e.id, 'PUT', '/schedules/nightly', { cron: '0 3 * * *', tz: 'Europe/Berlin', command: ['sh', '-c', 'echo ran'] });
    expect(s1).to.equal(201);
    expect(b1).to.include({ key: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin', source: 'agent' });
    expect(b1.command).to.deep.equal(['sh', '-c', 'echo ran']);
    expect(Date.parse(b1.next_run_at)).to.be.greaterThan(t.svc.clock.nowMs());
    const [s2] = await ctl(e.id, 'PUT', '/schedules/nightly', { cron: '0 4 * * *', tz: 'UTC' });
    expect(s2).to.equal(200);
    const [s3, list] = await ctl(e.id, 'GET', '/schedules');
    expect(s3).to.equal(200);
    expect(list.data.map((x: any) => [x.key, x.cron, x.tz])).to.deep.equal([['nightly', '0 4 * * *', 'UTC']]);
    const dev = await t.api.get(`/v1/environments/${e.id}/schedules`);
    expect(dev.body.data.map((x: any) => [x.key, x.source])).to.deep.equal([['nightly', 'agent']]);
    expect((await events(e.id, 'schedule_set')).map((x: any) => x.source)).to.deep.equal(['agent', 'agent']);
    const hooks = await webhooks(e.id, 'environment.agent_schedule_set');
    expect(hooks).to.have.length(2);
    // Two rows of one millisecond come back in any order on MySQL: compare as a set.
    expect(hooks.map((h: any) => JSON.parse(h.body).data)).to.deep.include.members([
      { environment_id: e.id, key: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin' },
      { environment_id: e.id, key: 'nightly', cron: '0 4 * * *', tz: 'UTC' },
    ]);
    const [s4] = await ctl(e.id, 'DELETE', '/schedules/nightly');
    expect(s4).to.equal(204);
    expect((await ctl(e.id, 'DELETE', '/schedules/nightly'))[0]).to.equal(404);
    expect(await events(e.id, 'schedule_deleted')).to.have.length(1);
    expect(await webhooks(e.id, 'environment.agent_schedule_deleted')).to.have.length(1);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('the caps of the agent settings: min_interval_secs between fire times, max_schedules, scheduling off; refusals are events and webhooks', async () => {
    const e = await create();
    const [s1, b1] = await ctl(e.id, 'PUT', '/schedules/often', { cron: '*/5 * * * *', tz: 'UTC' });
    expect(s1).to.equal(400);
    expect(b1.error).to.equal('interval_too_short');
    expect((await ctl(e.id, 'PUT', '/schedules/q', { cron: '*/15 * * * *', tz: 'UTC' }))[0]).to.equal(201);
    expect((await ctl(e.id, 'PUT', '/schedules/bad', { cron: '0 3 * * * *', tz: 'UTC' }))[1].error).to.equal('invalid_request');
    expect((await ctl(e.id, 'PUT', '/schedules/tz', { cron: '0 3 * * *', tz: 'Mars/Olympus' }))[1].message).to.match(/IANA/);
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { max_schedules: 1 });
    const [s2, b2] = await ctl(e.id, 'PUT', '/schedules/second', { at: new Date(t.svc.clock.nowMs() + 3_600_000).toISOString() });
    expect(s2).to.equal(409);
    expect(b2.error).to.equal('schedule_limit_reached');
    // Replacing an existing key is not a new schedule.
    expect((await ctl(e.id, 'PUT', '/schedules/q', { cron: '0 * * * *', tz: 'UTC' }))[0]).to.equal(200);
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { scheduling: false });
    const [s3, b3] = await ctl(e.id, 'PUT', '/schedules/q', { cron: '0 * * * *', tz: 'UTC' });
    expect(s3).to.equal(403);
    expect(b3.error).to.equal('scheduling_disabled');
    const rejected = await events(e.id, 'agent_request_rejected');
    expect(rejected.map((x: any) => [x.source, x.data.reason])).to.deep.include.members([
      ['agent', 'interval_too_short'], ['agent', 'schedule_limit_reached'], ['agent', 'scheduling_disabled'],
    ]);
    const hooks = await webhooks(e.id, 'environment.agent_request_rejected');
    expect(hooks.map((h: any) => JSON.parse(h.body).data.reason)).to.include.members(['interval_too_short', 'schedule_limit_reached', 'scheduling_disabled']);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('one environment can never read or change another\'s schedules: the socket is the identity', async () => {
    const a = await create();
    const b = await create();
    expect((await ctl(a.id, 'PUT', '/schedules/mine', { cron: '0 3 * * *', tz: 'UTC' }))[0]).to.equal(201);
    expect((await ctl(b.id, 'GET', '/schedules'))[1].data).to.deep.equal([]);
    expect((await ctl(b.id, 'DELETE', '/schedules/mine'))[0]).to.equal(404);
    // Naming the other environment anywhere changes nothing.
    expect((await ctl(b.id, 'GET', `/schedules?environment_id=${a.id}`))[1].data).to.deep.equal([]);
    expect((await ctl(a.id, 'GET', '/schedules'))[1].data.map((x: any) => x.key)).to.deep.equal(['mine']);
    await t.api.delete(`/v1/environments/${a.id}`);
    await t.api.delete(`/v1/environments/${b.id}`);
  });

  it('a schedule wakes the environment the idle ladder suspended, and its handler runs (schedule_fired, handler exit code)', async () => {
    const e = await create({ idle: { suspend_after_secs: 600 } });
    const at = new Date(t.svc.clock.nowMs() + 3_600_000).toISOString();
    expect((await ctl(e.id, 'PUT', '/schedules/wake-me', { at, command: ['/bin/sh', '-c', 'echo "handler ran as $(id -un)" > handler.txt'] }))[0]).to.equal(201);
    await t.advance(601);
    expect((await t.api.get(`/v1/environments/${e.id}`)).body.state).to.equal('suspended');
    await t.advance(3000);
    const woke = (await t.api.get(`/v1/environments/${e.id}`)).body;
    expect(woke).to.include({ desired_state: 'running', state: 'running' });
    const fired = await events(e.id, 'schedule_fired');
    expect(fired).to.have.length(1);
    expect(fired[0]).to.include({ source: 'system' });
    expect(fired[0].data).to.include({ key: 'wake-me', from: 'suspended', scheduled_for: at });
    const t0 = Date.now();
    while ((await events(e.id, 'schedule_handler_exited')).length === 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
    expect((await events(e.id, 'schedule_handler_exited'))[0].data).to.include({ key: 'wake-me', exit_code: 0 });
    expect((await sh(t.api, e.id, 'cat handler.txt')).stdout).to.equal('handler ran as agent\n');
    // A one-off schedule is gone once fired.
    expect((await ctl(e.id, 'GET', '/schedules'))[1].data).to.deep.equal([]);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('a daily 09:00 Europe/Berlin schedule follows the zone across the change to summer time', async () => {
    const e = await create({ idle: { suspend_after_secs: 0, stop_after_secs: 0 } });
    expect((await ctl(e.id, 'PUT', '/schedules/morning', { cron: '0 9 * * *', tz: 'Europe/Berlin' }))[0]).to.equal(201);
    // To 2027-03-26 12:00Z (the clock only moves forward; the change is on 2027-03-28).
    const target = Date.parse('2027-03-26T12:00:00Z');
    expect(t.svc.clock.nowMs()).to.be.lessThan(target);
    await t.advance((target - t.svc.clock.nowMs()) / 1000);
    const before = (await events(e.id, 'schedule_fired')).length;
    for (let day = 0; day < 3; day++) await t.advance(86_400);
    const fired = (await events(e.id, 'schedule_fired')).slice(before).map((x: any) => x.data.scheduled_for);
    expect(fired).to.deep.equal(['2027-03-27T08:00:00.000Z', '2027-03-28T07:00:00.000Z', '2027-03-29T07:00:00.000Z']);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('keep-awake holds the ladder while the requesting process lives, within keep_awake_max_secs and the daily budget', async () => {
    const e = await create({ idle: { suspend_after_secs: 600 } });
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { keep_awake_max_secs: 3600, keep_awake_daily_secs: 5000 });
    await holdFromProcess(e.id, 3000);
    const rows = await t.svc.db('keep_awakes').where({ environment_id: e.id });
    expect(rows.map((r: any) => [r.source, r.pid != null])).to.deep.equal([['agent', true]]);
    const held = (await t.api.get(`/v1/environments/${e.id}`)).body;
    expect(held.idle.keep_awake_until).to.be.a('string');
    const ka = await events(e.id, 'keep_awake');
    expect(ka.at(-1)).to.include({ source: 'agent' });
    expect(ka.at(-1).data.seconds).to.equal(3000);
    expect(await webhooks(e.id, 'environment.agent_keep_awake')).to.have.length(1);
    await t.advance(2000);
    expect((await t.api.get(`/v1/environments/${e.id}`)).body.state).to.equal('running');
    // Caps: too long, and past the daily budget (3000 used of 5000).
    expect((await ctl(e.id, 'POST', '/keep-awake', { seconds: 3601 }))[1].error).to.equal('keep_awake_too_long');
    expect((await ctl(e.id, 'POST', '/keep-awake', { seconds: 2001 }))[1].error).to.equal('keep_awake_budget_exhausted');
    // The holder ends: so does its hold.
    await sh(t.api, e.id, 'pkill -f holder.py; true');
    const t0 = Date.now();
    while ((await events(e.id, 'keep_awake_released')).length === 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 100));
    const released = await events(e.id, 'keep_awake_released');
    expect(released[0].data.reason).to.equal('process_exited');
    expect(await webhooks(e.id, 'environment.agent_keep_awake_released')).to.have.length(1);
    // The exec calls above were activity; 601 s after them the ladder steps, though the
    // process's hold (3000 s from its grant, 2000 s ago) would have held it.
    await t.advance(601);
    expect((await t.api.get(`/v1/environments/${e.id}`)).body.state).to.equal('suspended');
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('scheduling: false ends a held keep-awake; a developer\'s own keep-awake is not bound by the agent caps and stays', async () => {
    const e = await create({ idle: { suspend_after_secs: 600 } });
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { keep_awake_max_secs: 60 });
    // The developer: past the agent's cap, and it stays when the agent's ends.
    expect((await t.api.post(`/v1/environments/${e.id}/keep-awake`, { seconds: 1200 })).status).to.equal(200);
    expect(await holdFromProcess(e.id, 60)).to.match(/^HTTP\/1.1 200/);
    expect((await events(e.id, 'keep_awake')).map((x: any) => x.source)).to.deep.equal(['api', 'agent']);
    const devUntil = Date.parse((await t.api.get(`/v1/environments/${e.id}`)).body.idle.keep_awake_until);
    await t.api.patch(`/v1/environments/${e.id}/agent-settings`, { scheduling: false });
    const released = await events(e.id, 'keep_awake_released');
    expect(released.at(-1).data.reason).to.equal('scheduling_disabled');
    expect(Date.parse((await t.api.get(`/v1/environments/${e.id}`)).body.idle.keep_awake_until)).to.equal(devUntil);
    await t.api.delete(`/v1/environments/${e.id}`);
  });

  it('the agent asks for a person: POST /browser/takeover sends browser.takeover_requested for its own lease only', async function () {
    skipOrFailInCI(this, chromiumUnavailable());
    const e = await create();
    const other = await create();
    const lease = (await t.api.post('/v1/browser/leases', { environment_id: e.id })).body;
    expect(lease.state).to.equal('active');
    const [s1, b1] = await ctl(e.id, 'POST', '/browser/takeover', { lease_id: lease.id, reason: 'captcha' });
    expect(s1).to.equal(202);
    expect(b1).to.include({ requested: true, lease_id: lease.id });
    const hooks = await webhooks(e.id, 'browser.takeover_requested');
    expect(hooks.map((h: any) => JSON.parse(h.body).data)).to.deep.equal([{ lease_id: lease.id, environment_id: e.id, reason: 'captcha' }]);
    expect((await events(e.id, 'takeover_requested'))[0]).to.include({ source: 'agent' });
    // Another environment's socket cannot ask for this lease; a malformed body is 400.
    expect((await ctl(other.id, 'POST', '/browser/takeover', { lease_id: lease.id }))[0]).to.equal(404);
    expect((await ctl(e.id, 'POST', '/browser/takeover', { lease: 'x' }))[0]).to.equal(400);
    await t.api.post(`/v1/browser/leases/${lease.id}/release`);
    expect((await ctl(e.id, 'POST', '/browser/takeover', { lease_id: lease.id }))[0]).to.equal(409);
    await t.api.delete(`/v1/environments/${e.id}`);
    await t.api.delete(`/v1/environments/${other.id}`);
  });

  it('the agent reaches its lease\'s CDP endpoint from inside its VM (vm_cdp_url, 127.0.0.1:9222), and only its own leases', async function () {
    skipOrFailInCI(this, chromiumUnavailable());
    const e = await create();
    const other = await create();
    const lease = (await t.api.post('/v1/browser/leases', { environment_id: e.id })).body;
    expect(lease.vm_cdp_url).to.match(/^ws:\/\/127\.0\.0\.1:9222\/v1\/browser\/leases\/bls_[0-9a-f]{24}\/cdp\?token=/);
    // A minimal WebSocket client in the VM's python: one CDP command, its answer.
    const client = [
      'import base64, json, os, socket, struct, sys, urllib.parse',
      'u = urllib.parse.urlparse(sys.argv[1])',
      's = socket.create_connection((u.hostname, u.port), timeout=10)',
      "key = base64.b64encode(os.urandom(16)).decode()",
      "s.sendall(('GET %s?%s HTTP/1.1\\r\\nHost: x\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n' % (u.path, u.query, key)).encode())",
      "head = b''",
      "while b'\\r\\n\\r\\n' not in head:",
      '    c = s.recv(1)',
      '    if not c: break',
      '    head += c',
      "print(head.split(b'\\r\\n')[0].decode())",
      "if b' 101 ' not in head.split(b'\\r\\n')[0]: sys.exit(0)",
      "msg = json.dumps({'id': 1, 'method': sys.argv[2]}).encode()",
      "mask = os.urandom(4)",
      "s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))",
      'def read(n):',
      "    b = b''",
      '    while len(b) < n: b += s.recv(n - len(b))',
      '    return b',
      'h = read(2); n = h[1] & 0x7f',
      "if n == 126: n = struct.unpack('>H', read(2))[0]",
      "elif n == 127: n = struct.unpack('>Q', read(8))[0]",
      'print(read(n).decode())',
    ].join('\n');
    await t.api.put(`/v1/environments/${e.id}/files`, { path: 'ws.py', content: client });
    await t.api.put(`/v1/environments/${other.id}/files`, { path: 'ws.py', content: client });
    const r = await sh(t.api, e.id, `python3 ws.py '${lease.vm_cdp_url}' Browser.getVersion`);
    const [status, body] = r.stdout.trim().split('\n');
    expect(status).to.match(/101/);
    expect(JSON.parse(body!).result.product).to.match(/Chrome/);
    const contexts = await sh(t.api, e.id, `python3 ws.py '${lease.vm_cdp_url}' Target.getBrowserContexts`);
    expect(JSON.parse(contexts.stdout.trim().split('\n')[1]!).result).to.deep.equal({ browserContextIds: [] });
    // Another VM, with the token: not its lease.
    const theirs = await sh(t.api, other.id, `python3 ws.py '${lease.vm_cdp_url}' Browser.getVersion`);
    expect(theirs.stdout).to.match(/^HTTP\/1.1 404/);
    await t.api.post(`/v1/browser/leases/${lease.id}/release`);
    await t.api.delete(`/v1/environments/${e.id}`);
    await t.api.delete(`/v1/environments/${other.id}`);
  });
});
