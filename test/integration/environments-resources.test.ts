import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { findCgroup } from '../helpers/cgroups.js';
import { sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * PATCH /v1/environments/{id}/resources (issue 24, item 4: "resize on a resources update"):
 * only fields sent change, the disk only grows, and the host applies a change to a running
 * process sandbox (its cgroup limits at once, its disk online or at its next start).
 */
describe('environments: resources update', function () {
  this.timeout(120_000);
  let t: TestService;

  describe('the API', () => {
    before(async () => {
      t = await startTestService();
    });
    after(async () => {
      await t?.close();
    });

    it('validates, changes only what is sent, never shrinks the disk, and records an event', async () => {
      const env = (await t.api.post('/v1/environments', { end_user_id: 'res-api', resources: { memory_mib: 1024, base_memory_mib: 512, disk_gib: 4 } })).body;
      const path = `/v1/environments/${env.id}/resources`;
      const cases: Array<[unknown, number, string]> = [
        [{ cpus: 'two' }, 422, 'invalid_body'], [{ gpus: 1 }, 422, 'invalid_body'], [{ cpus: 9 }, 400, 'invalid_request'],
        [{ memory_mib: 256 }, 400, 'invalid_request'], [{ base_memory_mib: 2048 }, 400, 'invalid_request'],
        [{ memory_mib: 512, base_memory_mib: 1024 }, 400, 'invalid_request'], [{ disk_gib: 3 }, 400, 'invalid_request'], [{ disk_gib: 201 }, 400, 'invalid_request'],
      ];
      for (const [body, status, code] of cases) {
        const r = await t.api.patch(path, body);
        expect(r.status, JSON.stringify(body)).to.equal(status);
        expect(r.body.error).to.equal(code);
      }
      // Nothing of those reached the record.
      expect((await t.api.get(`/v1/environments/${env.id}`)).body.resources).to.deep.equal({ cpus: 2, memory_mib: 1024, base_memory_mib: 512, disk_gib: 4 });
      expect((await t.api.patch(path, {})).body.resources).to.deep.equal({ cpus: 2, memory_mib: 1024, base_memory_mib: 512, disk_gib: 4 });
      const r = await t.api.patch(path, { cpus: 1, disk_gib: 6 });
      expect(r.status).to.equal(200);
      expect(r.body.resources).to.deep.equal({ cpus: 1, memory_mib: 1024, base_memory_mib: 512, disk_gib: 6 });
      const events = (await t.api.get(`/v1/environments/${env.id}/events?kind=resources_updated`)).body.data;
      expect(events.map((e: { data: unknown }) => e.data)).to.deep.equal([{ cpus: 1, disk_gib: 6 }]);
      const raw = await t.raw('PATCH', path, { body: '{"cpus": 1}', headers: { authorization: `Bearer ${t.api.key}` } });
      expect(raw.status).to.equal(415);
      const other = await t.otherDeveloper();
      expect((await other.patch(path, { cpus: 2 })).status).to.equal(404);
      await t.api.delete(`/v1/environments/${env.id}`);
      const gone = await t.api.patch(path, { cpus: 2 });
      expect(gone.status).to.equal(409);
      expect(gone.body.error).to.equal('environment_destroyed');
    });
  });

  describe('on a running process sandbox', () => {
    before(async function () {
      skipWithoutRuntime(this);
      t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    });
    after(async () => {
      await t?.close();
    });

    /** The environment's v1 memory limit as the host set it (this machine's hybrid tree), or null. */
    const memoryLimit = (envId: string): number | null => {
      // findCgroup: other runs on this machine create and remove cgroups all the time (a
      // full run beside a CI run read null here for 5 s with a recursive readdir).
      const found = findCgroup('/sys/fs/cgroup/memory', (n, path) => n === envId && path.includes('gateway-'), 4);
      try {
        return found ? Number(readFileSync(join(found, 'memory.limit_in_bytes'), 'utf8')) : null;
      } catch {
        return null;
      }
    };

    it('memory_mib applies to the running sandbox at once; disk_gib grows the disk (online, or at the next start)', async () => {
      const env = await waitState(t.api, (await t.api.post('/v1/environments', { end_user_id: 'res-run', resources: { memory_mib: 1024, disk_gib: 1 } })).body.id, 'running');
      const before = memoryLimit(env.id);
      if (before !== null) expect(before).to.equal(1024 * 1024 * 1024);
      await sh(t.api, env.id, 'echo kept > /home/agent/kept.txt');
      expect((await t.api.patch(`/v1/environments/${env.id}/resources`, { memory_mib: 2048, disk_gib: 2 })).status).to.equal(200);
      if (before !== null) {
        for (let i = 0; i < 200 && memoryLimit(env.id) !== 2048 * 1024 * 1024; i++) await new Promise((r) => setTimeout(r, 25));
        expect(memoryLimit(env.id)).to.equal(2048 * 1024 * 1024);
      }
      const size = async (): Promise<number> => Number((await sh(t.api, env.id, 'df -B1 --output=size /home/agent | tail -1')).stdout.trim());
      if ((await size()) < 1.5 * 1024 ** 3) {
        // Not online here (a host without CAP_SYS_RESOURCE): the next start grows it.
        await t.api.post(`/v1/environments/${env.id}/suspend`);
        await t.svc.db('environments').where({ id: env.id }).update({ desired_state: 'stopped' });
        t.svc.host?.notify();
        await waitState(t.api, env.id, 'stopped');
        await t.api.post(`/v1/environments/${env.id}/wake`);
        await waitState(t.api, env.id, 'running');
      }
      expect(await size()).to.be.greaterThan(1.5 * 1024 ** 3);
      expect((await sh(t.api, env.id, 'cat /home/agent/kept.txt')).stdout.trim()).to.equal('kept');
    });
  });
});
