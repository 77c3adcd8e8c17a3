import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config/config.js';
import { createLogger } from '../../lib/log.js';
import { startService, type RunningService } from '../../bin/service.js';
import { client } from '../helpers/service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { pollUntil, sameLoopOnHost, skipWithoutRuntime, sh, waitState } from '../helpers/runtime.js';

/**
 * Never pretend (issue 12, item 3): on a machine without cgroups (here: GATEWAY_CGROUP_ROOT
 * at an empty directory, as a machine with none mounted looks), the host does not start
 * unless GATEWAY_RUNTIME_INSECURE=1; with it, it starts, warns loudly, and its
 * capabilities say what is missing. Suspend then falls back to stopping processes.
 */
describe('environment host without cgroups: refuses, or runs insecure and says so', function () {
  this.timeout(60_000);
  const empty = mkdtempSync(join(tmpdir(), 'gw-nocgroup-'));
  const cleanup: Array<() => Promise<void>> = [];

  before(function () {
    skipWithoutRuntime(this);
  });
  after(async () => {
    for (const c of cleanup.reverse()) await c();
    rmSync(empty, { recursive: true, force: true });
  });

  async function start(extra: Record<string, string>): Promise<{ svc: RunningService; logs: any[]; key: string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-insecure-'));
    const db = freshDatabaseUrl();
    const key = `sk_${randomBytes(20).toString('hex')}`;
    const logs: any[] = [];
    const log = createLogger('info', { write: (line: string) => logs.push(JSON.parse(line)) });
    const svc = await startService(loadConfig({
      DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'process', GATEWAY_CGROUP_ROOT: empty,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, ...extra,
    }), log);
    cleanup.push(async () => {
      await svc.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    return { svc, logs, key };
  }

  it('without GATEWAY_RUNTIME_INSECURE: no host, a loud error naming what is missing, environments stay pending', async () => {
    const { svc, logs, key } = await start({});
    expect(svc.host).to.equal(null);
    const err = logs.find((l) => l.level === 'error' && /environment host NOT started/.test(l.msg));
    expect(err, JSON.stringify(logs)).to.exist;
    expect(err.missing.join(' ')).to.match(/no memory controller/);
    const api = client(svc.apiUrl, key);
    // No host started, none registered: nothing exists that could place an environment
    // (placement is only ever a host's), so no wait can change the answer below.
    expect((await api.get('/v1/hosts')).body.data).to.deep.equal([]);
    const env = await api.post('/v1/environments', { end_user_id: 'u' });
    expect(env.status).to.equal(201);
    expect((await api.get(`/v1/environments/${env.body.id}`)).body).to.include({ state: 'pending', host_id: null });
  });

  it('with GATEWAY_RUNTIME_INSECURE=1: runs, warns, reports the missing isolation; suspend stops every process, resume continues them', async () => {
    const { svc, logs, key } = await start({ GATEWAY_RUNTIME_INSECURE: '1' });
    expect(svc.host).to.not.equal(null);
    expect(logs.some((l) => l.level === 'warn' && /WITHOUT part of its isolation/.test(l.msg))).to.equal(true);
    const api = client(svc.apiUrl, key);
    const host = (await api.get('/v1/hosts')).body.data[0];
    expect(host.capabilities).to.include({ insecure: true, namespaces: true, network_sealed: true });
    expect(host.capabilities.cgroup).to.deep.equal({ layout: 'none', memory: false, cpu: false, pids: false, freeze: false, kill: false });
    expect(host.capabilities.missing.join(' ')).to.match(/memory_mib is not enforced/);
    const env = (await api.post('/v1/environments', { end_user_id: 'u', resources: { cpus: 1, memory_mib: 512 } })).body;
    await waitState(api, env.id, 'running');
    await sh(api, env.id, 'nohup sh -c \'i=0; while :; do i=$((i+1)); echo $i > c.new; mv c.new counter; sleep 0.05; done\' >/dev/null 2>&1 &');
    const counter = join(svc.dataDir, 'environments', env.id, 'disk', 'counter');
    const read = (): number => (existsSync(counter) ? Number(readFileSync(counter, 'utf8')) : 0);
    // Counting (past 10: a count restarted from 1 would show below it).
    expect(await pollUntil(read, (n) => n >= 10)).to.be.at.least(10);
    await api.post(`/v1/environments/${env.id}/suspend`);
    await waitState(api, env.id, 'suspended');
    const frozen = read();
    // Stays put while the very same loop, run on the host, counts 10 (not a fixed sleep:
    // a loaded machine slows both alike).
    await sameLoopOnHost(10);
    expect(read(), 'the counter moved while suspended').to.equal(frozen);
    await api.post(`/v1/environments/${env.id}/resume`);
    await waitState(api, env.id, 'running');
    const after = await pollUntil(read, (n) => n !== frozen);
    expect(after, 'the counter did not go on after the resume').to.be.greaterThan(frozen);
    const timeout = await api.post(`/v1/environments/${env.id}/exec`, { command: ['/bin/sh', '-c', 'sleep 300'], timeout_secs: 1 });
    expect(timeout.body.error).to.equal('exec_timeout');
    expect((await sh(api, env.id, 'ps -eo args --no-headers | grep -c "^sleep 300" || true')).stdout).to.equal('0\n');
  });
});
