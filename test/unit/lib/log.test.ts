import { expect } from 'chai';
import fc from 'fast-check';
import { Writable } from 'node:stream';
import { createLogger, scrubString } from '../../../lib/log.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: createLogger('debug', stream as never), lines };
}

describe('log redaction (lib/log)', () => {
  const apiKey = 'sk_0123456789abcdef0123456789abcdef01234567';
  const whsec = 'whsec_q83vEjRWeJASjqNsZ2N9-LQ0wUUbm2hLmrS2yPZiU0o';
  const placeholder = 'svcph_00112233445566778899aabbccddeeff';
  const oauth = 'ya29.a0AfH6SMBx-real-google-access-token';
  const slack = 'xoxp-1234567890-abcdefghijkl';

  it('never writes a key, secret, placeholder or token, wherever it hides', () => {
    const { log, lines } = capture();
    log.info({ authorization: `Bearer ${apiKey}` }, 'auth header');
    log.info({ headers: { 'proxy-authorization': 'Basic ZW52Onh4eHh4eHh4' } }, 'nested header');
    log.info({ nested: { note: `key is ${apiKey}` } }, 'nested string');
    log.warn(`interpolated ${whsec} and ${placeholder}`);
    log.error({ err: new Error(`upstream said ${oauth}`) }, 'error with token');
    log.info({ list: [slack, { client_secret: 'abc123' }], value: 'hunter2', token: 't', refresh_token: 'r' }, 'arrays');
    const out = lines.join('');
    for (const s of [apiKey, whsec, placeholder, oauth, slack, 'abc123', 'hunter2', 'ZW52Onh4eHh4eHh4']) {
      expect(out, s).to.not.include(s);
    }
    expect(out).to.include('[redacted]');
    expect(lines).to.have.length(6);
  });

  it('keeps ordinary fields', () => {
    const { log, lines } = capture();
    log.info({ environment_id: 'env_0123456789abcdef01234567', status: 201 }, 'created');
    const rec = JSON.parse(lines[0]!);
    expect(rec).to.include({ environment_id: 'env_0123456789abcdef01234567', status: 201, msg: 'created', level: 'info' });
  });

  it('scrubString\'s quick pre-check never lets a secret through: same result as applying every pattern, for any text around secrets', () => {
    // The patterns as lib/log.ts defines them, applied unconditionally (the definition).
    const PATTERNS = [
      /\bsk_[0-9a-f]{8,}/g, /\bwhsec_[A-Za-z0-9_-]{8,}/g, /\bsvcph_[0-9a-f]{8,}/g, /\bsvcst_[A-Za-z0-9_-]{8,}/g,
      /\b(?:ya29|xox[abprs])[.-][A-Za-z0-9._-]{8,}/g, /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi,
    ];
    const reference = (s: string) => PATTERNS.reduce((out, re) => out.replace(re, (m) => `${m.slice(0, Math.min(6, m.indexOf('_') + 1 || 6))}[redacted]`), s);
    const piece = fc.oneof(
      fc.string(),
      fc.constantFrom(apiKey, whsec, placeholder, oauth, slack, 'Bearer abcdefgh12345678', 'BASIC dXNlcjpwYXNzd29yZA==', 'svcst_abcdefghijklmnopqrstuv', 'xoxb-0123456789'),
      fc.constantFrom('sk_', 'whsec_', 'ya29.', 'xoxp-', 'bearer ', ' ', '?token=', '/'),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (parts) => {
        const s = parts.join('');
        expect(scrubString(s)).to.equal(reference(s));
      }),
      { numRuns: 2000 },
    );
    expect(scrubString(`x ${apiKey} y`)).to.not.include(apiKey);
  });
});
