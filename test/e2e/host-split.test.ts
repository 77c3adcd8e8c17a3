import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { startChildService, type ChildService } from '../helpers/child-service.js';
import { client } from '../helpers/service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { skipWithoutRuntime, waitState } from '../helpers/runtime.js';

/**
 * A split deployment (issue 12, item 1): `gateway start` with no local host
 * (GATEWAY_RUNTIME=none) serves the API; `gateway host` alone, on the same store, master
 * key and DATA_DIR, places and runs the environment. The host registers with its
 * capabilities, and marks itself offline when it stops.
 */
describe('gateway host: an environment host alone on a shared store', function () {
  this.timeout(90_000);
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-split-'));
  const db = freshDatabaseUrl();
  const key = `sk_${randomBytes(20).toString('hex')}`;
  const shared = {
    DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0',
    GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'info',
  };
  let api: ChildService | null = null;
  let host: ChildService | null = null;

  /** The endpoint a host registered, read from the store as an API process would. */
  async function rpcEndpoint(id: string): Promise<string> {
    const { createDb, parseDatabaseUrl } = await import('../../store/db.js');
    const knex = await createDb(parseDatabaseUrl(db.url)!);
    try {
      return (await knex('hosts').where({ id }).first()).endpoint;
    } finally {
      await knex.destroy();
    }
  }

  before(function () {
    skipWithoutRuntime(this);
  });
  after(async () => {
    await host?.stop();
    await api?.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('the API process takes the create; the host process runs it; the host goes offline when it stops', async () => {
    api = await startChildService({ ...shared, GATEWAY_RUNTIME: 'none' }, { timeoutMs: 40_000 });
    const c = client(api.ready.api_url, key);
    const created = await c.post('/v1/environments', { end_user_id: 'split-user', resources: { cpus: 1, memory_mib: 512 } });
    expect(created.status).to.equal(201);
    host = await startChildService({ ...shared, GATEWAY_RUNTIME: 'process', GATEWAY_HOST_ID: 'host_split1' }, { command: 'host', timeoutMs: 40_000 });
    expect(host.ready.api_url).to.equal(null);
    expect(host.ready.host_id).to.equal('host_split1');
    const running = await waitState(c, created.body.id, 'running', 20_000);
    expect(running.host_id).to.equal('host_split1');
    const hosts = (await c.get('/v1/hosts')).body.data;
    expect(hosts.find((h: any) => h.id === 'host_split1')).to.include({ status: 'online', driver: 'process' });
    const row = await rpcEndpoint('host_split1');
    const denied = await request(`${row}/exec`, { method: 'POST', headers: { authorization: 'Bearer nope' }, body: '{}' });
    expect(denied.statusCode).to.equal(401);
    await denied.body.dump();
    // Exec and files from the API process reach the host over its RPC endpoint.
    const id = created.body.id;
    const ex = await c.post(`/v1/environments/${id}/exec`, { command: ['/bin/sh', '-c', 'cat; echo " $SERVICE_ENVIRONMENT_ID"; exit 5'], stdin: 'via-rpc' });
    expect(ex.status, ex.text).to.equal(200);
    expect(ex.body).to.include({ exit_code: 5, stdout: `via-rpc ${id}\n` });
    expect((await c.put(`/v1/environments/${id}/files`, { path: 'r.txt', content: 'remote' })).body).to.deep.equal({ path: '/home/agent/r.txt', size: 6 });
    expect((await c.get(`/v1/environments/${id}/files?path=r.txt`)).body.content).to.equal(Buffer.from('remote').toString('base64'));
    expect((await c.get(`/v1/environments/${id}/files?path=../x`)).status).to.equal(400);
    expect((await c.get(`/v1/environments/${id}/files?path=missing`)).status).to.equal(404);
    const missing = await c.post(`/v1/environments/${id}/exec`, { command: ['no-such-cmd'] });
    expect(missing.status).to.equal(503);
    expect(missing.body.error).to.equal('exec_failed');
    const res = await fetch(`${api.ready.api_url}/v1/environments/${id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ command: ['/bin/sh', '-c', 'echo a; sleep 0.2; echo b'] }),
    });
    const text = await res.text();
    expect(text).to.include('event: stdout\ndata: {"data":"a\\n"}');
    expect(text).to.match(/event: exit\ndata: \{"exit_code":0,/);
    // The RPC wants the host's token: the endpoint alone opens nothing.
    const endpoint = (await c.get('/v1/hosts')).body.data.find((h: any) => h.id === 'host_split1');
    expect(endpoint).to.not.have.property('endpoint');
    expect(await host.stop()).to.equal(0);
    host = null;
    const after = (await c.get('/v1/hosts')).body.data.find((h: any) => h.id === 'host_split1');
    expect(after.status).to.equal('offline');
    const gone = await c.post(`/v1/environments/${id}/exec`, { command: ['true'] });
    expect(gone.status).to.equal(503);
    expect(gone.body.error).to.equal('host_unavailable');
  });
});
