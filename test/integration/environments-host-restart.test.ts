import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { startService, type RunningService } from '../../bin/service.js';
import { client, type ApiClient } from '../helpers/service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { skipWithoutRuntime, sh, waitState } from '../helpers/runtime.js';

/**
 * A host restart (issue 12, item 4): the process sandbox cannot keep memory across it
 * (criu does not work on this kernel), so a suspended environment comes back stopped with
 * an event that says why, a running one is started fresh, and both keep their data disks.
 */
describe('environments across a host restart (process sandbox)', function () {
  this.timeout(60_000);
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-restart-'));
  const db = freshDatabaseUrl();
  const key = `sk_${randomBytes(20).toString('hex')}`;
  const env = {
    DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'process',
    GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'silent',
  };
  let svc: RunningService | null = null;
  let api: ApiClient;

  async function start(): Promise<void> {
    svc = await startService(loadConfig(env), silentLogger);
    api = client(svc.apiUrl, key);
  }

  before(function () {
    skipWithoutRuntime(this);
  });
  after(async () => {
    await svc?.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('suspended comes back stopped (event host_restarted), running comes back running fresh; disks kept', async () => {
    await start();
    const a = (await api.post('/v1/environments', { end_user_id: 'restart-a', resources: { cpus: 1, memory_mib: 512 } })).body;
    const b = (await api.post('/v1/environments', { end_user_id: 'restart-b', resources: { cpus: 1, memory_mib: 512 } })).body;
    await waitState(api, a.id, 'running');
    await waitState(api, b.id, 'running');
    await sh(api, a.id, 'echo a-data > data.txt; nohup sleep 1000 >/dev/null 2>&1 &');
    await sh(api, b.id, 'echo b-data > data.txt');
    await api.post(`/v1/environments/${a.id}/suspend`);
    await waitState(api, a.id, 'suspended');
    await svc!.close();
    svc = null;

    await start();
    const sa = await waitState(api, a.id, 'stopped');
    expect(sa.desired_state).to.equal('suspended');
    const stopped = (await api.get(`/v1/environments/${a.id}/events?kind=stopped`)).body.data.at(-1);
    expect(stopped.source).to.equal('host');
    expect(stopped.data.reason).to.equal('host_restarted');
    expect(stopped.data.message).to.match(/cannot keep memory across a host restart/);
    await waitState(api, b.id, 'running');
    expect((await sh(api, b.id, 'cat data.txt')).stdout).to.equal('b-data\n');
    // Waking the stopped one boots it fresh with its disk.
    expect((await api.post(`/v1/environments/${a.id}/resume`)).status).to.equal(200);
    await waitState(api, a.id, 'running');
    expect((await sh(api, a.id, 'cat data.txt; pgrep -c sleep || true')).stdout).to.equal('a-data\n0\n');
  });
});
