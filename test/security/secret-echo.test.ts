import { expect } from 'chai';
import { gzipSync, brotliCompressSync } from 'node:zlib';
import type { ServerResponse } from 'node:http';
import { request } from 'undici';
import Stripe from 'stripe';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent, rawTunnelExchange, statusOf } from '../helpers/proxy-client.js';
import type { Seen } from '../helpers/upstream.js';

/**
 * Hole 1 (critical): the real value flowed back to the agent. A placeholder was swapped
 * wherever it appeared and the upstream's answer streamed back untouched, so any API that
 * echoes its input handed the agent the real secret. Each test is the attack; each
 * asserts that the real value never reached the agent (and, for refusals, never left).
 */
const STRIPE_KEY = 'sk_live_51EchoAttackRealKey/with"odd<chars>&more';
const SLACK_TOKEN = 'xoxp-9999999999-8888888888-real-slack-token';
const HEADER_KEY = 'real-header-key-0123456789abcdef';

/** Everything the upstream received, echoed back in a JSON body (what error messages and metadata do). */
function echoJson(req: Seen, res: ServerResponse): void {
  const body = JSON.stringify({ url: req.url, headers: req.headers, body: req.body.toString('utf8') });
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(body);
}

describe('security: the real value never flows back to the agent (hole 1)', function () {
  this.timeout(30000);
  let w: AttackWorld;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['api.stripe.com', 'slack.com', 'api.example.com'],
      secrets: {
        STRIPE_KEY: { value: STRIPE_KEY, allowed_hosts: ['api.stripe.com'] },
        SLACK_TOKEN: { value: SLACK_TOKEN, allowed_hosts: ['slack.com'], inject: ['form:token'] },
        HEADER_KEY: { value: HEADER_KEY, allowed_hosts: ['api.example.com'], inject: ['header:X-Api-Key', 'query:api_key', 'json:auth.key'] },
      },
    });
  });
  after(async () => w?.close());
  beforeEach(async () => {
    w.up.respond = echoJson;
    await w.mark();
  });

  const stripe = (path: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) =>
    request(`https://api.stripe.com${path}`, {
      dispatcher: proxyAgent(w.gw),
      method: (init.method ?? 'GET') as 'GET',
      body: init.body,
      headers: { authorization: `Bearer ${w.ph.STRIPE_KEY}`, ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}), ...init.headers },
    });

  async function refused(r: Awaited<ReturnType<typeof request>>, code: string): Promise<void> {
    const text = await r.body.text();
    expect(r.statusCode, text).to.equal(403);
    expect(r.headers['x-gateway-error']).to.equal(code);
    expect(text).to.not.include(STRIPE_KEY);
    expect(w.up.seen, 'nothing may leave the gateway').to.have.length(0);
  }

  describe('a placeholder outside a credential slot is refused whole (403 secret_location_not_allowed), audited, never sent', () => {
    it('attack: Stripe customer metadata[x]=<placeholder> (the record would hold the live key)', async () => {
      await refused(await stripe('/v1/customers', { method: 'POST', body: `email=a%40b.c&metadata[x]=${w.ph.STRIPE_KEY}` }), 'secret_location_not_allowed');
      const [e] = await w.audited(1);
      expect(e).to.include({ host: 'api.stripe.com', connector: 'secret:STRIPE_KEY', credential: 'secret', decision: 'deny', reason: 'secret_location_not_allowed', status: 403 });
    });

    it('attack: the placeholder percent-encoded in a form value (%73vcph_...)', async () => {
      const encoded = w.ph.STRIPE_KEY!.replace(/^s/, '%73');
      await refused(await stripe('/v1/customers', { method: 'POST', body: `description=${encoded}` }), 'secret_location_not_allowed');
    });

    it('attack: the placeholder in a query parameter the secret does not name (?echo=...)', async () => {
      await refused(await stripe(`/v1/customers?echo=${w.ph.STRIPE_KEY}`), 'secret_location_not_allowed');
    });

    it('attack: the placeholder in the URL path (/v1/customers/<placeholder>)', async () => {
      await refused(await stripe(`/v1/customers/${w.ph.STRIPE_KEY}`), 'secret_location_not_allowed');
    });

    it('attack: the placeholder in an arbitrary header (X-Echo: <placeholder>)', async () => {
      await refused(await stripe('/v1/balance', { headers: { 'x-echo': w.ph.STRIPE_KEY! } }), 'secret_location_not_allowed');
    });

    it('attack: the placeholder inside a longer Authorization value (Bearer prefix-<placeholder>)', async () => {
      await refused(await stripe('/v1/balance', { headers: { authorization: `Bearer x${w.ph.STRIPE_KEY}` } }), 'secret_location_not_allowed');
    });

    it('attack: the placeholder in a JSON body field of a secret that names no JSON field', async () => {
      await refused(await stripe('/v1/customers', { method: 'POST', body: JSON.stringify({ metadata: { x: w.ph.STRIPE_KEY } }), headers: { 'content-type': 'application/json' } }), 'secret_location_not_allowed');
    });

    it('attack: Authorization right and the same placeholder echoed in the body too', async () => {
      await refused(await stripe('/v1/customers', { method: 'POST', body: `name=${w.ph.STRIPE_KEY}` }), 'secret_location_not_allowed');
    });

    it('attack: a JSON slot written with an escape ("svc\\u0070h_...") or twice under a duplicate key', async () => {
      const escaped = w.ph.HEADER_KEY!.replace('svcph_', 'svc\\u0070h_');
      for (const body of [`{"auth":{"key":"${escaped}"}}`, `{"auth":{"key":"${w.ph.HEADER_KEY}","key":"${w.ph.HEADER_KEY}"}}`, `{"auth":{"key":"${w.ph.HEADER_KEY}"},"echo":"${w.ph.HEADER_KEY}"}`]) {
        const r = await request('https://api.example.com/v1/things', { dispatcher: proxyAgent(w.gw), method: 'POST', body, headers: { 'content-type': 'application/json' } });
        await refused(r, 'secret_location_not_allowed');
      }
    });

    it('the official Stripe client with the placeholder as its key and in metadata is refused; with the key alone it works', async () => {
      const client = new Stripe(w.ph.STRIPE_KEY!, { httpAgent: undefined, host: 'api.stripe.com', maxNetworkRetries: 0, httpClient: Stripe.createFetchHttpClient(async (url, init) => {
        const r = await request(String(url), { dispatcher: proxyAgent(w.gw), method: (init?.method ?? 'GET') as 'GET', headers: init?.headers as Record<string, string>, body: init?.body as string });
        return new Response(await r.body.text(), { status: r.statusCode, headers: r.headers as Record<string, string> });
      }) });
      let err: unknown;
      try {
        await client.customers.create({ email: 'a@b.c', metadata: { x: w.ph.STRIPE_KEY! } });
      } catch (e) {
        err = e;
      }
      expect(String((err as { raw?: { message?: string } })?.raw?.message ?? err)).to.not.include(STRIPE_KEY);
      expect(w.up.seen).to.have.length(0);
    });
  });

  describe('an echoing upstream: the answer is redacted (the placeholder back in place of the value), audited redacted: true', () => {
    it('attack: an API that echoes the Authorization header in its JSON body', async () => {
      const r = await stripe('/v1/customers', { method: 'POST', body: 'email=a%40b.c' });
      const text = await r.body.text();
      expect(r.statusCode).to.equal(200);
      expect(w.up.seen[0]!.headers.authorization).to.equal(`Bearer ${STRIPE_KEY}`);
      expect(text).to.not.include('sk_live_51Echo');
      expect(JSON.parse(text).headers.authorization).to.equal(`Bearer ${w.ph.STRIPE_KEY}`);
      const [e] = await w.audited(1);
      expect(e).to.include({ reason: 'rule', status: 200, redacted: true });
    });

    it('attack: an echo in other encoders\' spellings (Go\'s JSON \\u003c, lower-case percent hex in a Location, Python\'s quote, &#x27; and &#34;) is redacted too (a fourth review)', async () => {
      const spellings = (v: string) => [
        JSON.stringify(v).slice(1, -1).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026'),
        encodeURIComponent(v).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
        encodeURIComponent(v).replace(/%2F/g, '/').replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`),
        v.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&#34;').replace(/'/g, '&#x27;'),
      ];
      w.up.respond = (req, res) => {
        const value = String(req.headers.authorization).slice('Bearer '.length);
        const [goJson, lowerHex, pyQuote, html] = spellings(value);
        res.writeHead(302, { location: `https://api.stripe.com/next?token=${lowerHex}`, 'content-type': 'application/json' });
        res.end(`{"echo":"${goJson}","q":"${pyQuote}","h":"${html}"}`);
      };
      const r = await stripe('/v1/echo');
      const text = await r.body.text();
      const all = `${String(r.headers.location)}\n${text}`;
      for (const s of spellings(STRIPE_KEY)) expect(all).to.not.include(s);
      expect(all).to.not.include('sk_live_51Echo');
      expect(String(r.headers.location)).to.include(w.ph.STRIPE_KEY!);
    });

    it('attack: Range slices of an echo, each shorter than the value, put back together (a fourth review): the range is not sent, a part is not passed on', async () => {
      const echo = (req: Seen) => `you sent: ${String(req.headers.authorization)} and that is all`;
      // An upstream honouring Range on a resource that echoes the request.
      w.up.respond = (req, res) => {
        const text = echo(req);
        const m = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers.range ?? ''));
        if (!m) {
          res.writeHead(200, { 'content-type': 'text/plain' });
          return res.end(text);
        }
        res.writeHead(206, { 'content-type': 'text/plain', 'content-range': `bytes ${m[1]}-${m[2]}/${text.length}` });
        res.end(text.slice(Number(m[1]), Number(m[2]) + 1));
      };
      let got = '';
      for (let at = 0; at < 80; at += 8) {
        const r = await stripe('/v1/echo', { headers: { range: `bytes=${at}-${at + 7}` } });
        const text = await r.body.text();
        if (r.statusCode === 206) got += text;
        expect(r.statusCode, text).to.equal(200);
      }
      expect(got).to.equal('');
      expect(w.up.seen.every((s) => s.headers.range === undefined)).to.equal(true);
      // And an upstream that answers 206 unasked is refused: no part reaches the agent.
      w.up.respond = (req, res) => {
        res.writeHead(206, { 'content-type': 'text/plain', 'content-range': 'bytes 0-9/80' });
        res.end(echo(req).slice(0, 10));
      };
      const r = await stripe('/v1/echo');
      const text = await r.body.text();
      expect(r.statusCode).to.equal(502);
      expect(text).to.not.include('sk_live');
    });

    it('attack: the value echoed one byte per chunk (matching across chunk boundaries)', async () => {
      w.up.respond = (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const text = `you sent: ${String(req.headers.authorization)} and that is all`;
        let i = 0;
        const next = () => {
          if (i >= text.length) return res.end();
          res.write(text[i++]!, () => setImmediate(next));
        };
        next();
      };
      const r = await stripe('/v1/balance');
      const text = await r.body.text();
      expect(text).to.equal(`you sent: Bearer ${w.ph.STRIPE_KEY} and that is all`);
    });

    it('attack: the echo compressed anyway (gzip, br) although the gateway asked for identity', async () => {
      for (const [coding, compress] of [['gzip', gzipSync], ['br', brotliCompressSync]] as const) {
        w.up.respond = (req, res) => {
          expect(req.headers['accept-encoding']).to.equal('identity');
          const body = compress(Buffer.from(`{"echo":"${STRIPE_KEY.replace(/"/g, '\\"')}"}`));
          res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding, 'content-length': body.length });
          res.end(body);
        };
        const r = await stripe('/v1/balance', { headers: { 'accept-encoding': 'gzip, br' } });
        const text = await r.body.text();
        expect(r.headers['content-encoding'], coding).to.equal(undefined);
        expect(text).to.equal(`{"echo":"${w.ph.STRIPE_KEY}"}`);
      }
    });

    it('HEAD and 204 answers declaring gzip (no body to decode) pass whole, headers redacted', async () => {
      w.up.respond = (req, res) => {
        res.writeHead(req.method === 'HEAD' ? 200 : 204, { 'content-encoding': 'gzip', 'content-length': req.method === 'HEAD' ? '20' : '0', 'x-echo': String(req.headers.authorization) });
        res.end();
      };
      for (const method of ['HEAD', 'DELETE']) {
        const r = await stripe('/v1/customers/cus_1', { method });
        await r.body.text();
        expect(r.statusCode, method).to.equal(method === 'HEAD' ? 200 : 204);
        expect(r.headers['x-echo']).to.equal(`Bearer ${w.ph.STRIPE_KEY}`);
        expect(r.headers['content-encoding']).to.equal('gzip');
      }
    });

    it('attack: an encoding the gateway cannot decode is refused (502), never passed through unchecked', async () => {
      w.up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-encoding': 'x-custom' });
        res.end(Buffer.from(STRIPE_KEY));
      };
      const r = await stripe('/v1/balance');
      const text = await r.body.text();
      expect(r.statusCode).to.equal(502);
      expect(text).to.not.include('sk_live_51Echo');
    });

    it('attack: the value echoed JSON-escaped, percent-encoded, form-encoded and HTML-escaped', async () => {
      w.up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end([JSON.stringify(STRIPE_KEY), JSON.stringify(STRIPE_KEY).replace(/\//g, '\\/'), encodeURIComponent(STRIPE_KEY), encodeURIComponent(STRIPE_KEY).replace(/%20/g, '+'),
          STRIPE_KEY.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')].join('\n'));
      };
      const text = await (await stripe('/v1/balance')).body.text();
      expect(text).to.not.include('sk_live_51Echo');
      expect(text.split('\n').every((l) => l.includes(w.ph.STRIPE_KEY!))).to.equal(true);
    });

    it('attack: the value echoed in response headers (X-Echo, Location, Set-Cookie)', async () => {
      w.up.respond = (req, res) => {
        res.writeHead(302, { 'x-echo': String(req.headers.authorization), location: `https://api.stripe.com/next?k=${encodeURIComponent(STRIPE_KEY)}`, 'set-cookie': [`k=${encodeURIComponent(STRIPE_KEY)}`, 'a=1'] });
        res.end();
      };
      const r = await stripe('/v1/balance');
      await r.body.text();
      expect(JSON.stringify(r.headers)).to.not.include('sk_live_51Echo');
      expect(r.headers['x-echo']).to.equal(`Bearer ${w.ph.STRIPE_KEY}`);
      expect(r.headers.location).to.equal(`https://api.stripe.com/next?k=${w.ph.STRIPE_KEY}`);
    });

    it('attack: Basic auth (curl -u <placeholder>:) echoed back as the Basic blob and decoded', async () => {
      const blob = Buffer.from(`${w.ph.STRIPE_KEY}:`).toString('base64');
      w.up.respond = (req, res) => {
        const a = String(req.headers.authorization);
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(`${a}\n${Buffer.from(a.slice(6), 'base64').toString()}`);
      };
      const r = await stripe('/v1/balance', { headers: { authorization: `Basic ${blob}` } });
      const text = await r.body.text();
      expect(w.up.seen[0]!.headers.authorization).to.equal(`Basic ${Buffer.from(`${STRIPE_KEY}:`).toString('base64')}`);
      expect(text).to.equal(`Basic ${blob}\n${w.ph.STRIPE_KEY}:`);
    });

    it('attack: a raw HTTP/1.1 exchange in the tunnel (no client library) gets the same redaction', async () => {
      const raw = await rawTunnelExchange(w.gw, 'api.stripe.com', `GET /v1/balance HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer ${w.ph.STRIPE_KEY}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(raw).status).to.equal(200);
      expect(raw).to.not.include('sk_live_51Echo');
      expect(raw).to.include(w.ph.STRIPE_KEY);
    });

    it('a request without a credential is answered untouched (compressed stays compressed, no redaction entry)', async () => {
      const body = gzipSync(Buffer.from('{"plain":true}'));
      w.up.respond = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
        res.end(body);
      };
      const r = await request('https://api.stripe.com/v1/public', { dispatcher: proxyAgent(w.gw), headers: { 'accept-encoding': 'gzip' } });
      expect(r.headers['content-encoding']).to.equal('gzip');
      expect(Buffer.from(await r.body.arrayBuffer()).equals(body)).to.equal(true);
      const [e] = await w.audited(1);
      expect(e).to.include({ credential: 'none', reason: 'no_credential' });
      expect(e).to.not.have.property('redacted');
    });
  });

  describe('inject: a secret names the other places its value goes', () => {
    it('Slack\'s token form field (inject form:token): swapped there, and an echo of it redacted', async () => {
      const r = await request('https://slack.com/api/conversations.history', {
        dispatcher: proxyAgent(w.gw), method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${w.ph.SLACK_TOKEN}&channel=C1&limit=2`,
      });
      expect(r.statusCode).to.equal(200);
      const text = await r.body.text();
      expect(new URLSearchParams(w.up.seen[0]!.body.toString()).get('token')).to.equal(SLACK_TOKEN);
      expect(text).to.not.include(SLACK_TOKEN);
      expect(JSON.parse(text).body).to.equal(`token=${w.ph.SLACK_TOKEN}&channel=C1&limit=2`);
    });

    it('attack: a named form field, but the text field echoes the token too: refused', async () => {
      const r = await request('https://slack.com/api/conversations.history', {
        dispatcher: proxyAgent(w.gw), method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${w.ph.SLACK_TOKEN}&channel=${w.ph.SLACK_TOKEN}`,
      });
      await refused(r, 'secret_location_not_allowed');
    });

    it('header, query parameter and nested JSON field named by inject are swapped; nothing else is', async () => {
      const a = proxyAgent(w.gw);
      const h = await request('https://api.example.com/v1/things', { dispatcher: a, headers: { 'x-api-key': w.ph.HEADER_KEY! } });
      expect(h.statusCode).to.equal(200);
      expect(await h.body.text()).to.not.include(HEADER_KEY);
      const q = await request(`https://api.example.com/v1/things?api_key=${w.ph.HEADER_KEY}&page=2`, { dispatcher: a });
      expect(q.statusCode).to.equal(200);
      await q.body.text();
      const j = await request('https://api.example.com/v1/things', { dispatcher: a, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ auth: { key: w.ph.HEADER_KEY }, n: 1 }) });
      expect(j.statusCode).to.equal(200);
      await j.body.text();
      expect(w.up.seen.map((s) => [s.headers['x-api-key'] ?? null, s.url, s.body.toString()])).to.deep.equal([
        [HEADER_KEY, '/v1/things', ''],
        [null, `/v1/things?api_key=${encodeURIComponent(HEADER_KEY)}&page=2`, ''],
        [null, '/v1/things', JSON.stringify({ auth: { key: HEADER_KEY }, n: 1 })],
      ]);
    });

    it('inject is validated at the API (400 for a reserved header or a bad place) and listed on the secret', async () => {
      for (const inject of [['header:Host'], ['cookie:x'], ['json:a..b'], ['bad name']]) {
        const r = await w.t.api.put(`/v1/environments/${w.envId}/secrets/BAD`, { value: 'v', allowed_hosts: ['a.com'], inject });
        expect(r.status, JSON.stringify(inject)).to.equal(400);
        expect(r.body.error).to.equal('invalid_request');
      }
      const list = (await w.t.api.get(`/v1/environments/${w.envId}/secrets`)).body.data as Array<{ name: string; inject?: string[] }>;
      expect(list.find((s) => s.name === 'HEADER_KEY')!.inject).to.deep.equal(['header:X-Api-Key', 'query:api_key', 'json:auth.key']);
      expect(list.find((s) => s.name === 'STRIPE_KEY')).to.not.have.property('inject');
    });
  });

  it('no real value is in the audit log or its API', async () => {
    await w.t.svc.audit.flush();
    const rows = JSON.stringify(await w.t.svc.db('audit_log').select());
    for (const v of [STRIPE_KEY, SLACK_TOKEN, HEADER_KEY]) expect(rows).to.not.include(v);
  });
});
