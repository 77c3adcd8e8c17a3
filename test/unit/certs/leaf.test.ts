import { expect } from 'chai';
import { X509Certificate, createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';
import { generateCa, type CaMaterial } from '../../../certs/ca.js';
import { foreignPublicKey } from '../../../certs/x509.js';
import { InvalidHostnameError, createLeafIssuer, normalizeLeafHostname, type LeafIssuer } from '../../../certs/leaf.js';
import { createSniCallback } from '../../../certs/mitm.js';
import { OID, extensions, serialBytes } from './der.js';

const DAY = 24 * 60 * 60 * 1000;
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

describe('certs/leaf createLeafIssuer', () => {
  let ca: CaMaterial;
  let caX509: X509Certificate;
  let issuer: LeafIssuer;

  before(async () => {
    ca = await generateCa();
    caX509 = new X509Certificate(ca.certPem);
    issuer = await createLeafIssuer(ca, { cacheSize: 50 });
  });

  const cases: Array<{ host: string; san: string; cn: string | null }> = [
    { host: 'api.example.com', san: 'DNS:api.example.com', cn: 'api.example.com' },
    { host: 'API.Example.COM.', san: 'DNS:api.example.com', cn: 'api.example.com' },
    { host: 'localhost', san: 'DNS:localhost', cn: 'localhost' },
    { host: '*.googleapis.com', san: 'DNS:*.googleapis.com', cn: '*.googleapis.com' },
    { host: '_dmarc.example.org', san: 'DNS:_dmarc.example.org', cn: '_dmarc.example.org' },
    { host: '127.0.0.1', san: 'IP Address:127.0.0.1', cn: '127.0.0.1' },
    { host: '10.20.30.40', san: 'IP Address:10.20.30.40', cn: '10.20.30.40' },
    { host: '::1', san: 'IP Address:0:0:0:0:0:0:0:1', cn: '::1' },
    { host: '[2001:db8::ff00:42:8329]', san: 'IP Address:2001:DB8:0:0:0:FF00:42:8329', cn: '2001:db8::ff00:42:8329' },
    { host: '::ffff:192.0.2.1', san: 'IP Address:0:0:0:0:0:FFFF:C000:201', cn: '::ffff:192.0.2.1' },
    { host: 'fe80::', san: 'IP Address:FE80:0:0:0:0:0:0:0', cn: 'fe80::' },
    { host: `${'a'.repeat(63)}.example.com`, san: `DNS:${'a'.repeat(63)}.example.com`, cn: null }, // CN max 64
  ];
  for (const c of cases) {
    it(`issues ${c.host}: SAN ${c.san}, chained to the CA, server auth only`, () => {
      const leaf = issuer.getLeaf(c.host);
      const x = new X509Certificate(leaf.certPem);
      expect(x.subjectAltName).to.equal(c.san);
      expect(x.subject).to.equal(c.cn ? `CN=${c.cn}\nO=Agent Gateway` : 'O=Agent Gateway');
      expect(x.issuer).to.equal(caX509.subject);
      expect(x.checkIssued(caX509)).to.equal(true); // names and key identifiers line up
      expect(x.verify(caX509.publicKey)).to.equal(true);
      expect(x.ca).to.equal(false);
      expect(x.keyUsage).to.deep.equal([SERVER_AUTH]);
      if (c.san.startsWith('IP')) expect(x.checkIP(c.cn!)).to.equal(c.cn);
      else expect(x.checkHost(c.host.replace(/^\*/, 'www').toLowerCase().replace(/\.$/, ''))).to.be.a('string');
    });
  }

  it('uses notBefore = now - 1 day and keeps the validity at 397 days at most', () => {
    const before = Date.now();
    const x = new X509Certificate(issuer.getLeaf('validity.example.com').certPem);
    const notBefore = Date.parse(x.validFrom);
    const notAfter = Date.parse(x.validTo);
    expect(before - notBefore).to.be.within(DAY - 2000, DAY + 2000);
    expect(notAfter - notBefore).to.be.at.most(397 * DAY);
    expect(notAfter - before).to.be.at.most(397 * DAY);
    expect(notAfter - notBefore).to.be.above(396 * DAY);
  });

  it('carries the extensions a strict client checks', () => {
    const leafPem = issuer.getLeaf('ext.example.com').certPem;
    const ext = extensions(leafPem);
    const caExt = extensions(ca.certPem);
    const bc = ext.get(OID.basicConstraints)!;
    expect(bc.critical).to.equal(true);
    expect(bc.value.children).to.have.length(0); // cA FALSE is the default, so omitted
    const ku = ext.get(OID.keyUsage)!;
    expect(ku.critical).to.equal(true);
    expect(ku.value.content[1]).to.equal(0x80); // digitalSignature (an ECDSA key only signs)
    expect(ext.get(OID.extKeyUsage)!.critical).to.equal(false);
    expect(ext.get(OID.subjectAltName)!.critical).to.equal(false);
    const aki = ext.get(OID.authorityKeyIdentifier)!.value.children[0]!;
    expect(aki.tag).to.equal(0x80);
    expect(aki.content.equals(caExt.get(OID.subjectKeyIdentifier)!.value.content)).to.equal(true);
    const serial = serialBytes(leafPem);
    expect(serial.length).to.equal(16);
    expect(serial[0]! & 0x80).to.equal(0);
  });

  it('the leaf key is ECDSA P-256 by default; the subject key identifier is the SHA-1 of its bits (RFC 5280)', () => {
    const leafPem = issuer.getLeaf('ec.example.com').certPem;
    const x = new X509Certificate(leafPem);
    expect(x.publicKey.asymmetricKeyType).to.equal('ec');
    expect(x.publicKey.asymmetricKeyDetails).to.deep.include({ namedCurve: 'prime256v1' });
    expect(x.verify(caX509.publicKey)).to.equal(true);
    const spki = x.publicKey.export({ type: 'spki', format: 'der' });
    const point = spki.subarray(spki.length - 65); // uncompressed P-256 point, the end of the SPKI
    const ski = extensions(leafPem).get(OID.subjectKeyIdentifier)!.value.content;
    expect(ski.equals(createHash('sha1').update(point).digest())).to.equal(true);
  });

  it('a key whose point happens to parse as DER (x begins 0x3f, about 1 key in 256): the same SPKI and identifier', () => {
    // The 65-byte point 04 3f <63 bytes> reads as an OCTET STRING of 63 bytes; a parser that decodes BIT STRING contents
    // turns it into a structure, and the identifier came out wrong on CI.
    let key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey;
    while (key.export({ type: 'spki', format: 'der' }).readUInt8(27) !== 0x3f) {
      key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey;
    }
    const der = key.export({ type: 'spki', format: 'der' });
    const foreign = foreignPublicKey(key);
    expect(Buffer.from(forge.asn1.toDer(foreign.spki).getBytes(), 'binary').equals(der)).to.equal(true);
    const want = createHash('sha1').update(der.subarray(der.length - 65)).digest();
    expect(Buffer.from(foreign.subjectKeyIdentifier, 'binary').equals(want)).to.equal(true);
  });

  it('keyType rsa: an RSA-2048 leaf key, keyUsage digitalSignature | keyEncipherment', async () => {
    const rsa = await createLeafIssuer(ca, { keyType: 'rsa' });
    const leafPem = rsa.getLeaf('rsa.example.com').certPem;
    const x = new X509Certificate(leafPem);
    expect(x.publicKey.asymmetricKeyType).to.equal('rsa');
    expect(x.publicKey.asymmetricKeyDetails).to.deep.include({ modulusLength: 2048 });
    expect(x.verify(caX509.publicKey)).to.equal(true);
    expect(extensions(leafPem).get(OID.keyUsage)!.value.content[1]).to.equal(0xa0);
    expect(x.checkPrivateKey(createPrivateKey(rsa.keyPem))).to.equal(true);
  });

  it('reuses the one leaf key and gives every host its own certificate and serial', () => {
    const a = issuer.getLeaf('a.example.com');
    const b = issuer.getLeaf('b.example.com');
    expect(a.keyPem).to.equal(b.keyPem);
    expect(a.keyPem).to.equal(issuer.keyPem);
    expect(a.certPem).to.not.equal(b.certPem);
    expect(serialBytes(a.certPem).equals(serialBytes(b.certPem))).to.equal(false);
    const pub = createPublicKey(createPrivateKey(a.keyPem));
    expect(new X509Certificate(a.certPem).publicKey.equals(pub)).to.equal(true);
    expect(new X509Certificate(a.certPem).checkPrivateKey(createPrivateKey(a.keyPem))).to.equal(true);
  });

  it('returns the cached certificate on a second lookup, whatever the spelling', () => {
    const start = issuer.stats();
    const first = issuer.getLeaf('cache.example.com');
    const second = issuer.getLeaf('cache.example.com');
    const third = issuer.getLeaf('CACHE.example.com.');
    expect(second).to.equal(first);
    expect(third).to.equal(first);
    const end = issuer.stats();
    expect(end.issued - start.issued).to.equal(1);
    expect(end.hits - start.hits).to.equal(2);
  });

  it('evicts the least recently used certificate beyond cacheSize', async () => {
    const small = await createLeafIssuer(ca, { cacheSize: 2 });
    const a = small.getLeaf('a.test');
    small.getLeaf('b.test');
    small.getLeaf('a.test'); // a is now the most recent
    small.getLeaf('c.test'); // evicts b
    expect(small.stats().cached).to.equal(2);
    expect(small.getLeaf('a.test')).to.equal(a);
    const issued = small.stats().issued;
    small.getLeaf('b.test');
    expect(small.stats().issued).to.equal(issued + 1);
  });

  it('re-signs a cached certificate once it nears expiry', async () => {
    let now = Date.now();
    const clocked = await createLeafIssuer(ca, { now: () => now, renewBeforeDays: 30 });
    const first = clocked.getLeaf('renew.example.com');
    now += 300 * DAY;
    expect(clocked.getLeaf('renew.example.com')).to.equal(first);
    now += 70 * DAY; // 26 days left
    const renewed = clocked.getLeaf('renew.example.com');
    expect(renewed.certPem).to.not.equal(first.certPem);
    expect(renewed.notAfter.getTime()).to.be.above(first.notAfter.getTime());
  });

  it('never issues a leaf that outlives its CA', async () => {
    const caNotAfter = Date.parse(new X509Certificate(ca.certPem).validTo);
    const late = await createLeafIssuer(ca, { now: () => caNotAfter - 10 * DAY });
    const x = new X509Certificate(late.getLeaf('late.example.com').certPem);
    expect(Date.parse(x.validTo)).to.equal(caNotAfter);
    const after = await createLeafIssuer(ca, { now: () => caNotAfter + DAY });
    expect(() => after.getLeaf('too-late.example.com')).to.throw(/expired/);
  });

  it('warms a list of hosts ahead of need', async () => {
    const w = await createLeafIssuer(ca);
    await w.warm(Array.from({ length: 40 }, (_, i) => `h${i}.warm.test`));
    expect(w.stats()).to.include({ cached: 40, issued: 40, hits: 0 });
    w.getLeaf('h7.warm.test');
    expect(w.stats()).to.include({ issued: 40, hits: 1 });
  });

  const bad = [
    '', 'exa mple.com', 'a/b.com', '../../etc/passwd', 'example..com', '.example.com', '-x', 'host:443', '[',
    'ex\u00e4mple.com', 'a'.repeat(64) + '.com', `${'a.'.repeat(127)}com`, '1.2.3', '999.1.1.1', '0x7f.1', '*.com', 'a.*.com',
    'fe80::1%eth0', 'x\n.com',
  ];
  for (const h of bad) {
    it(`refuses ${JSON.stringify(h.length > 40 ? h.slice(0, 40) + '...' : h)}`, () => {
      expect(() => issuer.getLeaf(h)).to.throw(InvalidHostnameError);
    });
  }

  it('normalises names and IP literals', () => {
    expect(normalizeLeafHostname('WWW.Example.com.')).to.deep.equal({ name: 'www.example.com', ip: null });
    expect(normalizeLeafHostname('192.168.1.2').ip).to.deep.equal(Buffer.from([192, 168, 1, 2]));
    expect(normalizeLeafHostname('[::1]').ip!.toString('hex')).to.equal('00000000000000000000000000000001');
    expect(normalizeLeafHostname('1::').ip!.toString('hex')).to.equal('00010000000000000000000000000000');
    expect(normalizeLeafHostname('::1.2.3.4').ip!.toString('hex')).to.equal('00000000000000000000000001020304');
    expect(normalizeLeafHostname('1:2:3:4:5:6:7:8').ip!.toString('hex')).to.equal('00010002000300040005000600070008');
  });

  it('validates its options and the CA it is given', async () => {
    await expectReject(createLeafIssuer(ca, { keyBits: 1024 }), /keyBits/);
    await expectReject(createLeafIssuer(ca, { keyType: 'dsa' as 'ec' }), /keyType/);
    await expectReject(createLeafIssuer(ca, { cacheSize: 0 }), /cacheSize/);
    await expectReject(createLeafIssuer(ca, { validityDays: 398 }), /validityDays/);
    const other = await generateCa();
    await expectReject(createLeafIssuer({ certPem: ca.certPem, keyPem: other.keyPem }), /does not belong/);
    const leaf = issuer.getLeaf('not-a-ca.example.com');
    await expectReject(createLeafIssuer({ certPem: leaf.certPem, keyPem: leaf.keyPem }), /not a CA/);
  });
});

describe('certs/mitm createSniCallback', () => {
  let issuer: LeafIssuer;
  before(async () => {
    issuer = await createLeafIssuer(await generateCa());
  });

  function call(sni: ReturnType<typeof createSniCallback>, name: string): { err: Error | null; ctx: unknown } {
    let out: { err: Error | null; ctx: unknown } | undefined;
    sni(name, (err, ctx) => {
      out = { err, ctx };
    });
    expect(out, 'the callback answers synchronously').to.not.equal(undefined);
    return out!;
  }

  it('caches the secure context per host and refuses names the issuer refuses', () => {
    const sni = createSniCallback(issuer);
    const a = call(sni, 'ctx.example.com');
    expect(a.err).to.equal(null);
    expect(call(sni, 'CTX.example.com').ctx).to.equal(a.ctx);
    expect(call(sni, 'other.example.com').ctx).to.not.equal(a.ctx);
    expect(call(sni, 'bad name').err).to.be.instanceOf(InvalidHostnameError);
  });

  it('rebuilds a context when the issuer renews the certificate', async () => {
    let now = Date.now();
    const clocked = await createLeafIssuer(await generateCa(), { now: () => now });
    const sni = createSniCallback(clocked);
    const first = call(sni, 'renew.example.com').ctx;
    expect(call(sni, 'renew.example.com').ctx).to.equal(first);
    now += 380 * DAY;
    expect(call(sni, 'renew.example.com').ctx).to.not.equal(first);
  });
});

async function expectReject(p: Promise<unknown>, re: RegExp): Promise<void> {
  try {
    await p;
  } catch (err) {
    expect((err as Error).message).to.match(re);
    return;
  }
  expect.fail(`expected a rejection matching ${re}`);
}
