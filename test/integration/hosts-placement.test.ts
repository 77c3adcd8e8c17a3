import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';
import { createRuntimeState, type RuntimeState } from '../../environments/runtime.service.js';
import { hostsStore } from '../../hosts/hosts.store.js';
import { createHostAgent, placeOn } from '../../hosts/host-agent.js';
import { DriverError, type HostDriver } from '../../hosts/driver.js';
import { silentLogger } from '../../lib/log.js';
import { createRuntimeService } from '../../hosts/runtime.service.js';
import { ServiceError } from '../../lib/errors.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';

/**
 * Placement and host liveness (issue 12, item 1), without a sandbox: hosts are rows here,
 * as a host in another process would be. Placement must never overbook a host, however
 * many placements race; an environment lands on one host only; a host that stops
 * heartbeating is offline and its environments answer 503 host_unavailable.
 */
describe('hosts: placement and liveness', function () {
  this.timeout(30_000);
  let t: TestService;
  let rs: RuntimeState;

  before(async () => {
    t = await startTestService();
    rs = createRuntimeState({ db: t.svc.db, clock: t.svc.clock });
  });
  after(async () => {
    await t.close();
  });

  async function host(id: string, cpus: number, memoryMib: number, heartbeatAgoMs = 0): Promise<void> {
    const now = t.svc.clock.nowMs();
    await hostsStore.upsert(t.svc.db, {
      id, name: id, driver: 'process', cpus, memory_mib: memoryMib, capabilities: '{}', status: 'online',
      started_at: now, last_heartbeat_at: now - heartbeatAgoMs, created_at: now, endpoint: null,
    });
  }

  async function env(endUser: string, cpus = 2, base = 1024): Promise<{ id: string; cpus: number; base_memory_mib: number }> {
    const r = await t.api.post('/v1/environments', { end_user_id: endUser, resources: { cpus, memory_mib: 2048, base_memory_mib: base } });
    expect(r.status).to.equal(201);
    return { id: r.body.id, cpus, base_memory_mib: base };
  }

  it('two placements racing for the last room on a host: exactly one wins (20 rounds)', async () => {
    for (let round = 0; round < 20; round++) {
      const h = `host_race${round}`;
      await host(h, 2, 100_000);
      const [a, b] = await Promise.all([env(`race-a-${round}`), env(`race-b-${round}`)]);
      const placed = await Promise.all([placeOn(t.svc.db, rs, h, a), placeOn(t.svc.db, rs, h, b)]);
      expect(placed.filter(Boolean), `round ${round}`).to.have.length(1);
      const onHost = await t.svc.db('environments').where({ host_id: h });
      expect(onHost).to.have.length(1);
    }
  });

  it('memory is counted too: base_memory_mib of the environments held', async () => {
    await host('host_mem', 100, 1536);
    const a = await env('mem-a', 1, 1024);
    const b = await env('mem-b', 1, 1024);
    const c = await env('mem-c', 1, 512);
    expect(await placeOn(t.svc.db, rs, 'host_mem', a)).to.equal(true);
    expect(await placeOn(t.svc.db, rs, 'host_mem', b)).to.equal(false);
    expect(await placeOn(t.svc.db, rs, 'host_mem', c)).to.equal(true);
    const pending = (await t.api.get(`/v1/environments/${b.id}`)).body;
    expect(pending).to.include({ state: 'pending', host_id: null });
  });

  it('one environment raced by two hosts lands on one of them', async () => {
    await host('host_x1', 64, 100_000);
    await host('host_x2', 64, 100_000);
    for (let i = 0; i < 10; i++) {
      const e = await env(`two-hosts-${i}`);
      const placed = await Promise.all([placeOn(t.svc.db, rs, 'host_x1', e), placeOn(t.svc.db, rs, 'host_x2', e)]);
      expect(placed.filter(Boolean)).to.have.length(1);
      const events = (await t.api.get(`/v1/environments/${e.id}/events?kind=placed`)).body.data;
      expect(events).to.have.length(1);
    }
  });

  it('a destroyed or stopped environment no longer holds room', async () => {
    await host('host_free', 2, 100_000);
    const a = await env('free-a');
    expect(await placeOn(t.svc.db, rs, 'host_free', a)).to.equal(true);
    const b = await env('free-b');
    expect(await placeOn(t.svc.db, rs, 'host_free', b)).to.equal(false);
    await t.api.delete(`/v1/environments/${a.id}`);
    expect(await placeOn(t.svc.db, rs, 'host_free', b)).to.equal(true);
  });

  it('an offline host is never placed on', async () => {
    await host('host_off', 64, 100_000);
    await hostsStore.markOffline(t.svc.db, 'host_off');
    expect(await placeOn(t.svc.db, rs, 'host_off', await env('off-a'))).to.equal(false);
  });

  it('a draining host (issue 25) takes nothing new, keeps what it holds, stays draining when it registers again; undrained, it takes again', async () => {
    await host('host_drain', 100, 100_000);
    const kept = await env('drain-kept', 1, 256);
    expect(await placeOn(t.svc.db, rs, 'host_drain', kept)).to.equal(true);
    expect(await hostsStore.setDraining(t.svc.db, 'host_drain', true)).to.equal(true);
    expect(await hostsStore.setDraining(t.svc.db, 'host_nosuch', true)).to.equal(false);
    const newcomer = await env('drain-new', 1, 256);
    expect(await placeOn(t.svc.db, rs, 'host_drain', newcomer)).to.equal(false);
    // What it holds stays on it.
    expect((await t.svc.db('environments').where({ id: kept.id }).first()).host_id).to.equal('host_drain');
    // A restart of the host registers it again (upsert of everything it reports): still draining.
    await host('host_drain', 100, 100_000);
    expect(await placeOn(t.svc.db, rs, 'host_drain', newcomer)).to.equal(false);
    const listed = (await t.api.get('/v1/hosts')).body.data.find((h: { id: string }) => h.id === 'host_drain');
    expect(listed).to.include({ status: 'online', draining: true });
    expect(await hostsStore.setDraining(t.svc.db, 'host_drain', false)).to.equal(true);
    expect(await placeOn(t.svc.db, rs, 'host_drain', newcomer)).to.equal(true);
    expect((await t.api.get('/v1/hosts')).body.data.find((h: { id: string }) => h.id === 'host_drain')).to.include({ draining: false });
  });

  it('a host that stopped heartbeating is marked offline; exec on its environment is 503 host_unavailable', async () => {
    await host('host_stale', 64, 100_000, 60_000);
    const e = await env('stale-a');
    expect(await placeOn(t.svc.db, rs, 'host_stale', e)).to.equal(true);
    await t.svc.db('environments').where({ id: e.id }).update({ state: 'running' });
    const r = await t.api.post(`/v1/environments/${e.id}/exec`, { command: ['true'] });
    expect(r.status).to.equal(503);
    expect(r.body.error).to.equal('host_unavailable');
    expect(await t.svc.runtime.sweepOfflineHosts()).to.include('host_stale');
    expect((await hostsStore.get(t.svc.db, 'host_stale'))!.status).to.equal('offline');
    const files = await t.api.get(`/v1/environments/${e.id}/files?path=x`);
    expect(files.status).to.equal(503);
    expect(files.body.error).to.equal('host_unavailable');
  });

  it('exec on an environment no host takes: 503 environment_not_placed once the placement wait is over', async () => {
    const e = await env('never-placed');
    const rt = createRuntimeService({ db: t.svc.db, clock: t.svc.clock, runtime: rs, agents: () => new Map(), envFor: async () => ({}), placeTimeoutMs: 300 });
    const err = await rt.exec(DEFAULT_DEVELOPER_ID, e.id, { command: ['true'] }).then(() => null, (x: unknown) => x);
    expect(err).to.be.instanceOf(ServiceError);
    expect((err as ServiceError).code).to.equal('environment_not_placed');
  });

  it('exec and files on a failed environment: 409 environment_failed', async () => {
    const e = await env('failed-a');
    await rs.report(e.id, 'failed', 'failed', { reason: 'the sandbox could not start' });
    const got = (await t.api.get(`/v1/environments/${e.id}`)).body;
    expect(got).to.include({ state: 'failed', failure_reason: 'the sandbox could not start' });
    for (const r of [
      await t.api.post(`/v1/environments/${e.id}/exec`, { command: ['true'] }),
      await t.api.get(`/v1/environments/${e.id}/files?path=x`),
      await t.api.put(`/v1/environments/${e.id}/files`, { path: 'x', content: 'y' }),
    ]) {
      expect(r.status).to.equal(409);
      expect(r.body.error).to.equal('environment_failed');
    }
    const failed = (await t.api.get(`/v1/environments/${e.id}/events?kind=failed`)).body.data[0];
    expect(failed).to.include({ source: 'host' });
    expect(failed.data.reason).to.equal('the sandbox could not start');
  });

  it('a VM that cannot start is failed (reason in failure_reason and the event); a later exit right after start too', async () => {
    // A driver whose VMs never start: the agent's handling, whatever the driver.
    const failing: HostDriver = {
      name: 'fake',
      capabilities: () => ({ driver: 'fake', network_sealed: true, namespaces: true, cgroup: { layout: 'v2', memory: true, cpu: true, pids: true, freeze: true, kill: true }, memory_across_host_restart: false, disk_quota: false, insecure: false, missing: [] }),
      create: async () => {},
      start: async () => {
        throw new DriverError('start_failed', 'the kernel image is missing');
      },
      suspend: async () => {}, resume: async () => {}, stop: async () => {}, destroy: async () => {},
      status: () => 'absent',
      applySurface: async () => {},
      exec: async () => { throw new Error('unused'); },
      readFile: async () => Buffer.alloc(0),
      writeFile: async () => ({ path: '', size: 0 }),
      stats: async () => ({ memoryBytes: null, cpuUsec: null }),
      onExit: () => {},
      leftovers: () => [],
      close: async () => {},
    };
    const agent = createHostAgent({
      db: t.svc.db, clock: t.svc.clock, log: silentLogger, driver: failing, runtime: rs, hostId: 'host_fake', name: 'fake',
      capacity: { cpus: 64, memoryMib: 100_000 }, surfaceFor: async () => null, pollMs: 60_000,
    });
    await agent.start();
    try {
      const e = await env('cannot-start');
      await agent.tick();
      const got = (await t.api.get(`/v1/environments/${e.id}`)).body;
      expect(got).to.include({ state: 'failed', failure_reason: 'the kernel image is missing', host_id: 'host_fake' });
      const ev = (await t.api.get(`/v1/environments/${e.id}/events?kind=failed`)).body.data;
      expect(ev).to.have.length(1);
      expect(ev[0]).to.include({ source: 'host' });
      expect(ev[0].data.reason).to.equal('the kernel image is missing');
      // Sticky: another pass does not retry and does not add events.
      await agent.tick();
      expect((await t.api.get(`/v1/environments/${e.id}/events?kind=failed`)).body.data).to.have.length(1);
      const ex = await t.api.post(`/v1/environments/${e.id}/exec`, { command: ['true'] });
      expect(ex.status).to.equal(409);
      expect(ex.body.error).to.equal('environment_failed');
      // Destroy still works: the host reports it destroyed.
      await t.api.delete(`/v1/environments/${e.id}`);
      await agent.tick();
      expect((await t.api.get(`/v1/environments/${e.id}`)).body.state).to.equal('destroyed');
    } finally {
      await agent.close();
    }
  });
});
