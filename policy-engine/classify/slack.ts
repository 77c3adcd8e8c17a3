/**
 * Slack Web API (connector `slack`): `https://slack.com/api/<method>` (also on workspace
 * subdomains `*.slack.com`). Slack picks the action from the method name and ignores the
 * HTTP verb: `conversations.history` is a read sent as POST by every official SDK, and
 * most write methods also run when sent as GET with query arguments. So the verb is never
 * used here: a known method gets its table category, a read-shaped name is a read, and
 * an unknown method is a `write` whatever the verb (fail closed; a GET to an unknown
 * method may well change something).
 * Reference: https://api.slack.com/methods
 */
import type { Category } from '../categories.js';
import type { ParsedRequest, Verdict } from './types.js';

function set(...names: string[]): ReadonlySet<string> {
  return new Set(names.map((n) => n.toLowerCase()));
}

/** Posting or changing what others read. */
export const SLACK_SEND = set(
  'chat.postMessage',
  'chat.postEphemeral',
  'chat.scheduleMessage',
  'chat.meMessage',
  'chat.update',
  'files.completeUploadExternal',
  // Same meaning, not in the brief's list:
  'files.upload', // legacy upload; shares into channels
  'files.remote.share',
  'chat.unfurl', // puts content into others' messages
  'chat.command', // runs a slash command as the user
);

export const SLACK_DELETE = set(
  'chat.delete',
  'chat.deleteScheduledMessage',
  'files.delete',
  'files.comments.delete',
  'files.remote.remove',
);

export const SLACK_CHANGE_PERMISSION = set(
  'conversations.invite',
  'conversations.kick',
  'conversations.inviteShared',
  'files.sharedPublicURL',
  // Same meaning, not in the brief's list:
  'files.revokePublicURL',
  'conversations.acceptSharedInvite',
  'conversations.approveSharedInvite',
  'conversations.externalInvitePermissions.set',
  'usergroups.users.update',
  'canvases.access.set',
  'canvases.access.delete',
);

export const SLACK_READ = set(
  'conversations.history',
  'conversations.replies',
  'conversations.list',
  'conversations.info',
  'conversations.members',
  'users.list',
  'users.info',
  'users.conversations',
  'users.lookupByEmail',
  'users.identity',
  'users.getPresence',
  'users.profile.get',
  'auth.test',
  'api.test',
  'team.info',
  'bots.info',
);

const READ_LAST_WORDS: ReadonlySet<string> = new Set(['list', 'info', 'history', 'replies', 'members']);

/** `search.*`, and `*.list` / `*.info` / `*.history` / `*.replies` / `*.members` / `*.get*` / `*.lookup*`. */
export function slackReadShaped(method: string): boolean {
  if (method.startsWith('search.')) return true;
  const last = method.slice(method.lastIndexOf('.') + 1);
  return READ_LAST_WORDS.has(last) || last.startsWith('get') || last.startsWith('lookup');
}

export function isSlackHost(host: string): boolean {
  return host === 'slack.com' || host.endsWith('.slack.com');
}

export function isSlackApiPath(lower: readonly string[]): boolean {
  return lower[0] === 'api' && lower.length >= 2;
}

export function classifySlackMethod(method: string): Verdict {
  const m = method.toLowerCase();
  const exact: Array<[ReadonlySet<string>, Category, string]> = [
    [SLACK_CHANGE_PERMISSION, 'change_permission', 'slack.change_permission'],
    [SLACK_DELETE, 'delete', 'slack.delete'],
    [SLACK_SEND, 'send', 'slack.send'],
    [SLACK_READ, 'read', 'slack.read'],
  ];
  for (const [names, category, rule] of exact) if (names.has(m)) return { category, rule };
  if (slackReadShaped(m)) return { category: 'read', rule: 'slack.read_shaped' };
  // Workspace administration: granting, removing and changing access is its whole point.
  if (m.startsWith('admin.')) return { category: 'change_permission', rule: 'slack.admin' };
  return { category: 'write', rule: 'slack.unknown' };
}

export function classifySlack(p: ParsedRequest): Verdict {
  return classifySlackMethod(p.lower[1]!);
}
