import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ProxyAgent, request, fetch as undiciFetch } from 'undici';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { gmail as gmailClient, auth as googleAuth } from '@googleapis/gmail';
import { WebClient, LogLevel, type FetchFunction } from '@slack/web-api';
import { freshDatabaseUrl } from '../helpers/db.js';
import { client, type ApiClient } from '../helpers/service.js';
import { startChildService, ROOT, type ChildService } from '../helpers/child-service.js';
import { startFakeApis, type FakeApis } from '../helpers/fake-apis.js';

const GOOGLE_TOKEN = 'ya29.a0AfB_realGoogleAccessTokenNeverInTheVm';
const SLACK_TOKEN = 'xoxp-1111111111-2222222222-3333333333-realslacktoken0123456789';
const STRIPE_KEY = 'sk_live_51RealStripeKeyNeverSeenByTheVm';

interface AuditRecord {
  id: string;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  credential: string;
  decision: string;
  reason: string;
  approval_id: string | null;
  status: number;
  upstream_status: number | null;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.once('error', reject);
    p.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Real clients through the gateway of the whole service started as `npm start` starts it
 * (a child process, configured only by environment variables), reached the way an agent
 * outside our VMs reaches it: GET /v1/environments/{id}/gateway gives the proxy URL (with
 * this environment's proxy credentials) and the CA. The APIs are one local HTTPS server
 * (test/helpers/fake-apis.ts) behind GATEWAY_UPSTREAM_OVERRIDES, trusted through
 * GATEWAY_UPSTREAM_CA_FILE; it accepts only the real tokens, as the real APIs would.
 *
 * Every case checks the classification docs/classification.md gives (through the audit
 * log: connector, category, decision, reason) and that the API saw the real token and
 * never a placeholder.
 */
describe('real clients through the gateway (service as a process)', function () {
  this.timeout(30000);
  let dir: string;
  let apis: FakeApis;
  let db: { url: string; drop(): Promise<void> };
  let svc: ChildService;
  let api: ApiClient;
  let envId: string;
  let gateway: { proxy_url: string; ca_cert_pem: string };
  let caFile: string;
  const ph: Record<'GMAIL_TOKEN' | 'SLACK_TOKEN' | 'STRIPE_KEY', string> = { GMAIL_TOKEN: '', SLACK_TOKEN: '', STRIPE_KEY: '' };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-clients-'));
    apis = await startFakeApis({ google: GOOGLE_TOKEN, slack: SLACK_TOKEN, stripe: STRIPE_KEY });
    writeFileSync(join(dir, 'upstream-ca.pem'), apis.up.ca.certPem);
    db = freshDatabaseUrl();
    const key = `sk_${randomBytes(20).toString('hex')}`;
    const at = `127.0.0.1:${apis.port}`;
    svc = await startChildService({
      API_PORT: '0',
      PROXY_PORT: '0',
      DATA_DIR: join(dir, 'data'),
      DATABASE_URL: db.url,
      GATEWAY_BOOTSTRAP_API_KEY: key,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
      GATEWAY_TEST_CLOCK: '1',
      GATEWAY_RUNTIME: 'none',
      GATEWAY_UPSTREAM_OVERRIDES: `gmail.googleapis.com=${at},www.googleapis.com=${at},slack.com=${at},api.stripe.com=${at}`,
      GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
      LOG_LEVEL: 'info',
    });
    api = client(svc.ready.api_url, key);

    // No egress_allow: the secrets' hosts are on the effective allowlist by themselves.
    const created = await api.post('/v1/environments', {
      end_user_id: 'clients-user',
      secrets: {
        GMAIL_TOKEN: { value: GOOGLE_TOKEN, allowed_hosts: ['gmail.googleapis.com', 'www.googleapis.com'] },
        // Slack also takes the token as a form field: the secret names that place (docs/secrets-egress.md).
        SLACK_TOKEN: { value: SLACK_TOKEN, allowed_hosts: ['slack.com'], inject: ['form:token'] },
        STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] },
      },
    });
    expect(created.status, created.text).to.equal(201);
    envId = created.body.id;
    const g = await api.get(`/v1/environments/${envId}/gateway`);
    expect(g.status).to.equal(200);
    gateway = g.body;
    caFile = join(dir, 'gateway-ca.pem');
    writeFileSync(caFile, gateway.ca_cert_pem);
    for (const s of (await api.get(`/v1/environments/${envId}/secrets`)).body.data as { name: keyof typeof ph; placeholder: string }[]) ph[s.name] = s.placeholder;
    expect(Object.values(ph).every((p) => /^svcph_[0-9a-f]{32}$/.test(p))).to.equal(true);
    const policy = await api.put(`/v1/environments/${envId}/policy`, {
      rules: [
        { connector: 'secret:GMAIL_TOKEN', category: 'read', effect: 'allow' },
        { connector: 'secret:SLACK_TOKEN', category: 'read', effect: 'allow' },
        { connector: 'secret:STRIPE_KEY', category: 'read', effect: 'allow' },
      ],
    });
    expect(policy.status, policy.text).to.equal(200);
  });

  after(async () => {
    if (svc) expect(await svc.stop()).to.equal(0);
    await db?.drop();
    await apis?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  let earlier: Set<string>;
  beforeEach(async () => {
    apis.up.seen.length = 0;
    // Entries already in the log belong to earlier tests (each test waits for its own).
    earlier = new Set(((await api.get(`/v1/audit-log?environment_id=${envId}&limit=200`)).body.data as AuditRecord[]).map((e) => e.id));
  });

  afterEach(function () {
    // Whatever a test did, no placeholder ever reached an API.
    const everything = JSON.stringify(apis.up.seen.map((s) => ({ url: s.url, headers: s.headers, body: s.body.toString('latin1') })));
    for (const p of Object.values(ph)) expect(everything, this.currentTest?.title).to.not.include(p);
  });

  /** The audit entry this test caused that matches, waiting for the batched writer. */
  async function audited(match: (e: AuditRecord) => boolean): Promise<AuditRecord> {
    for (let i = 0; i < 200; i++) {
      const r = await api.get(`/v1/audit-log?environment_id=${envId}&limit=200`);
      const hit = (r.body.data as AuditRecord[]).find((e) => !earlier.has(e.id) && match(e));
      if (hit) return hit;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error('no matching audit entry');
  }

  async function pendingApproval(): Promise<{ id: string; connector: string; category: string; summary: string }> {
    for (let i = 0; i < 200; i++) {
      const r = await api.get(`/v1/approvals?status=pending&environment_id=${envId}`);
      if (r.body.data.length > 0) return r.body.data[0];
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error('no pending approval appeared');
  }

  async function approveOnce(expected: { connector: string; category: string }): Promise<string> {
    const a = await pendingApproval();
    expect(a).to.include(expected);
    const d = await api.post(`/v1/approvals/${a.id}/decision`, { decision: 'approve', scope: { kind: 'once' } });
    expect(d.status, d.text).to.equal(200);
    return a.id;
  }

  describe('curl (--proxy with credentials in the URL, --cacert)', () => {
    it('Stripe with `-u key:` (Basic auth, as in Stripe\'s docs): read allowed by rule, the API gets the real key', async () => {
      const r = await run('curl', ['-sS', '--proxy', gateway.proxy_url, '--cacert', caFile, '-u', `${ph.STRIPE_KEY}:`, '-w', '\n%{http_code}', 'https://api.stripe.com/v1/customers?limit=3']);
      expect(r.code, r.stderr).to.equal(0);
      const [body, status] = r.stdout.split(/\n(?=\d+$)/);
      expect(status).to.equal('200');
      expect(JSON.parse(body!)).to.include({ object: 'list' });
      const seen = apis.seenBy('api.stripe.com');
      expect(seen).to.have.length(1);
      expect(seen[0]!.headers.authorization).to.equal(`Basic ${Buffer.from(`${STRIPE_KEY}:`).toString('base64')}`);
      const e = await audited((x) => x.path.startsWith('/v1/customers'));
      expect(e).to.include({ method: 'GET', host: 'api.stripe.com', connector: 'secret:STRIPE_KEY', category: 'read', credential: 'secret', decision: 'allow', reason: 'rule', status: 200 });
    });

    it('a host off the allowlist: curl gets the gateway\'s 403 with X-Gateway-Error and a JSON body', async () => {
      const r = await run('curl', ['-sS', '-i', '--proxy', gateway.proxy_url, '--cacert', caFile, 'https://exfil.example.org/upload']);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/^HTTP\/1\.1 200 Connection Established/);
      expect(r.stdout).to.match(/HTTP\/1\.1 403 /);
      expect(r.stdout.toLowerCase()).to.include('x-gateway-error: egress_denied');
      expect(JSON.parse(r.stdout.slice(r.stdout.lastIndexOf('\r\n\r\n') + 4))).to.include({ error: 'egress_denied' });
      const e = await audited((x) => x.host === 'exfil.example.org');
      expect(e).to.include({ decision: 'deny', reason: 'egress_denied', credential: 'none', status: 403 });
    });
  });

  describe('undici ProxyAgent', () => {
    it('a Stripe payment is pay, held until approved through the API, then sent with the real key', async () => {
      const dispatcher = new ProxyAgent({ uri: gateway.proxy_url, requestTls: { ca: gateway.ca_cert_pem } });
      try {
        const held = request('https://api.stripe.com/v1/payment_intents', {
          dispatcher,
          method: 'POST',
          headers: { authorization: `Bearer ${ph.STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
          body: 'amount=2000&currency=usd',
        });
        const approvalId = await approveOnce({ connector: 'secret:STRIPE_KEY', category: 'pay' });
        const r = await held;
        expect(r.statusCode).to.equal(200);
        expect(await r.body.json()).to.include({ object: 'payment_intent', amount: 2000 });
        const seen = apis.seenBy('api.stripe.com');
        expect(seen).to.have.length(1);
        expect(seen[0]!.headers.authorization).to.equal(`Bearer ${STRIPE_KEY}`);
        const e = await audited((x) => x.path === '/v1/payment_intents');
        expect(e).to.include({ connector: 'secret:STRIPE_KEY', category: 'pay', decision: 'ask', reason: 'high_risk', approval_id: approvalId, status: 200 });
      } finally {
        await dispatcher.close();
      }
    });
  });

  describe('Python standard library (urllib.request with HTTPS_PROXY and SSL_CERT_FILE)', () => {
    it('Slack conversations.history posted with the token in the form body (a place the secret names) is a read (allowed); the token is swapped in the body', async () => {
      // As inside a VM: the variable holds the placeholder; proxy and CA come from the environment.
      const script = [
        'import os, sys, urllib.request, urllib.error',
        "data = ('token=%s&channel=C0123456789&limit=10' % os.environ['SLACK_TOKEN']).encode()",
        "req = urllib.request.Request('https://slack.com/api/conversations.history', data=data, method='POST')",
        "req.add_header('Content-Type', 'application/x-www-form-urlencoded')",
        'try:',
        '    with urllib.request.urlopen(req, timeout=10) as r:',
        '        print(r.status); print(r.read().decode())',
        'except urllib.error.HTTPError as e:',
        '    print(e.code); print(e.read().decode())',
      ].join('\n');
      const r = await run('python3', ['-c', script], {
        ...process.env, HTTPS_PROXY: gateway.proxy_url, https_proxy: gateway.proxy_url, NO_PROXY: '', no_proxy: '', SSL_CERT_FILE: caFile, SLACK_TOKEN: ph.SLACK_TOKEN,
      });
      expect(r.code, r.stderr).to.equal(0);
      const [status, body] = r.stdout.trim().split('\n');
      expect(status).to.equal('200');
      expect(JSON.parse(body!)).to.include({ ok: true });
      const seen = apis.seenBy('slack.com');
      expect(seen).to.have.length(1);
      expect(new URLSearchParams(seen[0]!.body.toString()).get('token')).to.equal(SLACK_TOKEN);
      const e = await audited((x) => x.path === '/api/conversations.history' && x.method === 'POST');
      expect(e).to.include({ connector: 'secret:SLACK_TOKEN', category: 'read', decision: 'allow', reason: 'rule', status: 200 });
    });
  });

  describe('Google\'s official client (@googleapis/gmail, gaxios)', () => {
    /**
     * How to route googleapis through the gateway from inside a process: gaxios takes an
     * `agent` request option (given here as a per-API option, merged into every request of
     * this client) and uses it instead of building its own. An https-proxy-agent from the
     * proxy URL (credentials in it) does the CONNECT. Trusting our CA takes one more step:
     * since https-proxy-agent 7, the agent's constructor options (`ca` included) apply only
     * to the connection TO the proxy, and the TLS options of the tunnelled connection come
     * from the request, which gaxios (node-fetch) never gives a `ca`. So the agent adds it.
     * gaxios' own proxy support (the `proxy` option or HTTPS_PROXY) has the same gap: there
     * the CA must come from NODE_EXTRA_CA_CERTS, read by Node only at start-up. That is how
     * it works inside our VMs (the third test).
     */
    class GatewayAgent extends HttpsProxyAgent<string> {
      override connect(req: Parameters<HttpsProxyAgent<string>['connect']>[0], opts: Parameters<HttpsProxyAgent<string>['connect']>[1]) {
        return super.connect(req, { ...opts, ca: gateway.ca_cert_pem } as typeof opts);
      }
    }
    function gmail() {
      const oauth = new googleAuth.OAuth2();
      // The access token is the secret's placeholder; no refresh token, so no refresh.
      oauth.setCredentials({ access_token: ph.GMAIL_TOKEN });
      return gmailClient({ version: 'v1', auth: oauth, agent: new GatewayAgent(gateway.proxy_url), retry: false });
    }

    it('users.messages.list is a read, allowed by the rule; Google sees the real token', async () => {
      const r = await gmail().users.messages.list({ userId: 'me', q: 'from:boss@example.com', maxResults: 10 });
      expect(r.status).to.equal(200);
      expect(r.data.messages).to.have.length(1);
      const seen = apis.seenBy('gmail.googleapis.com');
      expect(seen).to.have.length(1);
      expect(seen[0]!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
      const e = await audited((x) => x.path.startsWith('/gmail/v1/users/me/messages?'));
      expect(e).to.include({ host: 'gmail.googleapis.com', connector: 'secret:GMAIL_TOKEN', category: 'read', decision: 'allow', reason: 'rule', status: 200 });
      // Query values are redacted in the audit log.
      expect(e.path).to.not.include('boss');
    });

    it('users.messages.send is a send: held, approved through the API, then delivered with the real token', async () => {
      const raw = Buffer.from('From: me@example.com\r\nTo: you@example.com\r\nSubject: hi\r\n\r\nhello').toString('base64url');
      const sending = gmail().users.messages.send({ userId: 'me', requestBody: { raw } });
      const approvalId = await approveOnce({ connector: 'secret:GMAIL_TOKEN', category: 'send' });
      const r = await sending;
      expect(r.status).to.equal(200);
      expect(r.data.labelIds).to.deep.equal(['SENT']);
      const seen = apis.seenBy('gmail.googleapis.com');
      expect(seen).to.have.length(1);
      expect(seen[0]!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
      expect(JSON.parse(seen[0]!.body.toString())).to.deep.equal({ raw });
      const e = await audited((x) => x.path === '/gmail/v1/users/me/messages/send');
      expect(e).to.include({ connector: 'secret:GMAIL_TOKEN', category: 'send', decision: 'ask', reason: 'high_risk', approval_id: approvalId, status: 200 });
    });

    it('configured only by the VM\'s variables (HTTPS_PROXY, NODE_EXTRA_CA_CERTS) in a fresh Node process, the same client works', async () => {
      const script = [
        "import { gmail, auth } from '@googleapis/gmail';",
        'const c = new auth.OAuth2();',
        'c.setCredentials({ access_token: process.env.GMAIL_TOKEN });',
        "const r = await gmail({ version: 'v1', auth: c, retry: false }).users.messages.list({ userId: 'me' });",
        'console.log(JSON.stringify({ status: r.status, n: r.data.messages.length }));',
      ].join('\n');
      const r = await run(process.execPath, ['--input-type=module', '-e', script], {
        ...process.env, HTTPS_PROXY: gateway.proxy_url, NO_PROXY: '', no_proxy: '', NODE_EXTRA_CA_CERTS: caFile, GMAIL_TOKEN: ph.GMAIL_TOKEN,
      });
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal({ status: 200, n: 1 });
      expect(apis.seenBy('gmail.googleapis.com')[0]!.headers.authorization).to.equal(`Bearer ${GOOGLE_TOKEN}`);
      const e = await audited((x) => x.path === '/gmail/v1/users/me/messages');
      expect(e).to.include({ connector: 'secret:GMAIL_TOKEN', category: 'read', decision: 'allow', reason: 'rule', status: 200 });
    });
  });

  describe('Slack\'s official client (@slack/web-api WebClient)', () => {
    /**
     * @slack/web-api 8 sends every call through its `fetch` option (7.x took an http
     * `agent` for axios; 8 dropped axios). Routing through the gateway is a fetch bound to
     * a dispatcher: undici's fetch with a ProxyAgent that trusts our CA. Retries are off so
     * a gateway refusal surfaces at once instead of after Slack's retry schedule.
     */
    function slack() {
      const dispatcher = new ProxyAgent({ uri: gateway.proxy_url, requestTls: { ca: gateway.ca_cert_pem } });
      const proxiedFetch = ((url: string | URL, init?: object) =>
        undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher })) as unknown as FetchFunction;
      return new WebClient(ph.SLACK_TOKEN, { fetch: proxiedFetch, retryConfig: { retries: 0 }, logLevel: LogLevel.ERROR });
    }

    it('conversations.history (POSTed by the SDK) is a read, allowed by the rule', async () => {
      const r = await slack().conversations.history({ channel: 'C0123456789', limit: 10 });
      expect(r.ok).to.equal(true);
      expect(r.messages).to.have.length(1);
      const seen = apis.seenBy('slack.com');
      expect(seen).to.have.length(1);
      expect(seen[0]!.method).to.equal('POST');
      expect(seen[0]!.headers.authorization).to.equal(`Bearer ${SLACK_TOKEN}`);
      const e = await audited((x) => x.path === '/api/conversations.history');
      expect(e).to.include({ connector: 'secret:SLACK_TOKEN', category: 'read', decision: 'allow', reason: 'rule' });
    });

    it('chat.postMessage is a send: held, approved through the API, then posted with the real token', async () => {
      const posting = slack().chat.postMessage({ channel: 'C0123456789', text: 'deploy finished' });
      const approvalId = await approveOnce({ connector: 'secret:SLACK_TOKEN', category: 'send' });
      const r = await posting;
      expect(r.ok).to.equal(true);
      expect(r.message?.text).to.equal('deploy finished');
      const seen = apis.seenBy('slack.com');
      expect(seen).to.have.length(1);
      expect(seen[0]!.headers.authorization).to.equal(`Bearer ${SLACK_TOKEN}`);
      const e = await audited((x) => x.path === '/api/chat.postMessage');
      expect(e).to.include({ connector: 'secret:SLACK_TOKEN', category: 'send', decision: 'ask', reason: 'high_risk', approval_id: approvalId, status: 200 });
    });
  });

  describe('afterwards', () => {
    it('the audit chain of everything above verifies, and no token or placeholder is in the log', async () => {
      const verify = await api.get('/v1/audit-log/verify');
      expect(verify.body).to.include({ ok: true });
      const all = await api.get(`/v1/audit-log?environment_id=${envId}&limit=200`);
      const text = JSON.stringify(all.body);
      for (const s of [GOOGLE_TOKEN, SLACK_TOKEN, STRIPE_KEY, ...Object.values(ph)]) expect(text).to.not.include(s);
    });
  });
});
