/**
 * Property tests for the classifier's fail-closed readings (issue 9, hole 5): whatever
 * the formatting or the spelling, a dangerous request never comes out as a harmless one,
 * and a harmless one written any legitimate way is still read.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { dangerRank, type Category } from '../../../policy-engine/categories.js';
import { classify } from '../../../policy-engine/classify/index.js';
import { bodyJsonStrict } from '../../../policy-engine/classify/http.js';

const RUNS = { numRuns: 500 };
const U = '/gmail/v1/users/me';

describe('classify properties: strict JSON bodies', () => {
  it('any JSON text without repeated keys reads as JSON.parse reads it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        expect(bodyJsonStrict(text, {})).to.deep.equal(JSON.parse(text));
        expect(bodyJsonStrict(Buffer.from(text), {})).to.deep.equal(JSON.parse(text));
      }),
      RUNS,
    );
  });

  it('an object with a key repeated, at any depth, never reads', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), fc.nat(4), (obj, depth) => {
        const key = Object.keys(obj)[0]!;
        // `{"k":<x>, ...obj}`: k appears twice in the same object
        let text = `{${JSON.stringify(key)}:0,${JSON.stringify(obj).slice(1)}`;
        for (let i = 0; i < depth; i++) text = i % 2 ? `{"n":${text}}` : `[${text}]`;
        expect(bodyJsonStrict(text, {})).to.equal(undefined);
      }),
      RUNS,
    );
  });
});

describe('classify properties: Gmail label changes', () => {
  const spelling = fc.constantFrom('addLabelIds', 'add_label_ids', 'AddLabelIds', 'ADD_LABEL_IDS', 'add-label-ids', 'addLabelIds\u0000');
  const label = fc.oneof(fc.constantFrom('STARRED', 'UNREAD', 'Label_12', 'IMPORTANT', 'INBOX'), fc.constantFrom('TRASH', 'trash', ' TRASH', 'Trash', 'xTRASHx'));
  const labels = fc.array(label, { maxLength: 4 });

  it('a body whose label lists name TRASH is a delete, one without is a write, whatever the spelling', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(spelling, labels), { maxLength: 3 }), fc.constantFrom(`${U}/messages/1/modify`, `${U}/threads/1/modify`, `${U}/messages/batchModify`), (members, path) => {
        const obj: Record<string, unknown> = { removeLabelIds: ['TRASH'] };
        for (const [k, v] of members) obj[k] = v;
        const body = JSON.stringify(obj);
        const trash = Object.entries(obj).some(([k, v]) => k !== 'removeLabelIds' && (v as string[]).some((l) => l.toUpperCase().includes('TRASH')));
        const c = classify({ method: 'POST', host: 'gmail.googleapis.com', path, headers: { 'content-type': 'application/json' }, body });
        expect(c.category, body).to.equal(trash ? 'delete' : 'write');
      }),
      RUNS,
    );
  });

  it('any text that is not one JSON object is a delete', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        let obj = false;
        try {
          const v: unknown = JSON.parse(text);
          obj = typeof v === 'object' && v !== null && !Array.isArray(v);
        } catch {
          obj = false;
        }
        fc.pre(!obj);
        const c = classify({ method: 'POST', host: 'gmail.googleapis.com', path: `${U}/messages/1/modify`, headers: {}, body: text });
        expect(c.category).to.equal('delete');
      }),
      RUNS,
    );
  });
});

describe('classify properties: Google batches', () => {
  const parts: Record<string, Category> = {
    [`GET ${U}/messages/1`]: 'read',
    [`POST ${U}/drafts`]: 'write',
    [`POST ${U}/messages/send`]: 'send',
    [`DELETE ${U}/messages/1`]: 'delete',
    [`POST /calendar/v3/calendars/primary/acl`]: 'change_permission',
  };
  const part = fc.constantFrom(...Object.keys(parts));
  const eol = fc.constantFrom('\r\n', '\n');
  const pad = fc.constantFrom('', ' ', '\t', ' \t ');
  const boundary = fc.stringMatching(/^[0-9A-Za-z'()+_,\-./:=?]{1,40}$/);

  function build(b: string, reqs: string[], e: string, p: string, preamble: string, epilogue: string): string {
    const lines = [preamble];
    for (const r of reqs) lines.push(`--${b}${p}`, 'Content-Type: application/http', 'Content-ID: <x>', '', r, '');
    lines.push(`--${b}--${p}`, epilogue);
    return lines.join(e);
  }

  it('a well-formed batch, formatted any legitimate way, takes its most dangerous part', () => {
    fc.assert(
      fc.property(boundary, fc.array(part, { minLength: 1, maxLength: 5 }), eol, pad, fc.boolean(), (b, reqs, e, p, quoted) => {
        const ct = `multipart/mixed; boundary=${quoted ? `"${b}"` : b}`;
        const body = build(b, reqs, e, p, 'preamble', 'epilogue');
        // the boundary must not occur in the content itself (RFC 2046: a sender picks one that does not)
        const content = ['preamble', 'epilogue', 'Content-Type: application/http', 'Content-ID: <x>', ...Object.keys(parts)].join('\n').toLowerCase();
        fc.pre(!content.includes(`--${b.toLowerCase()}`));
        const c = classify({ method: 'POST', host: 'www.googleapis.com', path: '/batch', headers: { 'content-type': ct }, body });
        const want = reqs.map((r) => parts[r]!).reduce((a, x) => (dangerRank(x) > dangerRank(a) ? x : a));
        expect(c.category).to.equal(want);
      }),
      RUNS,
    );
  });

  it('the boundary written anywhere else, in any case, makes the batch unparsable', () => {
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 4 }), eol, fc.nat(), fc.boolean(), (reqs, e, at, upper) => {
        const b = 'batch_x1';
        const body = build(b, reqs, e, '', '', '');
        const i = at % (body.length + 1);
        const mutated = body.slice(0, i) + (upper ? '--BATCH_X1' : '--batch_x1') + body.slice(i);
        const c = classify({ method: 'POST', host: 'www.googleapis.com', path: '/batch/gmail/v1', headers: { 'content-type': `multipart/mixed; boundary=${b}` }, body: mutated });
        expect([c.category, c.rule], JSON.stringify(mutated)).to.deep.equal(['change_permission', 'google.batch.unparsable']);
      }),
      RUNS,
    );
  });
});
