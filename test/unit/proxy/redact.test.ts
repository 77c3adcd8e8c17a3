import { expect } from 'chai';
import fc from 'fast-check';
import { StreamRedactor } from '../../../proxy/redact.js';
import { redactionsFor } from '../../../proxy/credentials.js';

/** Feeds `text` to a fresh redactor in the given chunk sizes and returns what comes out. */
function run(pairs: { sent: string; shown: string }[], text: string, cuts: number[]): { out: string; replaced: number } {
  const r = new StreamRedactor(pairs);
  const buf = Buffer.from(text, 'utf8');
  const out: Buffer[] = [];
  let at = 0;
  for (const c of cuts) {
    if (at >= buf.length) break;
    out.push(...r.push(buf.subarray(at, Math.min(buf.length, at + c))));
    at += c;
  }
  if (at < buf.length) out.push(...r.push(buf.subarray(at)));
  out.push(...r.end());
  return { out: Buffer.concat(out).toString('utf8'), replaced: r.replaced };
}

describe('StreamRedactor (proxy/redact)', () => {
  const SECRET = 'sk_live_abcdefgh';
  const TOKEN = 'svcph_0123456789abcdef0123456789abcdef';

  it('replaces every occurrence, whatever the chunking (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant(SECRET), fc.string({ maxLength: 20 }), fc.constant('sk_live_'), fc.constant('sk_')), { maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 60 }), (parts, cuts) => {
          const text = parts.join('');
          const { out } = run([{ sent: SECRET, shown: TOKEN }], text, cuts);
          expect(out).to.equal(text.split(SECRET).join(TOKEN));
        }),
      { numRuns: 500 },
    );
  });

  it('holds back only a tail that could start a value: a stream is not delayed otherwise', () => {
    const r = new StreamRedactor([{ sent: SECRET, shown: TOKEN }]);
    expect(Buffer.concat(r.push(Buffer.from('data: {"x":1}\n\n'))).toString()).to.equal('data: {"x":1}\n\n');
    expect(Buffer.concat(r.push(Buffer.from('data: sk_li'))).toString()).to.equal('data: ');
    expect(Buffer.concat(r.push(Buffer.from('ve_abcdefgh!'))).toString()).to.equal(`${TOKEN}!`);
    expect(Buffer.concat(r.push(Buffer.from('sk_x'))).toString()).to.equal('sk_x');
    expect(r.replaced).to.equal(1);
  });

  it('the longest spelling wins at one position; headers are redacted and counted', () => {
    const r = new StreamRedactor(redactionsFor('a/b c"d', TOKEN));
    expect(r.header('x=a%2Fb%20c%22d;y=a/b c"d')).to.equal(`x=${TOKEN};y=${TOKEN}`);
    expect(r.replaced).to.equal(2);
    expect(Buffer.concat([...r.push(Buffer.from('"a\\/b c\\"d" a+b')), ...r.end()]).toString()).to.equal(`"${TOKEN}" a+b`);
  });

  it('an empty list is inactive and passes bytes through', () => {
    const r = new StreamRedactor([]);
    expect(r.active).to.equal(false);
    expect(Buffer.concat(r.push(Buffer.from('abc'))).toString()).to.equal('abc');
  });
});
