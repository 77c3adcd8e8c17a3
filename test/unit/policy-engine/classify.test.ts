import { expect } from 'chai';
import type { IncomingHttpHeaders } from 'node:http';
import { classify, needsBody, type ClassifyRequest } from '../../../policy-engine/classify/index.js';
import { parseGoogleBatch } from '../../../policy-engine/classify/google-batch.js';

type Req = Partial<ClassifyRequest> & Pick<ClassifyRequest, 'method' | 'path'>;
interface Row {
  req: Req;
  hint?: string;
  want: [connector: string | null, category: string, rule: string];
}

function run(rows: Row[], defaultHost: string): void {
  for (const { req, hint, want } of rows) {
    const r: ClassifyRequest = { host: defaultHost, headers: {}, ...req };
    const extra = r.headers['x-http-method-override'] ? ` (override ${String(r.headers['x-http-method-override'])})` : '';
    it(`${r.method} ${r.host}${r.path}${extra}${hint ? ` [${hint}]` : ''} → ${want[1]} (${want[2]})`, () => {
      const c = classify(r, hint);
      expect([c.connector, c.category, c.rule]).to.deep.equal(want);
    });
  }
}

const U = '/gmail/v1/users/me';

describe('classify: Gmail', () => {
  run(
    [
      { req: { method: 'POST', path: `${U}/messages/send` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: '/upload/gmail/v1/users/me/messages/send?uploadType=multipart' }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: '/gmail/v1/users/someone%40example.com/messages/send', host: 'www.googleapis.com' }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/drafts/send` }, want: ['gmail', 'send', 'gmail.drafts.send'] },
      { req: { method: 'POST', path: '/upload/gmail/v1/users/me/drafts/send' }, want: ['gmail', 'send', 'gmail.drafts.send'] },
      { req: { method: 'DELETE', path: `${U}/messages/18c1f0a2b3` }, want: ['gmail', 'delete', 'gmail.messages.delete'] },
      { req: { method: 'POST', path: `${U}/messages/batchDelete` }, want: ['gmail', 'delete', 'gmail.messages.batchDelete'] },
      { req: { method: 'POST', path: `${U}/messages/18c1f0a2b3/trash` }, want: ['gmail', 'delete', 'gmail.messages.trash'] },
      { req: { method: 'DELETE', path: `${U}/threads/18c1` }, want: ['gmail', 'delete', 'gmail.threads.delete'] },
      { req: { method: 'POST', path: `${U}/threads/18c1/trash` }, want: ['gmail', 'delete', 'gmail.threads.trash'] },
      { req: { method: 'DELETE', path: `${U}/drafts/r-123` }, want: ['gmail', 'delete', 'gmail.drafts.delete'] },
      { req: { method: 'POST', path: `${U}/messages/1/modify`, body: '{"addLabelIds":["TRASH"]}' }, want: ['gmail', 'delete', 'gmail.messages.modify.trash'] },
      { req: { method: 'POST', path: `${U}/messages/1/modify`, body: Buffer.from('{"addLabelIds":["STARRED"],"removeLabelIds":["TRASH"]}') }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'POST', path: `${U}/messages/1/modify` }, want: ['gmail', 'delete', 'gmail.messages.modify.unreadable'] },
      { req: { method: 'POST', path: `${U}/messages/batchModify`, body: '{"ids":["1"],"addLabelIds":["trash"]}' }, want: ['gmail', 'delete', 'gmail.messages.batchModify.trash'] },
      { req: { method: 'POST', path: `${U}/threads/1/modify`, body: '{"addLabelIds":["TRASH"]}' }, want: ['gmail', 'delete', 'gmail.threads.modify.trash'] },
      { req: { method: 'POST', path: `${U}/settings/delegates` }, want: ['gmail', 'change_permission', 'gmail.settings.delegates'] },
      { req: { method: 'DELETE', path: `${U}/settings/delegates/a%40b.c` }, want: ['gmail', 'change_permission', 'gmail.settings.delegates'] },
      { req: { method: 'POST', path: `${U}/settings/forwardingAddresses` }, want: ['gmail', 'change_permission', 'gmail.settings.forwardingAddresses'] },
      { req: { method: 'PUT', path: `${U}/settings/autoForwarding` }, want: ['gmail', 'change_permission', 'gmail.settings.autoForwarding'] },
      { req: { method: 'POST', path: `${U}/settings/filters`, body: '{"criteria":{"from":"x"},"action":{"forward":"evil@example.com"}}' }, want: ['gmail', 'change_permission', 'gmail.settings.filters.forward'] },
      { req: { method: 'POST', path: `${U}/settings/filters`, body: '{"criteria":{"from":"x"},"action":{"addLabelIds":["L1"]}}' }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'GET', path: `${U}/settings/delegates` }, want: ['gmail', 'read', 'gmail.read'] },
      // other GETs read, other non-GETs write
      { req: { method: 'GET', path: `${U}/messages?q=from%3Aboss` }, want: ['gmail', 'read', 'gmail.read'] },
      { req: { method: 'GET', path: `${U}/messages/send` }, want: ['gmail', 'read', 'gmail.read'] },
      { req: { method: 'GET', path: `${U}/profile` }, want: ['gmail', 'read', 'gmail.read'] },
      { req: { method: 'HEAD', path: `${U}/messages/1` }, want: ['gmail', 'read', 'gmail.read'] },
      { req: { method: 'POST', path: `${U}/drafts` }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'PUT', path: `${U}/drafts/r-1` }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'POST', path: `${U}/messages/import` }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'POST', path: `${U}/messages/1/untrash` }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'POST', path: `${U}/labels` }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'DELETE', path: `${U}/labels/Label_1` }, want: ['gmail', 'write', 'gmail.write'] },
      // X-HTTP-Method-Override counts as the method
      { req: { method: 'POST', path: `${U}/messages/1`, headers: { 'x-http-method-override': 'DELETE' } }, want: ['gmail', 'delete', 'gmail.messages.delete'] },
      { req: { method: 'POST', path: `${U}/messages?q=long`, headers: { 'x-http-method-override': 'GET' } }, want: ['gmail', 'read', 'gmail.read'] },
      { req: { method: 'GET', path: `${U}/messages/send`, headers: { 'x-http-method-override': 'post' } }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/drafts/r-1`, headers: { 'x-http-method-override': 'PUT' } }, want: ['gmail', 'write', 'gmail.write'] },
      { req: { method: 'POST', path: `${U}/messages/1`, headers: { 'x-http-method-override': ['GET', 'DELETE'] } }, want: ['gmail', 'delete', 'gmail.messages.delete'] },
      // normalization: evasions land on the right row
      { req: { method: 'POST', path: `${U}/messages/%73end` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/messages/SEND` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `//gmail/v1//users/me/messages/send/` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/labels/../messages/send` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'post', path: `${U}/messages/send`, host: 'GMAIL.googleapis.com:443' }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/messages/send`, host: 'gmail.googleapis.com.' }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `https://gmail.googleapis.com${U}/messages/send` }, want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/messages/send`, host: 'content.googleapis.com' }, want: ['gmail', 'send', 'gmail.messages.send'] },
      // the hint names the connector
      { req: { method: 'POST', path: `${U}/messages/send` }, hint: 'gmail', want: ['gmail', 'send', 'gmail.messages.send'] },
      { req: { method: 'POST', path: `${U}/messages/send` }, hint: 'secret:GOOGLE_TOKEN', want: ['secret:GOOGLE_TOKEN', 'send', 'gmail.messages.send'] },
    ],
    'gmail.googleapis.com',
  );
});

const C = '/calendar/v3/calendars/primary';

describe('classify: Calendar', () => {
  run(
    [
      { req: { method: 'POST', path: `${C}/events` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events?sendUpdates=none` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events?sendUpdates=all` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'POST', path: `${C}/events?conferenceDataVersion=1&sendUpdates=externalOnly` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'PUT', path: `${C}/events/ev1?sendUpdates=all` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'PATCH', path: `${C}/events/ev1?sendUpdates=ALL` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'PATCH', path: `${C}/events/ev1` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'PUT', path: `${C}/events/ev1?sendUpdates=none&sendUpdates=all` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'POST', path: `${C}/events?sendNotifications=true` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'POST', path: `${C}/events?sendNotifications=false` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events/import` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events/quickAdd?text=Lunch` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events/quickAdd?text=Lunch&sendUpdates=all` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'POST', path: `${C}/events/ev1/move?destination=work` }, want: ['calendar', 'write', 'calendar.events.write'] },
      { req: { method: 'POST', path: `${C}/events/ev1/move?destination=work&sendUpdates=externalOnly` }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'DELETE', path: `${C}/events/ev1` }, want: ['calendar', 'delete', 'calendar.events.delete'] },
      { req: { method: 'DELETE', path: `${C}/events/ev1?sendUpdates=all` }, want: ['calendar', 'delete', 'calendar.events.delete'] },
      { req: { method: 'POST', path: `${C}/events/ev1`, headers: { 'x-http-method-override': 'DELETE' } }, want: ['calendar', 'delete', 'calendar.events.delete'] },
      { req: { method: 'POST', path: `${C}/events/ev1?sendUpdates=all`, headers: { 'x-http-method-override': 'PATCH' } }, want: ['calendar', 'send', 'calendar.events.send'] },
      { req: { method: 'POST', path: `${C}/acl` }, want: ['calendar', 'change_permission', 'calendar.acl'] },
      { req: { method: 'PUT', path: `${C}/acl/user%3Aa%40b.c` }, want: ['calendar', 'change_permission', 'calendar.acl'] },
      { req: { method: 'PATCH', path: `${C}/acl/user:a@b.c` }, want: ['calendar', 'change_permission', 'calendar.acl'] },
      { req: { method: 'DELETE', path: `${C}/acl/user:a@b.c` }, want: ['calendar', 'change_permission', 'calendar.acl'] },
      { req: { method: 'POST', path: '/calendar/v3/calendars/team%40group.calendar.google.com/acl?sendNotifications=true' }, want: ['calendar', 'change_permission', 'calendar.acl'] },
      { req: { method: 'GET', path: `${C}/acl` }, want: ['calendar', 'read', 'calendar.read'] },
      { req: { method: 'DELETE', path: '/calendar/v3/calendars/cal123' }, want: ['calendar', 'delete', 'calendar.calendars.delete'] },
      { req: { method: 'POST', path: `${C}/clear` }, want: ['calendar', 'delete', 'calendar.calendars.clear'] },
      { req: { method: 'POST', path: '/calendar/v3/freeBusy' }, want: ['calendar', 'read', 'calendar.freeBusy'] },
      { req: { method: 'GET', path: `${C}/events?timeMin=2026-01-01T00:00:00Z` }, want: ['calendar', 'read', 'calendar.read'] },
      { req: { method: 'GET', path: `${C}/events/ev1/instances?sendUpdates=all` }, want: ['calendar', 'read', 'calendar.read'] },
      { req: { method: 'GET', path: '/calendar/v3/users/me/calendarList' }, want: ['calendar', 'read', 'calendar.read'] },
      { req: { method: 'POST', path: '/calendar/v3/calendars' }, want: ['calendar', 'write', 'calendar.write'] },
      { req: { method: 'PATCH', path: '/calendar/v3/calendars/cal123' }, want: ['calendar', 'write', 'calendar.write'] },
      { req: { method: 'DELETE', path: '/calendar/v3/users/me/calendarList/cal123' }, want: ['calendar', 'write', 'calendar.write'] },
      { req: { method: 'POST', path: '/calendar/v3/channels/stop' }, want: ['calendar', 'write', 'calendar.write'] },
      { req: { method: 'POST', path: `${C}/events` }, hint: 'calendar', want: ['calendar', 'write', 'calendar.events.write'] },
    ],
    'www.googleapis.com',
  );
});

function batchBody(boundary: string, parts: string[], eol = '\r\n'): string {
  return [...parts.flatMap((p) => [`--${boundary}`, 'Content-Type: application/http', 'Content-ID: <item>', '', ...p.split('\n')]), `--${boundary}--`, ''].join(eol);
}

const MM = (b: string): Record<string, string> => ({ 'content-type': `multipart/mixed; boundary=${b}` });

describe('classify: Google batch', () => {
  const readPart = `GET ${U}/messages/1 HTTP/1.1\n`;
  const sendPart = `POST ${U}/messages/send HTTP/1.1\nContent-Type: application/json\n\n{"raw":"eA"}`;
  const trashPart = `POST ${U}/messages/1/trash\n`;
  const modifyPart = (labels: string): string => `POST ${U}/messages/2/modify HTTP/1.1\nContent-Type: application/json\n\n{"addLabelIds":${labels}}`;
  run(
    [
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: batchBody('b1', [readPart, readPart]) }, want: ['gmail', 'read', 'google.batch(gmail.read)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: Buffer.from(batchBody('b1', [readPart, sendPart, readPart])) }, want: ['gmail', 'send', 'google.batch(gmail.messages.send)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: batchBody('b1', [sendPart, trashPart]) }, want: ['gmail', 'delete', 'google.batch(gmail.messages.trash)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: batchBody('b1', [modifyPart('["TRASH"]')]) }, want: ['gmail', 'delete', 'google.batch(gmail.messages.modify.trash)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: batchBody('b1', [modifyPart('["STARRED"]')]) }, want: ['gmail', 'write', 'google.batch(gmail.write)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b1'), body: batchBody('b1', [`POST ${U}/messages/1\nX-HTTP-Method-Override: DELETE\n`]) }, want: ['gmail', 'delete', 'google.batch(gmail.messages.delete)'] },
      { req: { method: 'POST', path: '/batch/calendar/v3', headers: MM('x'), body: batchBody('x', [`PATCH ${C}/events/e1?sendUpdates=all`, `GET ${C}/events`]) }, want: ['calendar', 'send', 'google.batch(calendar.events.send)'] },
      { req: { method: 'POST', path: '/batch/calendar/v3', headers: MM('x'), body: batchBody('x', [`POST ${C}/acl`, `DELETE ${C}/events/e1`]) }, want: ['calendar', 'change_permission', 'google.batch(calendar.acl)'] },
      { req: { method: 'POST', path: '/batch', headers: MM('x'), body: batchBody('x', [`GET https://www.googleapis.com${C}/events`, `DELETE https://www.googleapis.com${C}/events/e1`]) }, want: ['calendar', 'delete', 'google.batch(calendar.events.delete)'] },
      { req: { method: 'POST', path: '/batch', headers: MM('x'), body: batchBody('x', [`GET ${C}/events`, readPart]) }, want: [null, 'read', 'google.batch(calendar.read)'] },
      { req: { method: 'POST', path: '/batch', headers: MM('x'), body: batchBody('x', [`GET ${C}/events`, readPart]) }, hint: 'gmail', want: ['gmail', 'read', 'google.batch(calendar.read)'] },
      // boundary forms and line endings
      { req: { method: 'POST', path: '/batch/gmail/v1', contentType: 'multipart/mixed; boundary="batch_foo bar"', body: batchBody('batch_foo bar', [sendPart]) }, want: ['gmail', 'send', 'google.batch(gmail.messages.send)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('lf'), body: batchBody('lf', [readPart, sendPart], '\n') }, want: ['gmail', 'send', 'google.batch(gmail.messages.send)'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b'), body: 'preamble\r\n' + batchBody('b', [readPart]) + 'epilogue' }, want: ['gmail', 'read', 'google.batch(gmail.read)'] },
      // unparsable: fail closed to the most dangerous category
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b') }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'application/json' }, body: '{}' }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed' }, body: batchBody('b', [readPart]) }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('other'), body: batchBody('b', [readPart]) }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b'), body: '--b\r\nContent-Type: text/plain\r\n\r\nGET /x\r\n--b--' }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b'), body: '--b\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: base64\r\n\r\nR0VUIC94\r\n--b--' }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b'), body: batchBody('b', ['not a request line at all']) }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch/gmail/v1', headers: MM('b'), body: batchBody('b', [`POST /batch/gmail/v1\nContent-Type: multipart/mixed; boundary=c\n\n--c\n--c--`]) }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
      { req: { method: 'POST', path: '/batch', headers: MM('b'), body: '' }, want: [null, 'change_permission', 'google.batch.unparsable'] },
      // Issue 9: a batch path is a batch whatever the method; with no body it is unreadable.
      { req: { method: 'GET', path: '/batch/gmail/v1' }, want: ['gmail', 'change_permission', 'google.batch.unparsable'] },
    ],
    'www.googleapis.com',
  );

  it('returns each part classified', () => {
    const c = classify({ method: 'POST', host: 'www.googleapis.com', path: '/batch/gmail/v1', headers: MM('b'), body: batchBody('b', [readPart, sendPart]) }, 'gmail');
    expect(c.parts).to.deep.equal([
      { connector: 'gmail', category: 'read', rule: 'gmail.read' },
      { connector: 'gmail', category: 'send', rule: 'gmail.messages.send' },
    ]);
  });

  it('parses the inner requests', () => {
    const r = parseGoogleBatch('multipart/mixed; boundary=b', batchBody('b', [sendPart]), 'gmail.googleapis.com');
    if (!r.ok) throw new Error(r.why);
    expect(r.parts).to.have.length(1);
    expect(r.parts[0]).to.deep.include({ method: 'POST', host: 'gmail.googleapis.com', path: `${U}/messages/send`, contentType: 'application/json' });
    // the inner body comes back as the bytes sent, so body conditions read it as strict UTF-8
    expect(Buffer.from(r.parts[0]!.body as Uint8Array).toString('utf8')).to.equal('{"raw":"eA"}');
  });
});

describe('classify: Slack', () => {
  const api = (m: string, method = 'POST', hint?: string): Row['req'] & { hint?: string } => ({ method, path: `/api/${m}`, ...(hint ? { hint } : {}) });
  const rows: Row[] = [];
  const add = (names: string[], category: string, rule: string): void => {
    for (const n of names) for (const verb of ['POST', 'GET']) rows.push({ req: api(n, verb), want: ['slack', category, rule] });
  };
  add(['chat.postMessage', 'chat.postEphemeral', 'chat.scheduleMessage', 'chat.meMessage', 'chat.update', 'files.completeUploadExternal', 'files.upload', 'files.remote.share', 'chat.unfurl', 'chat.command'], 'send', 'slack.send');
  add(['chat.delete', 'chat.deleteScheduledMessage', 'files.delete', 'files.comments.delete', 'files.remote.remove'], 'delete', 'slack.delete');
  add(['conversations.invite', 'conversations.kick', 'conversations.inviteShared', 'files.sharedPublicURL', 'files.revokePublicURL', 'conversations.acceptSharedInvite', 'conversations.approveSharedInvite', 'conversations.externalInvitePermissions.set', 'usergroups.users.update', 'canvases.access.set', 'canvases.access.delete'], 'change_permission', 'slack.change_permission');
  add(['conversations.history', 'conversations.replies', 'conversations.list', 'conversations.info', 'conversations.members', 'users.list', 'users.info', 'users.conversations', 'users.lookupByEmail', 'users.identity', 'users.getPresence', 'users.profile.get', 'auth.test', 'api.test', 'team.info', 'bots.info'], 'read', 'slack.read');
  add(['search.messages', 'search.all', 'search.files', 'emoji.list', 'pins.list', 'reactions.get', 'files.info', 'chat.getPermalink', 'bookmarks.list', 'dnd.info', 'usergroups.users.list', 'admin.users.list'], 'read', 'slack.read_shaped');
  add(['admin.users.invite', 'admin.conversations.setTeams', 'admin.apps.approve'], 'change_permission', 'slack.admin');
  add(['conversations.archive', 'reactions.add', 'conversations.create', 'reminders.add', 'pins.add', 'does.notExist'], 'write', 'slack.unknown');
  rows.push(
    { req: { method: 'POST', path: '/api/CHAT.POSTMESSAGE' }, want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'POST', path: '/api/chat.postMessage?channel=C1&text=hi' }, want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'POST', path: '/api/chat.%70ostMessage' }, want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'POST', path: '/api/chat.postMessage/' }, want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'POST', path: '/api/chat.postMessage', host: 'acme.slack.com' }, want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'GET', path: '/api/conversations.history', headers: { 'x-http-method-override': 'DELETE' } }, want: ['slack', 'read', 'slack.read'] },
    { req: { method: 'POST', path: '/api/chat.postMessage' }, hint: 'slack', want: ['slack', 'send', 'slack.send'] },
    { req: { method: 'POST', path: '/api/chat.postMessage' }, hint: 'secret:SLACK_BOT', want: ['secret:SLACK_BOT', 'send', 'slack.send'] },
    // not the Web API: the method rule
    { req: { method: 'GET', path: '/files-pri/T1-F1/report.pdf', host: 'files.slack.com' }, want: [null, 'read', 'generic.read'] },
    { req: { method: 'POST', path: '/api' }, want: [null, 'write', 'generic.write'] },
  );
  run(rows, 'slack.com');
});

describe('classify: Stripe (secret connectors)', () => {
  const S = 'secret:STRIPE_KEY';
  run(
    [
      { req: { method: 'POST', path: '/v1/charges' }, hint: S, want: [S, 'pay', 'stripe.charges'] },
      { req: { method: 'POST', path: '/v1/payment_intents' }, hint: S, want: [S, 'pay', 'stripe.payment_intents'] },
      { req: { method: 'POST', path: '/v1/payment_intents/pi_123/confirm' }, hint: S, want: [S, 'pay', 'stripe.payment_intents.confirm'] },
      { req: { method: 'POST', path: '/v1/payouts' }, hint: S, want: [S, 'pay', 'stripe.payouts'] },
      { req: { method: 'POST', path: '/v1/transfers' }, hint: S, want: [S, 'pay', 'stripe.transfers'] },
      { req: { method: 'POST', path: '/v1/refunds' }, hint: S, want: [S, 'pay', 'stripe.refunds'] },
      { req: { method: 'POST', path: '/v1/payment_intents/pi_1/capture' }, hint: S, want: [S, 'pay', 'stripe.payment_intents.capture'] },
      { req: { method: 'POST', path: '/v1/payment_intents/pi_1/increment_authorization' }, hint: S, want: [S, 'pay', 'stripe.payment_intents.increment_authorization'] },
      { req: { method: 'POST', path: '/v1/charges/ch_1/capture' }, hint: S, want: [S, 'pay', 'stripe.charges.capture'] },
      { req: { method: 'POST', path: '/v1/charges/ch_1/refund' }, hint: S, want: [S, 'pay', 'stripe.charges.refund'] },
      { req: { method: 'POST', path: '/v1/charges/ch_1/refunds' }, hint: S, want: [S, 'pay', 'stripe.charges.refunds'] },
      { req: { method: 'POST', path: '/v1/invoices/in_1/pay' }, hint: S, want: [S, 'pay', 'stripe.invoices.pay'] },
      { req: { method: 'POST', path: '/v1/payouts/po_1/reverse' }, hint: S, want: [S, 'pay', 'stripe.payouts.reverse'] },
      { req: { method: 'POST', path: '/v1/transfers/tr_1/reversals' }, hint: S, want: [S, 'pay', 'stripe.transfers.reversals'] },
      { req: { method: 'POST', path: '/v1/topups' }, hint: S, want: [S, 'pay', 'stripe.topups'] },
      { req: { method: 'POST', path: '/v1/treasury/outbound_payments' }, hint: S, want: [S, 'pay', 'stripe.treasury.outbound_payments'] },
      { req: { method: 'POST', path: '/v1/treasury/outbound_transfers' }, hint: S, want: [S, 'pay', 'stripe.treasury.outbound_transfers'] },
      { req: { method: 'GET', path: '/v1/charges?limit=3' }, hint: S, want: [S, 'read', 'stripe.read'] },
      { req: { method: 'GET', path: '/v1/payment_intents/pi_1' }, hint: S, want: [S, 'read', 'stripe.read'] },
      { req: { method: 'POST', path: '/v1/customers' }, hint: S, want: [S, 'write', 'stripe.write'] },
      { req: { method: 'POST', path: '/v1/payment_intents/pi_1' }, hint: S, want: [S, 'write', 'stripe.write'] },
      { req: { method: 'DELETE', path: '/v1/customers/cus_1' }, hint: S, want: [S, 'write', 'stripe.write'] },
      { req: { method: 'POST', path: '/v1/Charges' }, hint: S, want: [S, 'pay', 'stripe.charges'] },
      { req: { method: 'POST', path: '/v1/charges', host: 'api.stripe.com:443' }, hint: S, want: [S, 'pay', 'stripe.charges'] },
      // Stripe ignores the override: the wire POST still pays
      { req: { method: 'POST', path: '/v1/charges', headers: { 'x-http-method-override': 'GET' } }, hint: S, want: [S, 'pay', 'stripe.charges'] },
      { req: { method: 'GET', path: '/v1/refunds', headers: { 'x-http-method-override': 'POST' } }, hint: S, want: [S, 'pay', 'stripe.refunds'] },
      { req: { method: 'POST', path: '/v1/charges' }, want: [null, 'pay', 'stripe.charges'] },
    ],
    'api.stripe.com',
  );
});

describe('classify: generic (method rule)', () => {
  const S = 'secret:API';
  run(
    [
      { req: { method: 'GET', path: '/v2/items?q=1' }, hint: S, want: [S, 'read', 'generic.read'] },
      { req: { method: 'HEAD', path: '/v2/items' }, hint: S, want: [S, 'read', 'generic.read'] },
      { req: { method: 'OPTIONS', path: '/v2/items' }, hint: S, want: [S, 'read', 'generic.read'] },
      { req: { method: 'get', path: '/v2/items' }, hint: S, want: [S, 'read', 'generic.read'] },
      { req: { method: 'POST', path: '/v2/items' }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'PUT', path: '/v2/items/1' }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'PATCH', path: '/v2/items/1' }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'DELETE', path: '/v2/items/1' }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'PROPFIND', path: '/dav' }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'GET', path: '/v2/items', headers: { 'x-http-method-override': 'DELETE' } }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'POST', path: '/v2/items', headers: { 'x-http-method-override': 'GET' } }, hint: S, want: [S, 'write', 'generic.write'] },
      { req: { method: 'GET', path: '/v2/items' }, want: [null, 'read', 'generic.read'] },
      { req: { method: 'POST', path: 'https://api.example.com/v2/items' }, hint: S, want: [S, 'write', 'generic.write'] },
      // the Gmail path on a non-Google host is not Gmail
      { req: { method: 'GET', path: `${U}/messages/send`, host: 'evil.example.com' }, want: [null, 'read', 'generic.read'] },
      // a Google API without a table: the method rule, override honoured as Google does
      { req: { method: 'POST', path: '/drive/v3/files', host: 'www.googleapis.com' }, hint: S, want: [S, 'write', 'google.write'] },
      { req: { method: 'POST', path: '/drive/v3/files?q=x', host: 'www.googleapis.com', headers: { 'x-http-method-override': 'GET' } }, hint: S, want: [S, 'read', 'google.read'] },
    ],
    'api.example.com',
  );
});

describe('classify: needsBody', () => {
  const cases: Array<[string, string, string, boolean]> = [
    ['POST', 'www.googleapis.com', '/batch/gmail/v1', true],
    ['POST', 'www.googleapis.com', '/batch', true],
    ['GET', 'www.googleapis.com', '/batch', true],
    ['POST', 'gmail.googleapis.com', `${U}/messages/1/modify`, true],
    ['POST', 'gmail.googleapis.com', `${U}/messages/batchModify`, true],
    ['POST', 'gmail.googleapis.com', `${U}/threads/1/modify`, true],
    ['POST', 'gmail.googleapis.com', `${U}/settings/filters`, true],
    ['POST', 'gmail.googleapis.com', `${U}/messages/send`, false],
    ['POST', 'slack.com', '/api/chat.postMessage', false],
    ['POST', 'api.stripe.com', '/v1/charges', false],
    ['POST', 'api.stripe.com', '/v1/customers', true],
    ['POST', 'api.stripe.com', '/v1/customers/cus_1', true],
    ['GET', 'api.stripe.com', '/v1/customers/cus_1', false],
    ['POST', 'api.stripe.com', '/v1/customers/cus_1/sources', false],
    ['POST', 'api.stripe.com', '/v1/accounts/acct_1', true],
  ];
  for (const [method, host, path, want] of cases) {
    it(`${method} ${host}${path} → ${want}`, () => expect(needsBody({ method, host, path, headers: {} })).to.equal(want));
  }
});

describe('classify: robustness', () => {
  it('takes Node request headers as they come (IncomingHttpHeaders, repeated headers as arrays)', () => {
    const headers: IncomingHttpHeaders = { 'x-http-method-override': 'DELETE', 'set-cookie': ['a=1', 'b=2'], 'content-type': 'application/json' };
    const c = classify({ method: 'POST', host: 'gmail.googleapis.com', path: `${U}/messages/1`, headers, body: Buffer.alloc(0) }, 'gmail');
    expect(c.category).to.equal('delete');
  });

  it('never throws on odd input', () => {
    const odd: ClassifyRequest[] = [
      { method: '', host: '', path: '', headers: {} },
      { method: 'GET', host: '[::1]:8080', path: '/%E0%A4%A', headers: {} },
      { method: 'POST', host: 'www.googleapis.com', path: '/batch', headers: { 'content-type': 'multipart/mixed; boundary=' }, body: '--\r\n' },
      { method: 'POST', host: 'www.googleapis.com', path: '/batch', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: new Uint8Array([0xff, 0xfe, 0x00]) },
      { method: 'POST', host: 'gmail.googleapis.com', path: `${U}/messages/1/modify`, headers: {}, body: 'not json' },
      { method: 'POST', host: 'slack.com', path: '/api/..', headers: {} },
      { method: 'POST', host: 'x', path: 'not a url', headers: {} },
    ];
    for (const r of odd) expect(() => classify(r)).not.to.throw();
  });
});
