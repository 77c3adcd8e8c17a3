import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { loadConfig } from '../../config/config.js';
import { silentLogger } from '../../lib/log.js';
import { Keyring } from '../../lib/crypto.js';
import { startService, type RunningService } from '../../bin/service.js';
import { nodeToken } from '../../hosts/nodes.service.js';
import { freshDatabaseUrl } from '../helpers/db.js';
import { client, type ApiClient } from '../helpers/service.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { proxyAgent, type Gateway } from '../helpers/proxy-client.js';
import { withDeadline } from '../helpers/runtime.js';

/**
 * A decision made on one node reaches a request held on another at once (issue 25, item 6;
 * docs/deploy.md): two services on one store, each a node with its own RPC. Node A, which
 * holds the request, polls the store only every 10 minutes here, so a release within a
 * second can only be the poke from node B, where the decision was made. The RPC refuses
 * what is not a poke from a node of this deployment.
 */
describe('approvals across nodes: the deciding node pokes the holding one (issue 25)', function () {
  this.timeout(90_000);
  const masterKey = randomBytes(32);
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-cluster-'));
  const db = freshDatabaseUrl();
  const key = `sk_${randomBytes(20).toString('hex')}`;
  let up: FakeUpstream;
  let a: RunningService;
  let b: RunningService;
  let apiA: ApiClient;
  let apiB: ApiClient;
  let envId: string;
  let gw: Gateway;
  let placeholder: string;
  /** performance.now() when the upstream received each path. */
  const arrived = new Map<string, number>();

  async function node(waitPollMs: number): Promise<RunningService> {
    const config = loadConfig({
      DATABASE_URL: db.url, DATA_DIR: dataDir, API_PORT: '0', PROXY_PORT: '0', GATEWAY_RUNTIME: 'none',
      GATEWAY_MASTER_KEY: masterKey.toString('base64'), GATEWAY_BOOTSTRAP_API_KEY: key, LOG_LEVEL: 'silent',
      GATEWAY_UPSTREAM_OVERRIDES: `api.stripe.com=127.0.0.1:${up.port}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dataDir, 'upstream-ca.pem'),
    });
    return startService(config, silentLogger, { waitPollMs });
  }

  before(async () => {
    up = await startFakeUpstream();
    const respond = up.respond;
    up.respond = (req, res) => {
      arrived.set(req.url, performance.now());
      respond(req, res);
    };
    writeFileSync(join(dataDir, 'upstream-ca.pem'), up.ca.certPem);
    // A holds (and would find a decision by its poll only after 10 minutes); B decides.
    a = await node(600_000);
    b = await node(600_000);
    apiA = client(a.apiUrl, key);
    apiB = client(b.apiUrl, key);
    const created = await apiA.post('/v1/environments', {
      end_user_id: 'cluster-user',
      egress_allow: ['api.stripe.com'],
      secrets: { STRIPE_KEY: { value: 'sk_live_clusterclustercluster', allowed_hosts: ['api.stripe.com'] } },
    });
    expect(created.status, created.text).to.equal(201);
    envId = created.body.id;
    gw = (await apiA.get(`/v1/environments/${envId}/gateway`)).body;
    placeholder = (await apiA.get(`/v1/environments/${envId}/secrets`)).body.data[0].placeholder;
    const policy = await apiA.put(`/v1/environments/${envId}/policy`, { rules: [{ category: 'pay', effect: 'ask' }, { category: 'read', effect: 'allow' }] });
    expect(policy.status, policy.text).to.equal(200);
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await up?.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  let n = 0;
  /** A charge through node A's proxy; resolves once its approval is pending. */
  async function hold(): Promise<{ path: string; approvalId: string; answer: Promise<number> }> {
    const path = `/v1/charges?cluster=${++n}`;
    const agent = proxyAgent(gw);
    const answer = request(`https://api.stripe.com${path}`, {
      dispatcher: agent, method: 'POST', body: 'amount=100',
      headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/x-www-form-urlencoded' },
    }).then(async (r) => {
      await r.body.dump();
      return r.statusCode;
    }).finally(() => agent.close().catch(() => {}));
    for (let i = 0; i < 1000; i++) {
      const pending = (await apiB.get(`/v1/approvals?environment_id=${envId}&status=pending`)).body.data as Array<{ id: string }>;
      if (pending[0]) return { path, approvalId: pending[0].id, answer };
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('the request was never held');
  }

  /** The agent's answer, within 2 s of the decision: A's poll (10 minutes) cannot have found it by then. */
  const released = (answer: Promise<number>): Promise<number> => withDeadline(answer, 2000, 'the held request released after a decision on the other node');

  /** Node A's id and RPC address, as node B finds them: the approval's held_by, then the nodes table. */
  async function holderOf(approvalId: string): Promise<{ id: string; url: string }> {
    const row = await b.db('approvals').where({ id: approvalId }).first('held_by');
    const nodeRow = await b.db('nodes').where({ id: row.held_by }).first();
    return { id: row.held_by, url: nodeRow.rpc_url };
  }

  function poke(url: string, auth: string | null, body: string | Buffer): Promise<number> {
    return request(`${url}/approvals/decided`, {
      method: 'POST', body,
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    }).then(async (r) => {
      await r.body.dump();
      return r.statusCode;
    });
  }

  it('every process with a proxy is a node: registered with its RPC address, and the approval names the one holding it', async () => {
    const nodes = await a.db('nodes').select();
    expect(nodes).to.have.length(2);
    for (const row of nodes) {
      expect(row.id).to.match(/^node_[0-9a-f]{24}$/);
      expect(row.rpc_url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    }
    const h = await hold();
    const holder = await holderOf(h.approvalId);
    expect(nodes.map((r: { id: string }) => r.id)).to.include(holder.id);
    // Released before the test ends (and checked to be the poke's doing in the next test).
    expect((await apiB.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'deny' })).status).to.equal(200);
    expect(await released(h.answer)).to.equal(403);
  });

  it('a decision on node B releases the request held on node A at once, though A polls only every 10 minutes', async () => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const h = await hold();
      const decided = await apiB.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'approve', scope: { kind: 'once' } });
      const answeredAt = performance.now();
      expect(decided.status, decided.text).to.equal(200);
      expect(await released(h.answer)).to.equal(200);
      const releasedAt = arrived.get(h.path)!;
      expect(releasedAt, 'forwarded').to.be.a('number');
      times.push(Math.max(0, releasedAt - answeredAt));
    }
    // Measured from the decision's answer to the upstream receiving the request: a few ms
    // (the poke is sent after the commit, before or just after the answer).
    expect(Math.max(...times), `decision answer → forwarded, ms: ${times.map((t) => t.toFixed(1)).join(', ')}`).to.be.below(500);
  });

  it('the RPC refuses a poke without the node token (401), a forged one (401), a token of another node (401), and anything but POST (405)', async () => {
    const h = await hold();
    const holder = await holderOf(h.approvalId);
    const body = JSON.stringify({ approval_id: h.approvalId });
    const subkey = new Keyring([masterKey]).deriveSubkey('node-rpc');
    expect(await poke(holder.url, null, body)).to.equal(401);
    expect(await poke(holder.url, `Bearer ${'A'.repeat(43)}`, body)).to.equal(401);
    expect(await poke(holder.url, `Bearer ${nodeToken(subkey, 'node_000000000000000000000000')}`, body)).to.equal(401);
    // The host-rpc subkey's token over the node id is not a node token either.
    expect(await poke(holder.url, `Bearer ${nodeToken(new Keyring([masterKey]).deriveSubkey('host-rpc'), holder.id)}`, body)).to.equal(401);
    // Another deployment's master key.
    expect(await poke(holder.url, `Bearer ${nodeToken(new Keyring([randomBytes(32)]).deriveSubkey('node-rpc'), holder.id)}`, body)).to.equal(401);
    const get = await request(`${holder.url}/approvals/decided`);
    await get.body.dump();
    expect(get.statusCode).to.equal(405);
    // No host runs in this process: the host calls are refused too, with any token.
    expect(await request(`${holder.url}/exec`, { method: 'POST', body: '{}', headers: { authorization: `Bearer ${nodeToken(subkey, holder.id)}` } }).then(async (r) => {
      await r.body.dump();
      return r.statusCode;
    })).to.equal(401);
    expect((await apiB.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'deny' })).status).to.equal(200);
    expect(await released(h.answer)).to.equal(403);
  });

  it('garbage with the right token is a 4xx, never a 5xx; a poke for an undecided approval releases nothing', async () => {
    const h = await hold();
    const holder = await holderOf(h.approvalId);
    const auth = `Bearer ${nodeToken(new Keyring([masterKey]).deriveSubkey('node-rpc'), holder.id)}`;
    for (const body of ['', 'null', '[]', '"apr"', '{', '{"approval_id":5}', '{"approval_id":"apr_../../x"}', '{"approval_id":"env_000000000000000000000000"}', '\u0000\u00ff']) {
      expect(await poke(holder.url, auth, body), JSON.stringify(body)).to.equal(400);
    }
    expect(await poke(holder.url, auth, Buffer.alloc(64 * 1024, 0x20))).to.equal(413);
    // An id nobody waits on: nothing to do, and the caller learns nothing of it.
    expect(await poke(holder.url, auth, JSON.stringify({ approval_id: `apr_${'0'.repeat(24)}` }))).to.equal(204);
    // The held approval, still pending: the holder reads it again and keeps holding.
    expect(await poke(holder.url, auth, JSON.stringify({ approval_id: h.approvalId }))).to.equal(204);
    const settled = await Promise.race([h.answer, new Promise((r) => setTimeout(() => r('held'), 300))]);
    expect(settled).to.equal('held');
    expect(arrived.has(h.path)).to.equal(false);
    expect((await apiB.get(`/v1/approvals/${h.approvalId}`)).body.status).to.equal('pending');
    expect((await apiB.post(`/v1/approvals/${h.approvalId}/decision`, { decision: 'deny' })).status).to.equal(200);
    expect(await released(h.answer)).to.equal(403);
    expect(arrived.has(h.path)).to.equal(false);
  });
});
