import { expect } from 'chai';
import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Keyring } from '../../../lib/crypto.js';
import { CA_KEY_CONTEXT, CaError, caPaths, generateCa, loadOrCreateCa, type CertsLog } from '../../../certs/ca.js';
import { OID, extensions, serialBytes } from './der.js';

const DAY = 24 * 60 * 60 * 1000;

async function expectCaError(p: Promise<unknown>, code: string): Promise<CaError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(CaError);
    expect((err as CaError).code).to.equal(code);
    return err as CaError;
  }
  expect.fail(`expected CaError ${code}`);
}

async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await fs.readdir(dir)) out[name] = await fs.readFile(path.join(dir, name), 'utf8');
  return out;
}

describe('certs/ca loadOrCreateCa', () => {
  let dataDir: string;
  let keyring: Keyring;

  beforeEach(async () => {
    dataDir = await fs.mkdtemp(path.join(tmpdir(), 'gw-ca-'));
    keyring = new Keyring([randomBytes(32)]);
  });
  afterEach(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('creates the CA on first start and reuses it on the second (same fingerprint, same key)', async () => {
    const lines: string[] = [];
    const log: CertsLog = { info: (_o, m) => lines.push(`info ${m}`), warn: (_o, m) => lines.push(`warn ${m}`) };
    const first = await loadOrCreateCa({ dataDir, keyring, log });
    expect(first.created).to.equal(true);
    expect(lines).to.include('info created the gateway CA');

    const second = await loadOrCreateCa({ dataDir, keyring });
    expect(second.created).to.equal(false);
    expect(second.fingerprint256).to.equal(first.fingerprint256);
    expect(second.certPem).to.equal(first.certPem);
    expect(second.keyPem).to.equal(first.keyPem);
    expect(first.fingerprint256).to.equal(new X509Certificate(first.certPem).fingerprint256);
    expect(first.certPath).to.equal(path.join(dataDir, 'ca', 'ca.crt.pem'));
    expect(await fs.readdir(dataDir)).to.deep.equal(['ca']); // no temp dirs left behind
  });

  it('writes the certificate 0644 and the sealed key 0600, never the key PEM in clear', async () => {
    const ca = await loadOrCreateCa({ dataDir, keyring });
    const { dir, certPath, keyPath } = caPaths(dataDir);
    expect((await fs.stat(certPath)).mode & 0o777).to.equal(0o644);
    expect((await fs.stat(keyPath)).mode & 0o777).to.equal(0o600);
    expect((await fs.stat(dir)).mode & 0o777).to.equal(0o755);
    expect(await fs.readFile(certPath, 'utf8')).to.equal(ca.certPem);

    const blob = await fs.readFile(keyPath, 'utf8');
    expect(blob).to.not.include('PRIVATE KEY');
    const body = ca.keyPem.split('\n').filter((l) => l && !l.startsWith('-----'));
    for (const line of body) expect(blob).to.not.include(line);
    expect(blob).to.not.include(createPrivateKey(ca.keyPem).export({ type: 'pkcs8', format: 'der' }).toString('base64').slice(0, 40));
    // It is the keyring's envelope, bound to its context.
    expect(keyring.decryptString(blob.trim(), CA_KEY_CONTEXT)).to.equal(ca.keyPem);
    expect(() => keyring.decryptString(blob.trim(), 'some-other-row')).to.throw();
  });

  it('makes a CA certificate with the required fields', async () => {
    const before = Date.now();
    const ca = await loadOrCreateCa({ dataDir, keyring });
    const x = new X509Certificate(ca.certPem);
    expect(x.ca).to.equal(true);
    expect(x.subject).to.match(/^CN=Agent Gateway CA [0-9a-f]{8}\nO=Agent Gateway$/);
    expect(x.issuer).to.equal(x.subject);
    expect(x.verify(x.publicKey)).to.equal(true);
    expect(x.publicKey.asymmetricKeyDetails?.modulusLength).to.equal(2048);

    const notBefore = Date.parse(x.validFrom);
    const notAfter = Date.parse(x.validTo);
    expect(before - notBefore).to.be.within(DAY - 2000, DAY + 2000); // backdated one day
    const tenYears = new Date(before);
    tenYears.setUTCFullYear(tenYears.getUTCFullYear() + 10);
    expect(Math.abs(notAfter - tenYears.getTime())).to.be.below(60_000);

    const serial = serialBytes(ca.certPem);
    expect(serial.length).to.equal(16);
    expect(serial[0]! & 0x80).to.equal(0); // positive
    expect(serial[0]).to.not.equal(0); // minimal encoding

    const ext = extensions(ca.certPem);
    const bc = ext.get(OID.basicConstraints)!;
    expect(bc.critical).to.equal(true);
    expect(bc.value.children[0]!.content[0]).to.equal(0xff); // cA TRUE
    expect(bc.value.children[1]!.content[0]).to.equal(0); // pathLenConstraint 0
    const ku = ext.get(OID.keyUsage)!;
    expect(ku.critical).to.equal(true);
    expect(ku.value.content[1]).to.equal(0x06); // keyCertSign | cRLSign, nothing else
    expect(ext.get(OID.subjectKeyIdentifier)!.value.content.length).to.equal(20);
  });

  it('refuses a key it cannot decrypt (wrong master key) and does not replace the CA', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    const before = await snapshot(caPaths(dataDir).dir);
    const err = await expectCaError(loadOrCreateCa({ dataDir, keyring: new Keyring([randomBytes(32)]) }), 'ca_key_undecryptable');
    expect(err.message).to.include('master key');
    expect(await snapshot(caPaths(dataDir).dir)).to.deep.equal(before);
  });

  it('still loads with the old master key second in the keyring (rotation)', async () => {
    const oldKey = randomBytes(32);
    const a = await loadOrCreateCa({ dataDir, keyring: new Keyring([oldKey]) });
    const b = await loadOrCreateCa({ dataDir, keyring: new Keyring([randomBytes(32), oldKey]) });
    expect(b.created).to.equal(false);
    expect(b.fingerprint256).to.equal(a.fingerprint256);
  });

  it('refuses a damaged key file', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    const { keyPath } = caPaths(dataDir);
    const blob = (await fs.readFile(keyPath, 'utf8')).trim();
    await fs.writeFile(keyPath, `${blob.slice(0, -6)}AAAAAA`);
    await expectCaError(loadOrCreateCa({ dataDir, keyring }), 'ca_key_undecryptable');
  });

  it('refuses a half-present CA instead of making a new one', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    const { certPath, keyPath, dir } = caPaths(dataDir);
    await fs.rm(keyPath);
    await expectCaError(loadOrCreateCa({ dataDir, keyring }), 'ca_incomplete');
    expect(await fs.readdir(dir)).to.deep.equal(['ca.crt.pem']);

    await fs.rm(certPath);
    await fs.writeFile(keyPath, 'x');
    await expectCaError(loadOrCreateCa({ dataDir, keyring }), 'ca_incomplete');
  });

  it('refuses a certificate that does not match the key', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    const other = await generateCa();
    await fs.writeFile(caPaths(dataDir).certPath, other.certPem);
    await expectCaError(loadOrCreateCa({ dataDir, keyring }), 'ca_key_mismatch');
  });

  it('refuses an expired CA', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    await expectCaError(loadOrCreateCa({ dataDir, keyring, now: () => Date.now() + 11 * 365 * DAY }), 'ca_expired');
  });

  it('warns when the CA is close to expiry', async () => {
    await loadOrCreateCa({ dataDir, keyring });
    const warnings: string[] = [];
    const log: CertsLog = { info: () => {}, warn: (_o, m) => warnings.push(String(m)) };
    await loadOrCreateCa({ dataDir, keyring, log, now: () => Date.now() + (10 * 365 - 30) * DAY });
    expect(warnings.join()).to.include('expires soon');
  });

  it('refuses a ca/ directory that holds something else', async () => {
    await fs.mkdir(path.join(dataDir, 'ca'));
    await fs.writeFile(path.join(dataDir, 'ca', 'README'), 'not a CA');
    await expectCaError(loadOrCreateCa({ dataDir, keyring }), 'ca_dir_occupied');
    expect((await fs.readdir(dataDir)).sort()).to.deep.equal(['ca']);
  });

  it('lands exactly one CA when several starts race on one data directory', async () => {
    const results = await Promise.all(Array.from({ length: 4 }, () => loadOrCreateCa({ dataDir, keyring })));
    expect(new Set(results.map((r) => r.fingerprint256)).size).to.equal(1);
    expect(results.filter((r) => r.created)).to.have.length(1);
    expect(await fs.readdir(dataDir)).to.deep.equal(['ca']);
    const again = await loadOrCreateCa({ dataDir, keyring });
    expect(again.fingerprint256).to.equal(results[0]!.fingerprint256);
  });

  it('removes temp directories left by a crashed creation once they are stale', async () => {
    const stale = path.join(dataDir, '.ca-tmp-crashed');
    await fs.mkdir(stale);
    await fs.writeFile(path.join(stale, 'ca.crt.pem'), 'half');
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    await fs.utimes(stale, old, old);
    const fresh = path.join(dataDir, '.ca-tmp-in-progress');
    await fs.mkdir(fresh); // another process's creation in flight: left alone
    await loadOrCreateCa({ dataDir, keyring });
    expect((await fs.readdir(dataDir)).sort()).to.deep.equal(['.ca-tmp-in-progress', 'ca']);
  });
});
