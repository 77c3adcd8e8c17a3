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
