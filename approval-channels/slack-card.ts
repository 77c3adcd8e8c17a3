/**
 * The Slack card of an approval (Block Kit), PURE: a function of the approval as it is now.
 *
 * The agent wrote the summary (its path), the task and session ids and every decoded detail
 * (policy-engine describeRequest, the decoder the console's card uses, already bounded and
 * stripped of control, bidi and zero-width characters). In Slack's mrkdwn `<...>` is markup:
 * `<!channel>` notifies a channel, `<@U123>` mentions, `<http://x|text>` is a link whose
 * text lies about its target. So agent text appears only
 *  - in mrkdwn, with `&`, `<` and `>` escaped as Slack asks (`&amp;`, `&lt;`, `&gt;`), so no
 *    `<...>` sequence of the agent's survives; and
 *  - inside a code span (backticks replaced, so it cannot close the span), where Slack makes
 *    no link of a bare URL and no emoji or formatting of the text;
 *  - bounded (MAX_VALUE per value, MAX_SECTION per section, Slack's own limit being 3,000).
 * plain_text objects (header, buttons) carry only our own words and the category and
 * connector names, never agent text. The notification `text` is ours alone too.
 */
import type { RequestDetails } from '../policy-engine/index.js';
import type { Approval } from '../approvals/approvals.service.js';

export type SlackBlock = Record<string, unknown>;

/** What a card shows of an approval: the API's record (approvals.service.ts), and its decoded details. */
export type SlackCardInput = Pick<Approval,
  'id' | 'environment_id' | 'connector' | 'category' | 'summary' | 'task_id' | 'session_id' | 'max_scope' | 'status' | 'scope' | 'decided_via' | 'decided_at' | 'expires_at'
> & { details: RequestDetails | null };

export interface SlackCardContext {
  /** The environment's end user, or null when the environment is gone. */
  endUser: string | null;
  /** The team member who decided (console, Slack), by name; null otherwise. */
  decidedBy: string | null;
}

export interface SlackCard {
  /** Notification and fallback text: our words only. */
  text: string;
  blocks: SlackBlock[];
}

/** One value is cut here (the decoder already bounds values at 500). */
export const MAX_VALUE = 500;
/** A section's text stays under Slack's 3,000 characters. */
export const MAX_SECTION = 2_800;
/** Slack allows 50 blocks per message; a card uses at most this many. */
export const MAX_BLOCKS = 45;

export const SCOPE_ORDER = ['once', 'task', 'session', 'time_limited', 'permanent'] as const;

/** The buttons' action ids, one per decision kind (`until` is one hour from the press). */
export const ACTION_IDS = {
  once: 'approve:once',
  task: 'approve:task',
  session: 'approve:session',
  time_limited: 'approve:until',
  permanent: 'approve:permanent',
} as const;
export const DENY_ACTION_ID = 'deny';

const BUTTON_LABEL: Record<(typeof SCOPE_ORDER)[number], string> = {
  once: 'Approve this request',
  task: 'Approve for this task',
  session: 'Approve for this session',
  time_limited: 'Approve for 1 hour',
  permanent: 'Approve always',
};

const SCOPE_WORDS: Record<string, string> = {
  once: 'this request only',
  task: 'the rest of this task',
  session: 'the rest of this session',
  time_limited: 'a limited time',
  permanent: 'always (until the grant is revoked)',
};

const VIA_WORDS: Record<string, string> = {
  api_key: 'the API (API key)',
  signature: 'a signed callback',
  console: 'the console',
  slack: 'Slack',
};

/** Slack's mrkdwn escaping: the only three characters Slack asks to escape. */
export function escapeMrkdwn(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length - max} more characters not shown)`;
}

/**
 * Agent text as mrkdwn: escaped, in a code span (inline for one line, a block for several),
 * backticks replaced so the text cannot leave the span. Empty text shows as `(empty)`.
 */
export function agentText(raw: unknown, max = MAX_VALUE): string {
  const s = clip(String(raw ?? ''), max).replace(/`/g, 'ˋ');
  if (s === '') return '_(empty)_';
  const esc = escapeMrkdwn(s);
  return s.includes('\n') ? `\`\`\`${esc}\`\`\`` : `\`${esc}\``;
}

/** Our own words that may still carry a name a person typed (a member's name): escaped, no code span. */
function ours(s: string): string {
  return escapeMrkdwn(s);
}

function plain(text: string): { type: 'plain_text'; text: string; emoji: false } {
  return { type: 'plain_text', text: text.slice(0, 150), emoji: false };
}

function mrkdwn(text: string): { type: 'mrkdwn'; text: string; verbatim: true } {
  // verbatim: Slack does not turn channel names or URLs in it into links by itself.
  return { type: 'mrkdwn', text, verbatim: true };
}

function section(text: string): SlackBlock {
  return { type: 'section', text: mrkdwn(text.length <= MAX_SECTION ? text : `${text.slice(0, MAX_SECTION)}\n… (cut: see the console for the rest)`) };
}

/** The decoded details, one section per field, as the console lists them. */
export function detailBlocks(d: RequestDetails | null): SlackBlock[] {
  if (!d) return [];
  const out: SlackBlock[] = [];
  for (const f of d.fields ?? []) {
    let value: string;
    if (Array.isArray(f.addresses)) {
      const lines = f.addresses.map((x) => {
        const addr = x.address !== '' ? x.address : x.group !== undefined ? `${x.group}:;` : '<>';
        const name = x.name ? ` — “${x.name}”` : '';
        const group = x.group !== undefined && x.address !== '' ? ` (group ${x.group})` : '';
        const note = x.note ? ` (${x.note})` : '';
        return `• ${agentText(addr, 400)}${name ? ` ${agentText(name, 120)}` : ''}${group ? ` ${agentText(group, 120)}` : ''}${note ? ` _${ours(note)}_` : ''}`;
      });
      if (f.more) lines.push(`… and ${Number(f.more)} more not shown`);
      value = lines.join('\n');
    } else {
      // Bounded already by the card (MAX_DETAIL_VALUE, saying how much it cut): not cut again here.
      value = agentText(f.value, MAX_VALUE + 100);
    }
    // A label may carry the agent's words (an MCP argument's name): a backtick in it would pair
    // with the value's code span and let the value be read as formatting, an asterisk end the bold.
    out.push(section(`*${ours(String(f.label ?? '').replace(/`/g, 'ˋ').replace(/\*/g, '∗'))}*\n${value}`));
    if (out.length >= MAX_BLOCKS - 8) {
      out.push(section('_… more fields not shown: see the console_'));
      break;
    }
  }
  if (d.unreadable) {
    out.push(section(`:warning: *Could not show the content:* ${agentText(d.unreadable)}. Approve only if you expect this request.`));
  }
  return out;
}

/** The scopes a person may give here: up to max_scope, task and session only with their id. */
export function allowedScopes(a: Pick<SlackCardInput, 'max_scope' | 'task_id' | 'session_id'>): Array<(typeof SCOPE_ORDER)[number]> {
  const max = SCOPE_ORDER.indexOf(a.max_scope as (typeof SCOPE_ORDER)[number]);
  return SCOPE_ORDER.filter((s, i) => i <= max && (s !== 'task' || a.task_id) && (s !== 'session' || a.session_id));
}

function buttons(a: SlackCardInput): SlackBlock {
  const elements: SlackBlock[] = allowedScopes(a).map((s) => ({
    type: 'button',
    action_id: ACTION_IDS[s],
    text: plain(BUTTON_LABEL[s]),
    value: a.id,
    ...(s === 'once' ? { style: 'primary' } : {}),
    ...(s === 'permanent'
      ? { confirm: { title: plain('Approve always?'), text: plain('Requests like this one will be allowed in this environment until the grant is revoked.'), confirm: plain('Approve always'), deny: plain('Cancel') } }
      : {}),
  }));
  elements.push({ type: 'button', action_id: DENY_ACTION_ID, text: plain('Deny'), value: a.id, style: 'danger' });
  return { type: 'actions', block_id: `approval:${a.id}`, elements };
}

function outcomeLine(a: SlackCardInput, ctx: SlackCardContext): string {
  if (a.status === 'expired') return ':hourglass: *Expired*: nobody decided before it expired; the request was denied.';
  const who = a.decided_via === 'console' || a.decided_via === 'slack'
    ? `${VIA_WORDS[a.decided_via]}: ${ctx.decidedBy ? ours(ctx.decidedBy) : 'a team member'}`
    : VIA_WORDS[a.decided_via ?? ''] ?? ours(String(a.decided_via ?? 'unknown'));
  const when = a.decided_at ? ` at ${ours(a.decided_at)}` : '';
  if (a.status === 'approved') {
    return `:white_check_mark: *Approved* for ${SCOPE_WORDS[a.scope ?? ''] ?? ours(String(a.scope))} by ${who}${when}.`;
  }
  return `:no_entry: *Denied* by ${who}${when}.`;
}

const TITLE: Record<SlackCardInput['status'], string> = {
  pending: 'Approval needed',
  approved: 'Approved',
  denied: 'Denied',
  expired: 'Expired',
};

/** The whole card: what the request would do, and buttons while it is pending, or its outcome. */
export function renderSlackCard(a: SlackCardInput, ctx: SlackCardContext): SlackCard {
  const title = `${TITLE[a.status]}: ${a.category} via ${a.connector}`;
  const meta = [
    `*Connector:* ${agentText(a.connector, 120)}`,
    `*Category:* ${agentText(a.category, 40)}`,
    `*End user:* ${ctx.endUser === null ? '_(environment deleted)_' : agentText(ctx.endUser, 200)}`,
    `*Environment:* ${agentText(a.environment_id, 60)}`,
    ...(a.task_id ? [`*Task:* ${agentText(a.task_id, 255)}`] : []),
    ...(a.session_id ? [`*Session:* ${agentText(a.session_id, 255)}`] : []),
    `*Widest scope:* ${ours(SCOPE_WORDS[a.max_scope] ?? a.max_scope)}`,
    ...(a.status === 'pending' ? [`*Expires:* ${ours(a.expires_at)}`] : []),
  ];
  const blocks: SlackBlock[] = [
    { type: 'header', text: plain(title) },
    section(`*Request:* ${agentText(a.summary, 600)}`),
    section(meta.join('\n')),
    ...detailBlocks(a.details),
  ];
  if (a.status === 'pending') blocks.push(buttons(a));
  else blocks.push(section(outcomeLine(a, ctx)));
  blocks.push({ type: 'context', elements: [mrkdwn(`Approval ${ours(a.id)}`)] });
  return { text: `${title} (${a.id})`.replace(/[<>&]/g, ''), blocks: blocks.slice(0, 50) };
}
