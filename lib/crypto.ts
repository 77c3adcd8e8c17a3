import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Envelope encryption. Every stored secret value (secrets, OAuth tokens, client secrets,
 * browser profiles, the CA key) gets its own random 256-bit data key; the value is sealed
 * with AES-256-GCM under that data key, and the data key is sealed with AES-256-GCM under
 * the master key. The blob names the master key by id, so the master key can be rotated:
 * load old and new keys, re-wrap data keys, drop the old one.
 *
 * Blob: `v1.<kid>.<iv|wrapped-dek|tag>.<iv|ciphertext|tag>` (base64url parts).
 * The optional context string is bound as additional authenticated data, so a ciphertext
 * copied to another row (another environment's secret, say) fails to decrypt.
 */
const VERSION = 'v1';

export function masterKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(aad);
  const ct = Buffer.concat([c.update(plaintext), c.final()]);
  return Buffer.concat([iv, ct, c.getAuthTag()]);
}

function open(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < 28) throw new Error('ciphertext too short');
  const iv = sealed.subarray(0, 12);
  const tag = sealed.subarray(sealed.length - 16);
  const ct = sealed.subarray(12, sealed.length - 16);
  const d = createDecipheriv('aes-256-gcm', key, iv);
  d.setAAD(aad);
  d.setAuthTag(tag);
  return Buffer.concat([d.update(ct), d.final()]);
}

export class Keyring {
  readonly #keys = new Map<string, Buffer>();
  readonly currentKid: string;

  /** The first key encrypts; all of them decrypt (older keys during a rotation). */
  constructor(masterKeys: Buffer[]) {
    if (masterKeys.length === 0) throw new Error('a keyring needs at least one master key');
    for (const k of masterKeys) {
      if (k.length !== 32) throw new Error('master keys are 32 bytes');
      this.#keys.set(masterKeyId(k), Buffer.from(k));
    }
    this.currentKid = masterKeyId(masterKeys[0]!);
  }

  encrypt(plaintext: string | Buffer, context = ''): string {
    const dek = randomBytes(32);
    const aad = Buffer.from(context, 'utf8');
    const master = this.#keys.get(this.currentKid)!;
    const wrapped = seal(master, dek, Buffer.from(`dek:${this.currentKid}`, 'utf8'));
    const body = seal(dek, Buffer.isBuffer(plaintext) ? plaintext : Buffer.from(plaintext, 'utf8'), aad);
    dek.fill(0);
    return [VERSION, this.currentKid, wrapped.toString('base64url'), body.toString('base64url')].join('.');
  }

  decrypt(blob: string, context = ''): Buffer {
    const parts = blob.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new Error('not an envelope blob');
    const [, kid, wrapped, body] = parts as [string, string, string, string];
    const master = this.#keys.get(kid);
    if (!master) throw new Error(`no master key with id ${kid}`);
    const dek = open(master, Buffer.from(wrapped, 'base64url'), Buffer.from(`dek:${kid}`, 'utf8'));
    try {
      return open(dek, Buffer.from(body, 'base64url'), Buffer.from(context, 'utf8'));
    } finally {
      dek.fill(0);
    }
  }

  decryptString(blob: string, context = ''): string {
    return this.decrypt(blob, context).toString('utf8');
  }

  /**
   * A 32-byte key for one purpose, derived from the current master key with HKDF-SHA256
   * (e.g. the key behind per-environment proxy passwords). It changes when the master
   * key is rotated.
   */
  deriveSubkey(label: string): Buffer {
    const master = this.#keys.get(this.currentKid)!;
    return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), Buffer.from(`agent-gateway:${label}`, 'utf8'), 32));
  }

  /** Re-seals a blob's data key under the current master key (master key rotation). */
  rewrap(blob: string, context = ''): string {
    return this.encrypt(this.decrypt(blob, context), context);
  }
}

export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}
