import { expect } from 'chai';
import { describeRequest, decodeEncodedWords, mimeHeaders, MAX_DETAIL_VALUE } from '../../../policy-engine/index.js';
import type { RequestDetails } from '../../../policy-engine/index.js';

/**
 * The approval card's details (issue 15, item 2): what a held request would do, decoded
 * from the bytes the agent sent. The agent is the attacker here: every test below that is
 * not a plain decoding is a way to make the card say something other than what the
 * provider will do.
 */
const json = (_n: number) => ({ 'content-type': 'application/json', 'content-length': '1' });
const field = (d: RequestDetails | null, label: string): string | undefined => d?.fields.find((f) => f.label === label)?.value;

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
      expect(field(d, 'To')).to.equal('Ada <ada@example.com>, bob@example.com');
      expect(field(d, 'Cc')).to.equal('Élodíe <elodie@example.com>');
      expect(field(d, 'Bcc')).to.equal('hidden@example.com');
      expect(field(d, 'Subject')).to.equal('Quarterly résults attached');
      expect(d?.unreadable).to.equal(undefined);
    });

    it('attack: a second To header is shown, not dropped (the provider may send to both)', () => {
      const d = gmailSend('To: boss@example.com\nTo: attacker@evil.example\nSubject: hi\n\nx');
      expect(field(d, 'To')).to.include('boss@example.com').and.include('attacker@evil.example');
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
});
