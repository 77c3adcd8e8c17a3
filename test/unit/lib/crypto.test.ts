import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Keyring, masterKeyId } from '../../../lib/crypto.js';

describe('envelope encryption (lib/crypto)', () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);

  it('round-trips a value and never stores it in clear', () => {
    const ring = new Keyring([k1]);
    const blob = ring.encrypt('sk_live_abcdef', 'secret:dev:env:STRIPE');
    expect(blob).to.not.include('sk_live_abcdef');
    expect(blob.split('.')[1]).to.equal(masterKeyId(k1));
    expect(ring.decryptString(blob, 'secret:dev:env:STRIPE')).to.equal('sk_live_abcdef');
  });

  it('uses a fresh data key and IV each time', () => {
    const ring = new Keyring([k1]);
    expect(ring.encrypt('same', 'c')).to.not.equal(ring.encrypt('same', 'c'));
  });

  it('refuses a ciphertext moved to another context (AAD binding)', () => {
    const ring = new Keyring([k1]);
    const blob = ring.encrypt('value', 'secret:dev:envA:X');
    expect(() => ring.decrypt(blob, 'secret:dev:envB:X')).to.throw();
  });

  it('refuses a tampered ciphertext', () => {
    const ring = new Keyring([k1]);
    const parts = ring.encrypt('value', 'c').split('.');
    const body = Buffer.from(parts[3]!, 'base64url');
    body[14] = body[14]! ^ 1;
    parts[3] = body.toString('base64url');
    expect(() => ring.decrypt(parts.join('.'), 'c')).to.throw();
  });

  it('decrypts with an older master key after rotation and rewraps under the new one', () => {
    const old = new Keyring([k1]);
    const blob = old.encrypt('token', 'ctx');
    const rotated = new Keyring([k2, k1]);
    expect(rotated.decryptString(blob, 'ctx')).to.equal('token');
    const rewrapped = rotated.rewrap(blob, 'ctx');
    expect(rewrapped.split('.')[1]).to.equal(masterKeyId(k2));
    expect(new Keyring([k2]).decryptString(rewrapped, 'ctx')).to.equal('token');
  });

  it('fails clearly with an unknown master key', () => {
    const blob = new Keyring([k1]).encrypt('x');
    expect(() => new Keyring([k2]).decrypt(blob)).to.throw(/no master key/);
  });
});
