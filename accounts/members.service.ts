import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import type { Db } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';

/**
 * Team members of a developer and their console sessions (issue 15, item 1). A member
 * signs in with a password (scrypt, N=2^15) or a one-time sign-in link (24 hours); a session
 * lasts 12 hours and carries its own CSRF token. Tokens are stored as SHA-256 only.
 */
const scryptAsync = promisify(scrypt) as (pw: string, salt: Buffer, len: number, opts: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
const SCRYPT = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
export const SESSION_MS = 12 * 3_600_000;
export const LINK_MS = 24 * 3_600_000;
/** Members of one email (at different developers) a password sign-in tries at most. */
const MAX_SAME_EMAIL = 5;
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

interface MemberRow {
  id: string;
  developer_id: string;
  email: string;
  name: string;
  password_hash: string | null;
  /** The member's Slack user id (issue 27): who presses a Slack card's button. */
  slack_user_id?: string | null;
  created_at: number;
}

export interface Member {
  id: string;
  email: string;
  name: string;
  slack_user_id: string | null;
  created_at: string | null;
}

export interface ConsoleSession {
  member: Member;
  developerId: string;
  csrf: string;
}

const toMember = (r: MemberRow): Member => ({ id: r.id, email: r.email, name: r.name, slack_user_id: r.slack_user_id ?? null, created_at: iso(Number(r.created_at)) });

const slackUserTaken = (): ServiceError => new ServiceError('invalid_request', 'another team member already has this slack_user_id');

async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, 32, SCRYPT);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/**
 * Password checks run at once, and wait at most: each is a scrypt (N=2^15, 32 MiB) on libuv's
 * thread pool (4 threads), which the egress guard's DNS lookups and file reads share. A flood
 * of unauthenticated sign-ins took every thread (a fourth review); now at most CHECKS_RUNNING
 * run, CHECKS_WAITING wait, and past that a sign-in is refused at once (`busy`).
 */
const CHECKS_RUNNING = 2;
const CHECKS_WAITING = 32;
let checksRunning = 0;
const checksWaiting: Array<() => void> = [];

export class SignInBusyError extends Error {
  constructor() {
    super('too many sign-ins at once');
  }
}

async function gatedCheck(password: string, stored: string | null): Promise<boolean> {
  if (checksRunning >= CHECKS_RUNNING) {
    if (checksWaiting.length >= CHECKS_WAITING) throw new SignInBusyError();
    await new Promise<void>((resolve) => checksWaiting.push(resolve));
  } else checksRunning++;
  try {
    return await checkPassword(password, stored);
  } finally {
    const next = checksWaiting.shift();
    if (next) next(); // the slot passes on as it is
    else checksRunning--;
  }
}

async function checkPassword(password: string, stored: string | null): Promise<boolean> {
  // A member without a password (or none found) still costs one scrypt: no timing tells who exists.
  const parts = (stored ?? `scrypt$${SCRYPT.N}$8$1$${randomBytes(16).toString('base64')}$${randomBytes(32).toString('base64')}`).split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const key = await scryptAsync(password, Buffer.from(parts[4]!, 'base64'), 32, { N: Number(parts[1]), r: Number(parts[2]), p: Number(parts[3]), maxmem: SCRYPT.maxmem });
  const want = Buffer.from(parts[5]!, 'base64');
  return stored !== null && want.length === key.length && timingSafeEqual(want, key);
}

export function createMembersService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  async function create(developerId: string, input: { email: string; name: string; password?: string; slack_user_id?: string | null }): Promise<{ member: Member; signInToken: string }> {
    const now = clock.nowMs();
    const row: MemberRow = {
      id: newId('mem'), developer_id: developerId, email: input.email.trim().toLowerCase(), name: input.name,
      password_hash: input.password ? await hashPassword(input.password) : null, created_at: now,
      ...(input.slack_user_id ? { slack_user_id: input.slack_user_id } : {}),
    };
    try {
      await db('team_members').insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        if (input.slack_user_id && await db('team_members').where({ developer_id: developerId, slack_user_id: input.slack_user_id }).first()) throw slackUserTaken();
        throw new ServiceError('member_exists', 'a team member with this email already exists');
      }
      throw err;
    }
    return { member: toMember(row), signInToken: await signInLink(row.id) };
  }

  async function list(developerId: string): Promise<Member[]> {
    return (await db<MemberRow>('team_members').where({ developer_id: developerId }).orderBy('created_at', 'asc').limit(1000)).map(toMember);
  }

  /** PATCH: the name and the Slack user id (null unlinks it). */
  async function update(developerId: string, id: string, patch: { name?: string; slack_user_id?: string | null }): Promise<Member> {
    const set: Partial<MemberRow> = {};
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.slack_user_id !== undefined) set.slack_user_id = patch.slack_user_id;
    if (Object.keys(set).length > 0) {
      try {
        const n = await db('team_members').where({ developer_id: developerId, id }).update(set);
        if (!n) throw notFound();
      } catch (err) {
        if (isUniqueViolation(err)) throw slackUserTaken();
        throw err;
      }
    }
    const row = await db<MemberRow>('team_members').where({ developer_id: developerId, id }).first();
    if (!row) throw notFound();
    return toMember(row);
  }

  /** The developer's member with this Slack user id (a card's button press), or null. */
  async function bySlackUser(developerId: string, slackUserId: string): Promise<Member | null> {
    if (!slackUserId) return null;
    const row = await db<MemberRow>('team_members').where({ developer_id: developerId, slack_user_id: slackUserId }).first();
    return row ? toMember(row) : null;
  }

  /** A member's name (who decided, on a card), or null when gone. */
  async function nameOf(developerId: string, id: string): Promise<string | null> {
    const row = await db<MemberRow>('team_members').where({ developer_id: developerId, id }).first('name');
    return row ? row.name : null;
  }

  async function remove(developerId: string, id: string): Promise<void> {
    const n = await db('team_members').where({ developer_id: developerId, id }).delete();
    if (!n) throw notFound();
    await db('console_sessions').where({ member_id: id }).delete();
    await db('console_sign_in_links').where({ member_id: id }).delete();
  }

  /** A one-time sign-in link's token (24 hours). */
  async function signInLink(memberId: string): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    await db('console_sign_in_links').insert({ token_hash: sha256(token), member_id: memberId, expires_at: clock.nowMs() + LINK_MS, used_at: null });
    return token;
  }

  async function startSession(row: MemberRow): Promise<{ token: string; session: ConsoleSession }> {
    const token = randomBytes(32).toString('base64url');
    const csrf = randomBytes(24).toString('base64url');
    const now = clock.nowMs();
    await db('console_sessions').insert({ token_hash: sha256(token), member_id: row.id, developer_id: row.developer_id, csrf, created_at: now, expires_at: now + SESSION_MS });
    return { token, session: { member: toMember(row), developerId: row.developer_id, csrf } };
  }

  /** Email and password: a new session, or null (the same answer whatever was wrong). */
  /** Throws SignInBusyError when too many sign-ins wait already (the console answers 429). */
  async function signIn(email: string, password: string): Promise<{ token: string; session: ConsoleSession } | null> {
    // Emails are unique per developer only: another developer may add a member of the same
    // email (a fourth review: that locked this one out of password sign-in). The password
    // says which: the one member it matches signs in; none or several, nobody does (the same
    // person with one password at two developers uses a link). At most MAX_SAME_EMAIL
    // members with a password are tried (each check is a scrypt), at least one always (the
    // same cost whether or not the email is known).
    const rows = await db<MemberRow>('team_members').where({ email: email.trim().toLowerCase() }).whereNotNull('password_hash').orderBy('id').limit(MAX_SAME_EMAIL);
    if (rows.length === 0) {
      await gatedCheck(password, null);
      return null;
    }
    const matching: MemberRow[] = [];
    for (const row of rows) if (await gatedCheck(password, row.password_hash ?? null)) matching.push(row);
    return matching.length === 1 ? startSession(matching[0]!) : null;
  }

  async function signInWithLink(token: string): Promise<{ token: string; session: ConsoleSession } | null> {
    const now = clock.nowMs();
    const link = await db('console_sign_in_links').where({ token_hash: sha256(token) }).first();
    if (!link || link.used_at != null || Number(link.expires_at) <= now) return null;
    const n = await db('console_sign_in_links').where({ token_hash: sha256(token) }).whereNull('used_at').update({ used_at: now });
    if (n !== 1) return null;
    const row = await db<MemberRow>('team_members').where({ id: link.member_id }).first();
    return row ? startSession(row) : null;
  }

  async function session(token: string): Promise<ConsoleSession | null> {
    if (!token) return null;
    const s = await db('console_sessions').where({ token_hash: sha256(token) }).where('expires_at', '>', clock.nowMs()).first();
    if (!s) return null;
    const row = await db<MemberRow>('team_members').where({ id: s.member_id }).first();
    return row ? { member: toMember(row), developerId: row.developer_id, csrf: s.csrf } : null;
  }

  async function signOut(token: string): Promise<void> {
    await db('console_sessions').where({ token_hash: sha256(token) }).delete();
  }

  return { create, list, update, bySlackUser, nameOf, remove, signInLink, signIn, signInWithLink, session, signOut };
}

export type MembersService = ReturnType<typeof createMembersService>;
