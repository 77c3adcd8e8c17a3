import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../../lib/errors.js';

describe('error registry and docs/errors.md', () => {
  const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, number>();
  for (const m of doc.matchAll(/^\|\s*(\d{3})\s*\|\s*`([a-z_]+)`\s*\|/gm)) rows.set(m[2]!, Number(m[1]));

  it('documents every code with its status', () => {
    for (const [code, { status }] of Object.entries(ERROR_CODES)) {
      expect(rows.get(code), `docs/errors.md is missing ${code}`).to.equal(status);
    }
  });

  it('documents no code that does not exist', () => {
    for (const code of rows.keys()) expect(ERROR_CODES, `docs/errors.md names unknown ${code}`).to.have.property(code);
  });
});
