import { expect } from 'chai';
import { placeCredentials, swapCredentials, type Credential, type CredentialSet, type Slot } from '../../../proxy/credentials.js';
import { injectRule, secretSlots, connectionSlots } from '../../../lib/credential-slots.js';

const A = 'svcph_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'svcph_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';

function cred(token: string, slots: readonly Slot[]): Credential {
  return { token, connector: `secret:${token.slice(-4)}`, kind: 'secret', infrastructure: false, hostAllowed: () => true, slots, allowMinting: false, value: () => `real-${token.slice(-4)}` };
}
const set = (...cs: Credential[]): CredentialSet => ({ byToken: new Map(cs.map((c) => [c.token, c])) });
const basic = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;

describe('credential placement (proxy/credentials)', () => {
  const a = cred(A, secretSlots(null));
  const b = cred(B, secretSlots(['header:X-Api-Key', 'query:key', 'form:token', 'json:auth.key']));
  const S = set(a, b);

  const inSlot: Array<[string, Parameters<typeof placeCredentials>[0]]> = [
    ['Bearer', { url: '/', headers: { authorization: `Bearer ${A}` } }],
    ['token scheme, any case', { url: '/', headers: { authorization: `TOKEN ${A}` } }],
    ['Basic user', { url: '/', headers: { authorization: basic(`${A}:`) } }],
    ['Basic password', { url: '/', headers: { authorization: basic(`api:${A}`) } }],
    ['named header', { url: '/', headers: { 'x-api-key': B } }],
    ['named header with a scheme word', { url: '/', headers: { 'x-api-key': `Key ${B}` } }],
    ['named query parameter', { url: `/x?key=${B}&p=1`, headers: {} }],
    ['named form field, percent-encoded', { url: '/', headers: {}, body: Buffer.from(`token=${B.replace('s', '%73')}&x=1`), contentType: 'application/x-www-form-urlencoded' }],
    ['named JSON path', { url: '/', headers: {}, body: Buffer.from(JSON.stringify({ auth: { key: B }, n: 1 })), contentType: 'application/json' }],
  ];
  for (const [label, req] of inSlot) {
    it(`in a slot: ${label}`, () => {
      const p = placeCredentials(req, S);
      expect(p.misplaced).to.equal(null);
      expect(p.found).to.have.length(1);
      expect(p.hits).to.have.length(1);
    });
  }

  const misplaced: Array<[string, Parameters<typeof placeCredentials>[0]]> = [
    ['URL path', { url: `/v1/${A}`, headers: {} }],
    ['URL path, percent-encoded', { url: `/v1/%73${A.slice(1)}`, headers: {} }],
    ['query parameter not named', { url: `/x?echo=${A}`, headers: {} }],
    ['query parameter name', { url: `/x?${A}=1`, headers: {} }],
    ['fragment', { url: `/x#${A}`, headers: {} }],
    ['other header', { url: '/', headers: { 'x-echo': A } }],
    ['cookie', { url: '/', headers: { cookie: `k=${A}` } }],
    ['Bearer with a prefix', { url: '/', headers: { authorization: `Bearer x${A}` } }],
    ['Bearer with two tokens', { url: '/', headers: { authorization: `Bearer ${A} ${A}` } }],
    ['another scheme', { url: '/', headers: { authorization: `Bot ${A}` } }],
    ['Basic with the token inside the user', { url: '/', headers: { authorization: basic(`me-${A}:pw`) } }],
    ['form body', { url: '/', headers: {}, body: Buffer.from(`metadata[x]=${A}`), contentType: 'application/x-www-form-urlencoded' }],
    ['JSON body', { url: '/', headers: {}, body: Buffer.from(JSON.stringify({ x: A })), contentType: 'application/json' }],
    ['JSON key', { url: '/', headers: {}, body: Buffer.from(JSON.stringify({ [A]: 1 })), contentType: 'application/json' }],
    ['text body', { url: '/', headers: {}, body: Buffer.from(`hello ${A}`), contentType: 'text/plain' }],
    ['unparsable JSON', { url: '/', headers: {}, body: Buffer.from(`{"auth":{"key":"${B}"`), contentType: 'application/json' }],
    ['named JSON path plus an escaped copy elsewhere', { url: '/', headers: {}, body: Buffer.from(`{"auth":{"key":"${B}"},"e":"${B.replace('s', '\\u0073')}"}`), contentType: 'application/json' }],
    ['named JSON path escaped', { url: '/', headers: {}, body: Buffer.from(`{"auth":{"key":"${B.replace('p', '\\u0070')}"}}`), contentType: 'application/json' }],
    ['named JSON path twice (duplicate key)', { url: '/', headers: {}, body: Buffer.from(`{"auth":{"key":"${B}","key":"${B}"}}`), contentType: 'application/json' }],
    ['named form field, the other token', { url: '/', headers: {}, body: Buffer.from(`token=${A}`), contentType: 'application/x-www-form-urlencoded' }],
    ['named form field with extra text', { url: '/', headers: {}, body: Buffer.from(`token=x${B}`), contentType: 'application/x-www-form-urlencoded' }],
    ['named header, but a secret that does not name it', { url: '/', headers: { 'x-api-key': A } }],
  ];
  for (const [label, req] of misplaced) {
    it(`misplaced: ${label}`, () => {
      const p = placeCredentials(req, S);
      expect(p.misplaced, label).to.not.equal(null);
    });
  }

  it('no credential set, or no token: nothing found', () => {
    expect(placeCredentials({ url: `/${A}`, headers: {} }, set()).found).to.deep.equal([]);
    expect(placeCredentials({ url: '/x', headers: { authorization: 'Bearer real' } }, S).found).to.deep.equal([]);
  });

  it('swap writes only the slots and returns every spelling to redact', () => {
    const req = { url: `/x?key=${B}&q=1`, headers: { authorization: basic(`${A}:`), 'x-api-key': B }, body: Buffer.from(`token=${B}&n=1`), contentType: 'application/x-www-form-urlencoded' };
    const p = placeCredentials(req, S);
    expect(p.misplaced).to.equal(null);
    const out = swapCredentials(req, p, new Map([[A, 'real a/b'], [B, 'real+b']]));
    expect(out.url).to.equal('/x?key=real%2Bb&q=1');
    expect(out.headers.authorization).to.equal(basic('real a/b:'));
    expect(out.headers['x-api-key']).to.equal('real+b');
    expect(out.body!.toString()).to.equal('token=real%2Bb&n=1');
    const sent = out.redactions.map((r) => r.sent);
    expect(sent).to.include.members(['real a/b', 'real%20a%2Fb', 'real+a%2Fb', 'real a\\/b', Buffer.from('real a/b:').toString('base64')]);
    expect(out.redactions.find((r) => r.sent === Buffer.from('real a/b:').toString('base64'))!.shown).to.equal(Buffer.from(`${A}:`).toString('base64'));
    // The agent's own request is not modified.
    expect(req.headers.authorization).to.equal(basic(`${A}:`));
  });

  it('a value that would split a header is refused', () => {
    const req = { url: '/', headers: { authorization: `Bearer ${A}` } };
    expect(() => swapCredentials(req, placeCredentials(req, S), new Map([[A, 'x\r\ny: z']]))).to.throw(/header/);
  });

  describe('swapping values that need escaping (issue 10)', () => {
    const hostile = ['quote " inside', 'back\\slash \\n not a newline', 'ünïcödé ✓ 🔑', 'amp&eq=plus+pct%20', '</script>\u2028'];
    for (const value of hostile) {
      it(`into a JSON body: ${JSON.stringify(value)} parses back to itself, the rest untouched`, () => {
        const req = { url: '/', headers: {}, body: Buffer.from(JSON.stringify({ auth: { key: B }, other: 'x"y' })), contentType: 'application/json' };
        const p = placeCredentials(req, S);
        expect(p.misplaced).to.equal(null);
        const out = swapCredentials(req, p, new Map([[B, value]]));
        expect(JSON.parse(out.body!.toString('utf8'))).to.deep.equal({ auth: { key: value }, other: 'x"y' });
        // The answer is redacted of the value as JSON would spell it too.
        expect(out.redactions.map((r) => r.sent)).to.include(JSON.stringify(value).slice(1, -1));
      });
      it(`into a form body and a query: ${JSON.stringify(value)} decodes back to itself`, () => {
        const req = { url: `/x?key=${B}`, headers: {}, body: Buffer.from(`token=${B}&n=1`), contentType: 'application/x-www-form-urlencoded' };
        const p = placeCredentials(req, S);
        const out = swapCredentials(req, p, new Map([[B, value]]));
        expect(new URLSearchParams(out.body!.toString('latin1')).get('token')).to.equal(value);
        expect(new URLSearchParams(out.body!.toString('latin1')).get('n')).to.equal('1');
        expect(new URL(`http://h${out.url}`).searchParams.get('key')).to.equal(value);
      });
    }

    for (const [label, value] of [['CR LF', 'a\r\nX-Injected: 1'], ['a lone LF', 'a\nb'], ['a lone CR', 'a\rb'], ['NUL', 'a\u0000b']] as const) {
      it(`a real value with ${label} is refused for a header (it would split or end it)`, () => {
        for (const headers of [{ authorization: `Bearer ${A}` }, { 'x-api-key': B }]) {
          const req = { url: '/', headers };
          const p = placeCredentials(req, S);
          expect(() => swapCredentials(req, p, new Map([[A, value], [B, value]]))).to.throw(/header/);
        }
      });
    }

    it('a Basic blob carries any value (base64), CR LF included', () => {
      const req = { url: '/', headers: { authorization: basic(`${A}:`) } };
      const out = swapCredentials(req, placeCredentials(req, S), new Map([[A, 'a\r\nb']]));
      expect(Buffer.from(String(out.headers.authorization).slice(6), 'base64').toString()).to.equal('a\r\nb:');
    });
  });

  it('two secrets and a connection stand-in in one request: each swapped in its own slot, nothing else touched', () => {
    const C = 'svcst_cccccccccccccccccccccccccccccccc';
    const conn: Credential = { token: C, connector: 'slack', kind: 'connection', infrastructure: false, hostAllowed: () => true, slots: connectionSlots('slack'), allowMinting: false, value: () => 'xoxp-real' };
    const all = set(a, b, conn);
    const req = {
      url: `/api/chat.postMessage?key=${B}&channel=C1`, headers: { authorization: `Bearer ${A}`, 'x-api-key': B },
      body: Buffer.from(`token=${C}&text=hello`), contentType: 'application/x-www-form-urlencoded',
    };
    const p = placeCredentials(req, all);
    expect(p.misplaced).to.equal(null);
    expect(p.found.map((c) => c.token).sort()).to.deep.equal([A, B, C].sort());
    const out = swapCredentials(req, p, new Map([[A, 'real-a'], [B, 'real-b'], [C, 'xoxp-real']]));
    expect(out.headers.authorization).to.equal('Bearer real-a');
    expect(out.headers['x-api-key']).to.equal('real-b');
    expect(out.url).to.equal('/api/chat.postMessage?key=real-b&channel=C1');
    expect(out.body!.toString()).to.equal('token=xoxp-real&text=hello');
    const text = `${out.url} ${JSON.stringify(out.headers)} ${out.body!.toString()}`;
    for (const t of [A, B, C]) expect(text).to.not.include(t);
    expect(out.redactions.map((r) => r.shown)).to.include.members([A, B, C]);
  });

  describe('inject lists (lib/credential-slots)', () => {
    for (const ok of [[], ['token'], ['X-Api-Key'], ['header:X-Api-Key', 'query:api_key', 'form:token', 'json:auth.key', 'json:a.b.c.d']]) {
      it(`valid: ${JSON.stringify(ok)}`, () => expect(injectRule(ok)).to.equal(null));
    }
    for (const bad of [[''], ['cookie:x'], ['header:Host'], ['Content-Length'], ['header:bad name'], ['json:a..b'], ['json:a.b.c.d.e.f.g.h.i'], ['query:a=b'], Array.from({ length: 21 }, (_, i) => `h${i}`)]) {
      it(`invalid: ${JSON.stringify(bad).slice(0, 60)}`, () => expect(injectRule(bad)).to.be.a('string'));
    }
    it('a bare name is a header, a query parameter, a form field and a top-level JSON field', () => {
      expect(secretSlots(['token'])).to.deep.equal([{ in: 'authorization' }, { in: 'header', name: 'token' }, { in: 'query', name: 'token' }, { in: 'form', name: 'token' }, { in: 'json', path: ['token'] }]);
    });
    it('connection stand-ins: Authorization, and Slack\'s token field', () => {
      expect(connectionSlots('gmail')).to.deep.equal([{ in: 'authorization' }]);
      expect(connectionSlots('slack').map((s) => s.in)).to.deep.equal(['authorization', 'form', 'query', 'json']);
    });
  });
});
