import { expect } from 'chai';
import { agentText, allowedScopes, detailBlocks, escapeMrkdwn, renderSlackCard, type SlackCardInput } from '../../../approval-channels/slack-card.js';
import { describeRequest } from '../../../policy-engine/index.js';

/** The Slack card (approval-channels/slack-card.ts): Block Kit, agent text escaped, buttons up to max_scope. */
describe('Slack approval card (approval-channels/slack-card)', () => {
  const base: SlackCardInput = {
    id: 'apr_0123456789abcdef01234567', environment_id: 'env_0123456789abcdef01234567', connector: 'slack', category: 'send',
    summary: 'POST slack.com /api/chat.postMessage', task_id: null, session_id: null, max_scope: 'permanent', status: 'pending',
    scope: null, decided_via: null, decided_at: null, expires_at: '2026-11-22T10:10:00.000Z', details: null,
  };
  const json = (c: unknown) => JSON.stringify(c);
  const actionIds = (c: ReturnType<typeof renderSlackCard>) => c.blocks.filter((b) => b.type === 'actions').flatMap((b) => (b.elements as Array<{ action_id: string }>).map((e) => e.action_id));

  it('escapes Slack\'s three characters', () => {
    expect(escapeMrkdwn('<!channel> & <@U1> <http://x|y>')).to.equal('&lt;!channel&gt; &amp; &lt;@U1&gt; &lt;http://x|y&gt;');
  });

  it('agent text: escaped, in a code span it cannot close, bounded', () => {
    expect(agentText('a`b<!here>')).to.equal('`aˋb&lt;!here&gt;`');
    expect(agentText('line1\nline2')).to.equal('```line1\nline2```');
    expect(agentText('')).to.equal('_(empty)_');
    expect(agentText('x'.repeat(2000)).length).to.be.below(600);
  });

  const hostile = ['<!channel>', '<!here>', '<!everyone>', '<@U0BOSS>', '<#C0SECRET>', '<http://evil.example|Approve safely>', '<mailto:a@b|x>', '<!subteam^S1>'];
  it('a Slack message the agent would send, mentions and links in its text and blocks: none survives on the card', () => {
    const body = JSON.stringify({ channel: 'C1 <!channel>', text: hostile.join(' '), blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '<!everyone> <http://x|y>' } }] });
    const details = describeRequest({ method: 'POST', host: 'slack.com', path: '/api/chat.postMessage', headers: { 'content-type': 'application/json' }, body: Buffer.from(body) } as never);
    expect(details, 'the decoder reads it').to.not.equal(null);
    const card = renderSlackCard({ ...base, summary: `POST slack.com /api/<!channel>`, task_id: '<@U0BOSS>', session_id: '<!here>', details }, { endUser: '<!everyone>', decidedBy: null });
    const text = json(card);
    for (const h of hostile) expect(text, h).to.not.include(h);
    expect(text).to.include('&lt;!channel&gt;');
    expect(card.text).to.not.match(/[<>]/);
    // plain_text objects (header, buttons) carry no agent text.
    const plains: string[] = [];
    JSON.stringify(card.blocks, (k, v) => {
      if (v && typeof v === 'object' && (v as { type?: string }).type === 'plain_text') plains.push((v as { text: string }).text);
      return v;
    });
    for (const p of plains) expect(p).to.not.match(/[<>]/);
  });

  it('a label carrying the agent\'s words (an MCP argument name with a backtick) cannot open the value\'s code span; a value the card cut is not cut again', () => {
    const blocks = detailBlocks({ kind: 'mcp_tool_call', fields: [{ label: 'transfer.amount`', value: '~1000000~ 10' }, { label: 'x', value: `${'a'.repeat(500)}… (74 more characters)` }] });
    const texts = blocks.map((b) => (b as { text: { text: string } }).text.text);
    expect(texts[0]).to.equal('*transfer.amountˋ*\n`~1000000~ 10`');
    expect(texts[1]).to.include('(74 more characters)');
    expect(texts[1]).to.not.include('not shown');
  });

  it('an unreadable body says so', () => {
    const card = renderSlackCard({ ...base, details: { kind: 'payment', fields: [], unreadable: 'the body is compressed or not UTF-8' } }, { endUser: 'u', decidedBy: null });
    expect(json(card)).to.include('Could not show the content');
  });

  it('buttons up to max_scope; task and session only with their id; deny always', () => {
    expect(actionIds(renderSlackCard(base, { endUser: 'u', decidedBy: null }))).to.deep.equal(['approve:once', 'approve:until', 'approve:permanent', 'deny']);
    expect(actionIds(renderSlackCard({ ...base, task_id: 't', session_id: 's' }, { endUser: 'u', decidedBy: null })))
      .to.deep.equal(['approve:once', 'approve:task', 'approve:session', 'approve:until', 'approve:permanent', 'deny']);
    expect(actionIds(renderSlackCard({ ...base, max_scope: 'once', task_id: 't' }, { endUser: 'u', decidedBy: null }))).to.deep.equal(['approve:once', 'deny']);
    expect(allowedScopes({ max_scope: 'session', task_id: 't', session_id: null })).to.deep.equal(['once', 'task']);
    const card = renderSlackCard(base, { endUser: 'u', decidedBy: null });
    const buttons = card.blocks.filter((b) => b.type === 'actions').flatMap((b) => b.elements as Array<{ value: string }>);
    expect(buttons.every((b) => b.value === base.id)).to.equal(true);
  });

  it('a decided or expired card has no buttons and says who decided and through what', () => {
    const by = (decided_via: SlackCardInput['decided_via'], decidedBy: string | null, status: SlackCardInput['status'] = 'approved') =>
      renderSlackCard({ ...base, status, scope: status === 'approved' ? 'once' : null, decided_via, decided_at: '2026-11-22T10:01:00.000Z' }, { endUser: 'u', decidedBy });
    expect(actionIds(by('slack', 'Ada'))).to.deep.equal([]);
    expect(json(by('slack', 'Ada <@U1>'))).to.include('Slack: Ada &lt;@U1&gt;');
    expect(json(by('console', 'Grace'))).to.include('the console: Grace');
    expect(json(by('api_key', null))).to.include('the API (API key)');
    expect(json(by('signature', null, 'denied'))).to.include('Denied* by a signed callback');
    const expired = renderSlackCard({ ...base, status: 'expired' }, { endUser: 'u', decidedBy: null });
    expect(actionIds(expired)).to.deep.equal([]);
    expect(json(expired)).to.include('Expired');
  });

  it('stays within Slack\'s limits: 50 blocks, 3,000 characters a section', () => {
    const fields = Array.from({ length: 12 }, (_, i) => ({ label: `F${i}`, value: 'v'.repeat(500) }));
    const addresses = Array.from({ length: 200 }, (_, i) => ({ address: `someone${i}@example.com`, name: 'N'.repeat(80) }));
    const card = renderSlackCard({ ...base, details: { kind: 'email', fields: [{ label: 'To', value: '', addresses, more: 5 }, ...fields] } }, { endUser: 'u', decidedBy: null });
    expect(card.blocks.length).to.be.at.most(50);
    for (const b of card.blocks) if (b.type === 'section') expect(((b.text as { text: string }).text).length).to.be.at.most(3000);
  });
});
