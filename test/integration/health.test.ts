import { expect } from 'chai';
import knex from 'knex';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { startTestService, type TestService } from '../helpers/service.js';
import { usingMysql } from '../helpers/db.js';

/**
 * /healthz and /readyz (issue 25, item 1): no key, at the root; readiness names its checks
 * with ok/failing only and turns 503 while the store is down, 200 again once it is back.
 */
describe('health and readiness (issue 25)', function () {
  this.timeout(60_000);
  let t: TestService;
  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t?.close();
  });

  it('GET /healthz: 200 {"status":"ok"} without a key, and with a bad one', async () => {
    for (const headers of [{}, { authorization: 'Bearer sk_nope' }] as Array<Record<string, string>>) {
      const r = await t.raw('GET', '/healthz', { headers });
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ status: 'ok' });
      expect(r.headers.get('cache-control')).to.equal('no-store');
    }
  });

  it('GET /readyz: 200 with every check ok (store, migrations, proxy; no host with GATEWAY_RUNTIME=none), no key', async () => {
    const r = await t.raw('GET', '/readyz');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ status: 'ready', checks: { store: 'ok', migrations: 'ok', proxy: 'ok' } });
  });

  it('migrations behind this code: 503 naming migrations; ready again once they are applied', async () => {
    const [last] = await t.svc.db('knex_migrations').orderBy('id', 'desc').limit(1);
    await t.svc.db('knex_migrations').where({ id: last.id }).delete();
    try {
      const r = await t.raw('GET', '/readyz');
      expect(r.status).to.equal(503);
      expect(r.body).to.deep.equal({ status: 'not_ready', checks: { store: 'ok', migrations: 'failing', proxy: 'ok' } });
    } finally {
      await t.svc.db('knex_migrations').insert(last);
    }
    expect((await t.raw('GET', '/readyz')).status).to.equal(200);
  });

  it('the store gone (its pool destroyed): 503 naming the store, no error text; 200 again when it is back', async () => {
    await t.svc.db.destroy();
    try {
      const r = await t.raw('GET', '/readyz');
      expect(r.status).to.equal(503);
      expect(r.body.status).to.equal('not_ready');
      expect(r.body.checks.store).to.equal('failing');
      expect(r.body.checks.proxy).to.equal('ok');
      expect(Object.values(r.body.checks).every((v) => v === 'ok' || v === 'failing')).to.equal(true);
      // Liveness is not readiness: the process still serves.
      expect((await t.raw('GET', '/healthz')).status).to.equal(200);
    } finally {
      t.svc.db.initialize();
    }
    const back = await t.raw('GET', '/readyz');
    expect(back.status).to.equal(200);
    expect(back.body.status).to.equal('ready');
  });
});

/**
 * The same with MySQL out of reach on the network, as a database failover looks to a node:
 * the service reaches MariaDB through a TCP relay the test cuts (every connection reset,
 * new ones refused), then restores.
 */
describe('readiness while MySQL is unreachable (issue 25)', function () {
  this.timeout(60_000);
  let relay: Server;
  let up = true;
  const sockets = new Set<Socket>();
  let t: TestService;

  before(async function () {
    if (!usingMysql()) return this.skip(); // database engine: the relay stands between the service and MySQL
    relay = createServer((client) => {
      if (!up) return void client.destroy();
      const server = netConnect(3306, '127.0.0.1');
      sockets.add(client).add(server);
      client.pipe(server).pipe(client);
      const end = () => {
        client.destroy();
        server.destroy();
        sockets.delete(client);
        sockets.delete(server);
      };
      client.on('error', end).on('close', end);
      server.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as { port: number }).port;
    // The fresh database the helper would use, through the relay.
    t = await startTestService();
    const conn = (t.svc.db.client as { config: { connection: { database: string; user: string } } }).config.connection;
    await t.close();
    t = await startTestService({ DATABASE_URL: `mysql://${conn.user}@127.0.0.1:${port}/${conn.database}_relay` });
  });
  after(async () => {
    up = true;
    await t?.close();
    for (const s of sockets) s.destroy();
    relay?.close();
    if (usingMysql()) {
      const admin = knex({ client: 'mysql2', connection: { host: '127.0.0.1', port: 3306, user: 'root' } });
      const conn = (t?.svc.db.client as { config?: { connection?: { database?: string } } } | undefined)?.config?.connection;
      if (conn?.database) await admin.raw('DROP DATABASE IF EXISTS ??', [conn.database]).catch(() => {});
      await admin.destroy();
    }
  });

  it('503 with the store failing within seconds of the cut; 200 again once MySQL is reachable', async () => {
    expect((await t.raw('GET', '/readyz')).status).to.equal(200);
    up = false;
    for (const s of sockets) s.destroy();
    const t0 = performance.now();
    const r = await t.raw('GET', '/readyz');
    expect(r.status).to.equal(503);
    expect(r.body.checks.store).to.equal('failing');
    expect(performance.now() - t0).to.be.below(5000);
    expect(JSON.stringify(r.body)).to.not.match(/127\.0\.0\.1|3306|mysql|ECONN/i);
    up = true;
    let back = await t.raw('GET', '/readyz');
    for (let i = 0; i < 100 && back.status !== 200; i++) {
      await new Promise((res) => setTimeout(res, 50));
      back = await t.raw('GET', '/readyz');
    }
    expect(back.status).to.equal(200);
    expect(back.body).to.deep.equal({ status: 'ready', checks: { store: 'ok', migrations: 'ok', proxy: 'ok' } });
  });
});
