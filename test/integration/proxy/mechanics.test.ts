import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createNetServer, connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { once } from 'node:events';
import { ProxyAgent, request } from 'undici';
import { generateCa, type CaMaterial } from '../../../certs/ca.js';
import { createLeafIssuer } from '../../../certs/leaf.js';
import { createSniCallback, prepareMitmCaDir } from '../../../certs/mitm.js';
import { silentLogger } from '../../../lib/log.js';
import { createUpstream, type Upstream } from '../../../proxy/upstream.js';
import { createPipeline, type AuditEntry, type GatewayPorts, type PolicyDecision, type ApprovalOutcome } from '../../../proxy/pipeline.js';
import { startGatewayProxy } from '../../../proxy/gateway-proxy.js';
import type { Credential } from '../../../proxy/credentials.js';
import { startFakeUpstream, type FakeUpstream } from '../../helpers/upstream.js';
import { rawConnect } from '../../helpers/proxy-client.js';

const ENV = 'env_0123456789abcdef01234567';
const ID = { environmentId: ENV, developerId: 'dev_000000000000000000000001' };
const PLACEHOLDER = `svcph_${'ab'.repeat(16)}`;
const REAL = 'sk_live_real_value_42';

/**
 * The proxy's mechanics with real TLS (our CA, a leaf per host), a real local HTTPS
 * upstream behind GATEWAY_UPSTREAM_OVERRIDES-style overrides, and undici's ProxyAgent as
 * the agent. The domain ports (policy, approvals, audit) are small in-test
 * implementations here; the service-level suite drives the real ones.
 */
describe('gateway proxy mechanics', function () {
  this.timeout(20000);
  let dir: string;
  let ca: CaMaterial;
  let up: FakeUpstream;
  let upstream: Upstream;
  let proxy: { port: number; close(): Promise<void> };
  const audit: AuditEntry[] = [];
  let decision: PolicyDecision = { decision: 'allow', reason: 'rule', matched_rules: [0], grant: null };
  let approvalOutcome: Promise<ApprovalOutcome> = Promise.resolve({ status: 'approved', grant_id: null });
  const approvals: unknown[] = [];
  /** While set, the audit port does not "commit" until it resolves (or rejects). */
  let auditGate: Promise<void> | null = null;
  let onAudit: (() => void) | null = null;
  const allowed = new Set(['api.stripe.com', 'other.example.com', 'dead.example.com']);

  const secret: Credential = {
    token: PLACEHOLDER, connector: 'secret:STRIPE', kind: 'secret', infrastructure: false,
    hostAllowed: (h, port) => h === 'api.stripe.com' && port === 443, value: () => REAL, allowMinting: false,
    // The Authorization header, and (as a secret's inject list `json:key` would) the JSON field `key`.
    slots: [{ in: 'authorization' }, { in: 'json', path: ['key'] }],
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-proxy-'));
    ca = await generateCa();
    const issuer = await createLeafIssuer(ca);
    up = await startFakeUpstream();
    // A port that refuses connections: listen, note it, close.
    const closed = createNetServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    upstream = createUpstream({
      overrides: {
        'api.stripe.com': { host: '127.0.0.1', port: up.port },
        'other.example.com': { host: '127.0.0.1', port: up.port },
        'dead.example.com': { host: '127.0.0.1', port: deadPort },
      },
      allowPrivate: false,
      extraCa: up.ca.certPem,
    });
    const ports: GatewayPorts = {
      egressAllows: async (_id, host, _port) => allowed.has(host),
      credentials: async () => ({ byToken: new Map([[PLACEHOLDER, secret]]) }),
      decide: async () => decision,
      requestApproval: async (_id, req) => {
        approvals.push(req);
        return { id: 'apr_000000000000000000000001' };
      },
      waitForDecision: () => approvalOutcome,
      audit: async (e) => {
        audit.push(e);
        onAudit?.();
        if (auditGate) await auditGate;
      },
    };
    const pipeline = createPipeline({ ports, upstream, log: silentLogger, managementTargets: new Set(['127.0.0.1:1']) });
    proxy = await startGatewayProxy({
      host: '127.0.0.1', port: 0, sslCaDir: await prepareMitmCaDir(dir, ca), sni: createSniCallback(issuer),
      authenticate: async (u, p) => (u === ENV && p === 'pw' ? ID : null),
      egressAllows: ports.egressAllows, credentials: ports.credentials, pipeline, upstream, audit: ports.audit, log: silentLogger,
      managementTargets: new Set(['127.0.0.1:1']),
    });
  });
  after(async () => {
    await proxy.close();
    await upstream.close();
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    audit.length = 0;
    up.seen.length = 0;
    approvals.length = 0;
    decision = { decision: 'allow', reason: 'rule', matched_rules: [0], grant: null };
    approvalOutcome = Promise.resolve({ status: 'approved', grant_id: null });
    auditGate = null;
    onAudit = null;
  });

  /** Waits (up to 5 s) until n entries are written; then there must be exactly n. */
  async function auditWritten(n = 1) {
    await until(() => audit.length >= n);
    expect(audit).to.have.length(n);
  }

  /** Polls `cond` every 10 ms until it holds or `ms` pass (the caller asserts after). */
  async function until(cond: () => boolean, ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  /**
   * A barrier for "nothing more happens": one more request, through a new connection,
   * answered and audited. Whatever an earlier exchange still had queued (a second audit
   * entry, say) runs on the same event loop before this whole round trip completes.
   */
  async function barrier(): Promise<void> {
    const respond = up.respond;
    up.respond = (_req, res) => res.end('barrier');
    const dispatcher = agent();
    try {
      const before = audit.length;
      const r = await request('https://other.example.com/barrier', { dispatcher });
      expect(await r.body.text()).to.equal('barrier');
      await until(() => audit.some((e, i) => i >= before && e.path === '/barrier'));
    } finally {
      up.respond = respond;
      await dispatcher.close();
    }
  }

  const agent = (password = 'pw') =>
    new ProxyAgent({ uri: `http://127.0.0.1:${proxy.port}`, token: `Basic ${Buffer.from(`${ENV}:${password}`).toString('base64')}`, requestTls: { ca: ca.certPem } });

  it('407 proxy_auth_required on CONNECT without valid credentials', async () => {
    let err: unknown;
    try {
      await request('https://api.stripe.com/v1/x', { dispatcher: agent('wrong') });
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.match(/407/);
  });

  it('intercepts TLS with our CA, swaps the placeholder, strips the task header, and audits', async () => {
    const r = await request('https://api.stripe.com/v1/charges?expand=x', {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${PLACEHOLDER}`, 'x-service-task-id': 'task-1' },
    });
    expect(r.statusCode).to.equal(200);
    await r.body.json();
    await auditWritten();
    expect(up.seen).to.have.length(1);
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${REAL}`);
    expect(up.seen[0]!.headers).to.not.have.property('x-service-task-id');
    expect(up.seen[0]!.headers.host).to.equal('api.stripe.com');
    expect(audit).to.have.length(1);
    expect(audit[0]).to.include({ connector: 'secret:STRIPE', credential: 'secret', decision: 'allow', reason: 'rule', status: 200, upstream_status: 200, host: 'api.stripe.com' });
    expect(JSON.stringify(audit)).to.not.include(REAL);
  });

  it('an agent that keeps its TLS sessions resumes one on its next tunnel (no full handshake per new connection), intercepted, swapped and audited the same', async () => {
    const tunnel = async (session?: Buffer) => {
      const { head, socket } = await rawConnect({ proxy_url: `http://${ENV}:pw@127.0.0.1:${proxy.port}`, ca_cert_pem: ca.certPem }, 'api.stripe.com:443');
      expect(head).to.match(/^HTTP\/1\.1 200 /);
      const tls = tlsConnect({ socket, servername: 'api.stripe.com', ca: ca.certPem, ...(session ? { session } : {}) });
      const ticket = new Promise<Buffer>((r) => tls.once('session', r));
      await once(tls, 'secureConnect');
      const reused = tls.isSessionReused();
      let answer = '';
      tls.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      tls.write(`GET /v1/x HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`);
      await once(tls, 'end');
      tls.destroy();
      return { reused, answer, ticket };
    };
    const first = await tunnel();
    expect(first.reused).to.equal(false);
    const second = await tunnel(await first.ticket);
    expect(second.reused, 'the second tunnel resumed the first one\'s session').to.equal(true);
    for (const t of [first, second]) expect(t.answer).to.match(/^HTTP\/1\.1 200 /);
    await auditWritten(2);
    expect(up.seen.map((r) => r.headers.authorization)).to.deep.equal([`Bearer ${REAL}`, `Bearer ${REAL}`]);
  });

  it('swaps inside a JSON body field the secret names and keeps keep-alive working across requests', async () => {
    const a = agent();
    for (let i = 0; i < 3; i++) {
      const r = await request('https://api.stripe.com/v1/things', {
        dispatcher: a, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: PLACEHOLDER, i }),
      });
      expect(r.statusCode).to.equal(200);
      await r.body.text();
    }
    expect(up.seen.map((s) => JSON.parse(s.body.toString()).key)).to.deep.equal([REAL, REAL, REAL]);
  });

  it('blocks a placeholder sent to a host outside allowed_hosts: 403 secret_host_not_allowed, upstream never sees it', async () => {
    const r = await request('https://other.example.com/collect', { dispatcher: agent(), headers: { 'x-leak': PLACEHOLDER } });
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('secret_host_not_allowed');
    expect(await r.body.json()).to.deep.include({ error: 'secret_host_not_allowed' });
    expect(up.seen).to.have.length(0);
    expect(audit[0]).to.include({ decision: 'deny', reason: 'secret_host_not_allowed' });
  });

  it('403 egress_denied for a host off the allowlist, with JSON and header', async () => {
    const r = await request('https://not-allowed.example.org/', { dispatcher: agent() });
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('egress_denied');
    expect(up.seen).to.have.length(0);
  });

  it('403 policy_denied on a deny decision', async () => {
    decision = { decision: 'deny', reason: 'deny_rule', matched_rules: [1], grant: null };
    const r = await request('https://api.stripe.com/v1/charges', { dispatcher: agent(), method: 'POST', headers: { authorization: `Bearer ${PLACEHOLDER}` }, body: 'amount=1' });
    expect(r.statusCode).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal('policy_denied');
    expect(up.seen).to.have.length(0);
    expect(audit[0]).to.include({ decision: 'deny', reason: 'deny_rule' });
  });

  it('holds an ask until approved, then forwards the buffered body with the real value', async () => {
    decision = { decision: 'ask', reason: 'high_risk', matched_rules: [], max_scope: 'permanent', grant: null };
    let approve!: (o: ApprovalOutcome) => void;
    approvalOutcome = new Promise((r) => (approve = r));
    const pending = request('https://api.stripe.com/v1/charges', {
      dispatcher: agent(), method: 'POST', headers: { authorization: `Bearer ${PLACEHOLDER}`, 'content-type': 'application/x-www-form-urlencoded', 'x-service-session-id': 's1' },
      body: 'amount=500&currency=usd',
    });
    // The signal: the approval was asked for (the request is held).
    while (approvals.length === 0) await new Promise((r) => setImmediate(r));
    expect(up.seen).to.have.length(0);
    expect(approvals).to.have.length(1);
    expect(approvals[0]).to.include({ connector: 'secret:STRIPE', category: 'pay', method: 'POST', host: 'api.stripe.com', path: '/v1/charges', session_id: 's1', max_scope: 'permanent' });
    approve({ status: 'approved', grant_id: 'grt_000000000000000000000001' });
    const r = await pending;
    expect(r.statusCode).to.equal(200);
    await r.body.text();
    expect(up.seen[0]!.body.toString()).to.equal('amount=500&currency=usd');
    expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${REAL}`);
    await auditWritten();
    expect(audit[0]).to.include({ decision: 'ask', approval_id: 'apr_000000000000000000000001', grant_id: 'grt_000000000000000000000001', status: 200 });
  });

  it('403 approval_denied and approval_expired', async () => {
    decision = { decision: 'ask', reason: 'ask_rule', matched_rules: [0], max_scope: 'once', grant: null };
    for (const [status, code] of [['denied', 'approval_denied'], ['expired', 'approval_expired']] as const) {
      approvalOutcome = Promise.resolve({ status, grant_id: null });
      const r = await request('https://api.stripe.com/v1/charges', { dispatcher: agent(), method: 'POST', headers: { authorization: `Bearer ${PLACEHOLDER}` }, body: 'a=1' });
      expect(r.statusCode).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal(code);
      await r.body.text();
    }
    expect(up.seen).to.have.length(0);
  });

  it('streams a 1 MiB response of a request without a credential', async () => {
    up.respond = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(1024 * 1024, 7));
    };
    try {
      const r = await request('https://api.stripe.com/big', { dispatcher: agent() });
      expect((await r.body.arrayBuffer()).byteLength).to.equal(1024 * 1024);
      await auditWritten();
      expect(audit[0]).to.include({ credential: 'none', reason: 'no_credential', bytes_out: 1024 * 1024 });
    } finally {
      up.respond = (req, res) => res.end(JSON.stringify({ url: req.url }));
    }
  });

  describe('forwarding the answer', () => {
    const echo = (req: { url: string }, res: import('node:http').ServerResponse) => res.end(JSON.stringify({ url: req.url }));
    afterEach(() => {
      up.respond = echo;
    });

    it('a slow reader gets a large response whole (32 MiB, more where the kernel\'s socket buffers could hold that), and the upstream waits for it (paused, not buffered in the gateway)', async () => {
      // The kernel buffers part of it on each of the two hops (upstream → gateway, gateway →
      // agent), up to the machine's TCP buffer maxima: 4 MiB + 32 MiB per hop on one CI VM,
      // enough to hold all of 32 MiB with nothing buffered by the gateway. The response is made
      // four times what the two hops can hold at most, so the upstream being held shows.
      const tcpMax = (f: string) => Number(readFileSync(`/proc/sys/net/ipv4/${f}`, 'utf8').trim().split(/\s+/)[2] ?? 0);
      const MiB = 1024 * 1024;
      const size = Math.max(32 * MiB, Math.ceil((4 * (tcpMax('tcp_rmem') + tcpMax('tcp_wmem'))) / MiB) * MiB);
      let upstreamDone = false;
      let sent = 0;
      let lastProgress = performance.now();
      up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
        const chunk = Buffer.alloc(256 * 1024, 9);
        const pump = () => {
          lastProgress = performance.now();
          while (sent < size) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end(() => (upstreamDone = true));
        };
        pump();
      };
      const r = await request('https://api.stripe.com/huge', { dispatcher: agent() });
      expect(r.statusCode).to.equal(200);
      // The condition waited on: the upstream finished, or it has been held at a 'drain' that
      // does not come (no write got through for 300 ms, while on loopback a chunk takes well
      // under a millisecond). A gateway that buffered would let it run to the end first.
      await until(() => upstreamDone || performance.now() - lastProgress > 300, 15_000);
      expect(upstreamDone, 'the upstream could not finish while the agent read nothing').to.equal(false);
      // Held at what the socket buffers of the two hops take (8 MiB measured on one machine, up
      // to 72 MiB where the maxima are 32 + 4 MiB), far from the end.
      expect(sent, 'what the upstream could write before it was held').to.be.below(size * 0.75);
      let got = 0;
      for await (const c of r.body) got += (c as Buffer).length;
      expect(got).to.equal(size);
      await auditWritten();
      expect(audit[0]).to.include({ status: 200, upstream_status: 200, bytes_out: size });
    });

    it('the agent going away mid-body aborts the upstream request; one audit entry with what was sent', async () => {
      let upstreamClosed = false;
      let timer: NodeJS.Timeout | undefined;
      up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        timer = setInterval(() => res.write('x'.repeat(1024)), 5);
        res.on('close', () => {
          upstreamClosed = true;
          clearInterval(timer);
        });
      };
      const dispatcher = agent();
      try {
        const r = await request('https://api.stripe.com/stream', { dispatcher });
        for await (const _c of r.body) break; // one chunk, then the agent is gone
        await dispatcher.destroy();
        await until(() => upstreamClosed);
        expect(upstreamClosed, 'the upstream request was aborted').to.equal(true);
        await auditWritten();
        await barrier();
        expect(audit.filter((e) => e.path === '/stream'), 'one entry for the request').to.have.length(1);
        expect(audit[0]).to.include({ status: 200, upstream_status: 200 });
        expect(audit[0]!.bytes_out).to.be.greaterThan(0);
      } finally {
        clearInterval(timer);
      }
    });

    it('the agent going away before the answer starts aborts the upstream request; audited 499 client_disconnected_after_forward (the upstream had it)', async () => {
      let upstreamClosed = false;
      up.respond = (_req, res) => {
        res.on('close', () => (upstreamClosed = true)); // never answers
      };
      const dispatcher = agent();
      const pending = request('https://api.stripe.com/slow', { dispatcher }).catch(() => null);
      await until(() => up.seen.length > 0);
      expect(up.seen, 'the request reached the upstream').to.have.length(1);
      await dispatcher.destroy();
      await pending;
      await until(() => upstreamClosed);
      expect(upstreamClosed, 'the upstream request was aborted').to.equal(true);
      await auditWritten();
      expect(audit[0]).to.include({ status: 499, reason: 'client_disconnected_after_forward', upstream_status: null });
    });

    it('an upstream that dies mid-body: the agent gets a cut-off response, not a complete one; one audit entry', async () => {
      up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100_000 });
        res.write('y'.repeat(1000), () => setTimeout(() => res.write('y'.repeat(1000), () => setTimeout(() => res.socket?.destroy(), 20)), 20));
      };
      const r = await request('https://api.stripe.com/dies', { dispatcher: agent() });
      expect(r.statusCode).to.equal(200);
      let failed = false;
      try {
        await r.body.arrayBuffer();
      } catch {
        failed = true;
      }
      expect(failed, 'reading the cut-off body fails').to.equal(true);
      await auditWritten();
      expect(audit[0]).to.include({ status: 200, upstream_status: 200 });
    });

    it('an upstream that dies after its first piece: the agent gets no answer at all (the last piece waits for the audit commit); one audit entry', async () => {
      up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100_000 });
        res.write('y'.repeat(1000), () => setTimeout(() => res.socket?.destroy(), 20));
      };
      let failed = false;
      try {
        const r = await request('https://api.stripe.com/dies', { dispatcher: agent() });
        await r.body.arrayBuffer();
      } catch {
        failed = true;
      }
      expect(failed, 'never a complete answer').to.equal(true);
      await auditWritten();
      expect(audit[0]).to.include({ status: 200, upstream_status: 200 });
    });

    describe('chunk framing written by the gateway (one chunk per event loop turn)', () => {
      /** A TLS connection through a CONNECT tunnel, read as raw bytes, with a strict HTTP/1.1 answer reader. */
      async function rawAgent(): Promise<{ send(text: string): void; answer(): Promise<RawAnswer>; raw(): Buffer; close(): void }> {
        const sock: Socket = netConnect(proxy.port, '127.0.0.1');
        await once(sock, 'connect');
        sock.write(`CONNECT api.stripe.com:443 HTTP/1.1\r\nHost: api.stripe.com:443\r\nProxy-Authorization: Basic ${Buffer.from(`${ENV}:pw`).toString('base64')}\r\n\r\n`);
        let head = '';
        while (!head.includes('\r\n\r\n')) head += String((await once(sock, 'data'))[0]);
        expect(head).to.match(/^HTTP\/1\.1 200 /);
        const conn = tlsConnect({ socket: sock, servername: 'api.stripe.com', ca: ca.certPem });
        await once(conn, 'secureConnect');
        let all = Buffer.alloc(0);
        let pos = 0;
        let ended = false;
        let wake: (() => void) | null = null;
        conn.on('data', (d: Buffer) => {
          all = Buffer.concat([all, d]);
          wake?.();
        });
        conn.on('end', () => {
          ended = true;
          wake?.();
        });
        conn.on('error', () => undefined);
        const more = async () => {
          if (ended) throw new Error('the connection ended before the answer did');
          await new Promise<void>((r) => (wake = r));
          wake = null;
        };
        const line = async (): Promise<string> => {
          for (;;) {
            const at = all.indexOf('\r\n', pos);
            if (at >= 0) {
              const l = all.subarray(pos, at).toString('latin1');
              pos = at + 2;
              return l;
            }
            await more();
          }
        };
        const take = async (n: number): Promise<Buffer> => {
          while (all.length - pos < n) await more();
          pos += n;
          return all.subarray(pos - n, pos);
        };
        return {
          send: (text) => conn.write(text),
          raw: () => all,
          close: () => conn.destroy(),
          async answer() {
            const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(await line())?.[1]);
            const headers: Record<string, string> = {};
            for (let h = await line(); h !== ''; h = await line()) {
              const colon = h.indexOf(':');
              headers[h.slice(0, colon).toLowerCase()] = h.slice(colon + 1).trim();
            }
            const chunks: number[] = [];
            const parts: Buffer[] = [];
            if (headers['transfer-encoding'] === 'chunked') {
              for (;;) {
                const size = await line();
                expect(size, 'a chunk size line is bare hex (no extensions, no padding)').to.match(/^[0-9a-f]+$/);
                const n = parseInt(size, 16);
                chunks.push(n);
                if (n === 0) {
                  expect(await line(), 'no trailers: the last chunk ends the answer').to.equal('');
                  break;
                }
                parts.push(Buffer.from(await take(n)));
                expect((await take(2)).toString('latin1'), 'a chunk ends with CRLF').to.equal('\r\n');
              }
            } else if (headers['content-length'] !== undefined) {
              parts.push(Buffer.from(await take(Number(headers['content-length']))));
            } else {
              while (!ended) await more().catch(() => undefined);
              parts.push(all.subarray(pos));
              pos = all.length;
            }
            return { status, headers, chunks, body: Buffer.concat(parts) };
          },
        };
      }
      interface RawAnswer { status: number; headers: Record<string, string>; chunks: number[]; body: Buffer }

      /** 48 pieces of 16 KiB, written a few per turn, with the real value cut across piece boundaries. */
      const PIECE = 16 * 1024;
      function piecesWithValue(): Buffer[] {
        const body = Buffer.alloc(48 * PIECE, 'a');
        for (const at of [3 * PIECE - 5, 11 * PIECE - 1, 30 * PIECE - REAL.length + 1, 48 * PIECE - REAL.length]) body.write(REAL, at, 'latin1');
        return Array.from({ length: 48 }, (_, i) => body.subarray(i * PIECE, (i + 1) * PIECE));
      }
      const expected = Buffer.from(Buffer.concat(piecesWithValue()).toString('latin1').split(REAL).join(PLACEHOLDER), 'latin1');
      function writeInTurns(res: import('node:http').ServerResponse, pieces: Buffer[]): void {
        let i = 0;
        const next = () => {
          for (let k = 0; k < 5 && i < pieces.length; k++) res.write(pieces[i++]);
          if (i < pieces.length) setImmediate(next);
          else res.end();
        };
        next();
      }

      it('a redacted answer in many pieces: exact chunk framing, the value replaced across boundaries, the connection kept alive for the next request', async () => {
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 48 * PIECE });
          writeInTurns(res, piecesWithValue());
        };
        const a = await rawAgent();
        try {
          a.send(`GET /v1/files/1 HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${PLACEHOLDER}\r\n\r\n`);
          const first = await a.answer();
          expect(first.status).to.equal(200);
          expect(first.headers['transfer-encoding'], 'the length changes: chunked').to.equal('chunked');
          expect(first.headers).to.not.have.property('content-length');
          expect(first.body.equals(expected), 'the body, the value replaced by the placeholder everywhere').to.equal(true);
          expect(first.chunks.length, 'framed in several chunks, not one per 16 KiB piece nor one buffered whole').to.be.within(3, 48);
          expect(first.chunks.at(-1)).to.equal(0);
          // The same connection answers again: the framing ended exactly where it said.
          a.send(`GET /v1/files/2 HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${PLACEHOLDER}\r\n\r\n`);
          const second = await a.answer();
          expect(second.status).to.equal(200);
          expect(second.body.equals(expected)).to.equal(true);
          expect(a.raw().includes(REAL), 'the real value is nowhere on the wire').to.equal(false);
          await auditWritten(2);
          expect(audit.map((e) => [e.status, e.redacted, e.bytes_out])).to.deep.equal([[200, true, 48 * PIECE], [200, true, 48 * PIECE]]);
        } finally {
          a.close();
        }
      });

      it('an empty answer of unknown length is one terminating chunk, with and without a credential; keep-alive holds', async () => {
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end();
        };
        const a = await rawAgent();
        try {
          for (const auth of [`Authorization: Bearer ${PLACEHOLDER}\r\n`, '']) {
            a.send(`GET /v1/empty HTTP/1.1\r\nHost: api.stripe.com\r\n${auth}\r\n`);
            const r = await a.answer();
            expect(r).to.deep.include({ status: 200, chunks: [0] });
            expect(r.body.length).to.equal(0);
          }
        } finally {
          a.close();
        }
      });

      it('an upstream\'s chunked answer without a credential is re-framed exactly too', async () => {
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          writeInTurns(res, piecesWithValue());
        };
        const a = await rawAgent();
        try {
          a.send('GET /v1/plain HTTP/1.1\r\nHost: api.stripe.com\r\n\r\n');
          const r = await a.answer();
          expect(r.headers['transfer-encoding']).to.equal('chunked');
          expect(r.body.equals(Buffer.concat(piecesWithValue())), 'untouched: nothing was swapped in').to.equal(true);
          await auditWritten();
          expect(audit[0]).to.include({ credential: 'none', status: 200, bytes_out: 48 * PIECE });
        } finally {
          a.close();
        }
      });

      it('an HTTP/1.0 agent gets the redacted answer delimited by the end of the connection (no chunk framing)', async () => {
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          writeInTurns(res, piecesWithValue());
        };
        const a = await rawAgent();
        try {
          a.send(`GET /v1/files/1 HTTP/1.0\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${PLACEHOLDER}\r\n\r\n`);
          const r = await a.answer();
          expect(r.status).to.equal(200);
          expect(r.headers).to.not.have.property('transfer-encoding');
          expect(r.body.equals(expected)).to.equal(true);
        } finally {
          a.close();
        }
      });
    });

    describe('the answer completes only after its audit entry is committed (issue 10)', () => {
      it('a Content-Length answer: its last byte waits for the commit', async () => {
        let release!: () => void;
        auditGate = new Promise<void>((r) => (release = r));
        const audited = new Promise<void>((r) => (onAudit = r));
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 200_000 });
          res.write(Buffer.alloc(100_000, 1), () => setTimeout(() => res.end(Buffer.alloc(100_000, 2)), 5));
        };
        const r = await request('https://other.example.com/cl', { dispatcher: agent() });
        let received = 0;
        let complete = false;
        r.body.on('data', (d: Buffer) => (received += d.length));
        const done = r.body.arrayBuffer().then(() => (complete = true)).catch(() => {});
        await audited; // the upstream's answer is all in and the entry is being committed
        await new Promise((res) => setImmediate(res));
        expect(complete, 'complete before the commit').to.equal(false);
        expect(received).to.be.below(200_000);
        release();
        await done;
        expect(complete).to.equal(true);
      });

      it('a chunked stream (server-sent events): each event goes through at once; only the end waits', async () => {
        for (const headers of [{} as Record<string, string>, { authorization: `Bearer ${PLACEHOLDER}` }]) {
          let next!: () => void;
          const more = new Promise<void>((r) => (next = r));
          up.respond = (_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.write('data: one\n\n');
            void more.then(() => res.end('data: two\n\n'));
          };
          const host = headers.authorization ? 'api.stripe.com' : 'other.example.com';
          const r = await request(`https://${host}/sse`, { dispatcher: agent(), headers });
          const chunks: string[] = [];
          let gotFirst!: () => void;
          const first = new Promise<void>((res) => (gotFirst = res));
          const ended = new Promise<void>((res) => r.body.once('end', () => res()));
          r.body.on('data', (d: Buffer) => {
            chunks.push(String(d));
            gotFirst();
          });
          await first; // the upstream has not ended: it waits for `next`
          expect(chunks.join(''), host).to.equal('data: one\n\n');
          next();
          await ended;
          expect(chunks.join(''), host).to.equal('data: one\n\ndata: two\n\n');
        }
      });

      it('the audit store refuses the entry: a forwarded answer is cut, a refusal becomes 503 gateway_unavailable', async () => {
        auditGate = Promise.reject(Object.assign(new Error('store down'), { code: 'ECONNREFUSED' }));
        auditGate.catch(() => {});
        up.respond = (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': 11 });
          res.end('{"ok":true}');
        };
        let cut = false;
        try {
          const r = await request('https://other.example.com/cut', { dispatcher: agent() });
          await r.body.text();
        } catch {
          cut = true;
        }
        expect(cut, 'never a complete answer').to.equal(true);
        const refused = await request('https://not-allowed.example.net/x', { dispatcher: agent() }).catch((e: Error) => e);
        if (!(refused instanceof Error)) {
          expect(refused.statusCode).to.equal(503);
          expect(((await refused.body.json()) as { error: string }).error).to.equal('gateway_unavailable');
        }
      });
    });

    it('an upstream that refuses the connection: 502 upstream_unreachable, audited', async () => {
      const r = await request('https://dead.example.com/x', { dispatcher: agent() });
      expect(r.statusCode).to.equal(502);
      expect(r.headers['x-gateway-error']).to.equal('upstream_unreachable');
      expect(await r.body.json()).to.include({ error: 'upstream_unreachable' });
      await auditWritten();
      expect(audit[0]).to.include({ status: 502, reason: 'upstream_unreachable', upstream_status: null });
    });

    it('regression: a textual body over the 1 MiB scan limit lost what flowed before undici read it (502); it is streamed upstream whole', async () => {
      const big = Buffer.from(JSON.stringify({ pad: 'z'.repeat(3 * 1024 * 1024) }));
      up.respond = (req, res) => res.end(JSON.stringify({ n: req.body.length, same: req.body.equals(big) }));
      const r = await request('https://api.stripe.com/v1/upload', {
        method: 'POST', dispatcher: agent(), body: big, headers: { 'content-type': 'application/json', authorization: `Bearer ${PLACEHOLDER}` },
      });
      expect(r.statusCode).to.equal(200);
      expect(await r.body.json()).to.deep.equal({ n: big.length, same: true });
      expect(up.seen[0]!.headers.authorization).to.equal(`Bearer ${REAL}`);
      await auditWritten();
      expect(audit[0]).to.include({ status: 200, bytes_in: big.length, credential: 'secret' });
    });

    it('regression: a binary body (never scanned) lost its start the same way; it is streamed upstream whole, the header credential swapped', async () => {
      const bin = Buffer.alloc(2 * 1024 * 1024 + 7);
      for (let i = 0; i < bin.length; i++) bin[i] = (i * 31) & 0xff;
      up.respond = (req, res) => res.end(JSON.stringify({ n: req.body.length, same: req.body.equals(bin) }));
      const r = await request('https://api.stripe.com/v1/files', {
        method: 'POST', dispatcher: agent(), body: bin, headers: { 'content-type': 'application/octet-stream', authorization: `Bearer ${PLACEHOLDER}` },
      });
      expect(r.statusCode).to.equal(200);
      expect(await r.body.json()).to.deep.equal({ n: bin.length, same: true });
      await auditWritten();
      expect(audit[0]).to.include({ status: 200, bytes_in: bin.length });
    });

    it('informational 1xx answers are skipped: the agent gets the final answer', async () => {
      up.respond = (_req, res) => {
        res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        res.writeHead(201, { 'content-type': 'application/json', 'x-upstream': 'yes' });
        res.end('{"created":true}');
      };
      const r = await request('https://api.stripe.com/created', { dispatcher: agent() });
      expect(r.statusCode).to.equal(201);
      expect(r.headers['x-upstream']).to.equal('yes');
      expect(await r.body.json()).to.deep.equal({ created: true });
      await auditWritten();
      expect(audit[0]).to.include({ status: 201, upstream_status: 201 });
    });
  });

  it('refuses private destinations after resolution when not allowed', async () => {
    allowed.add('localhost');
    try {
      const r = await request('https://localhost/', { dispatcher: agent() });
      expect(r.statusCode).to.equal(403);
      expect(r.headers['x-gateway-error']).to.equal('egress_denied');
    } finally {
      allowed.delete('localhost');
    }
  });
});
