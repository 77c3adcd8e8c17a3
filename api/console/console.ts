import { randomBytes } from 'node:crypto';
import express, { Router, type Request, type Response } from 'express';
import type { MembersService, ConsoleSession } from '../../accounts/members.service.js';
import type { ApprovalsService, ApprovalCard, Grant } from '../../approvals/approvals.service.js';
import type { AuditService } from '../../audit/audit.service.js';
import { ServiceError } from '../../lib/errors.js';
import { constantTimeEqual } from '../../lib/crypto.js';
import { TokenBucket, type BucketRate } from '../../lib/token-bucket.js';
import { SignInBusyError } from '../../accounts/members.service.js';

/** Password sign-ins from one address: a burst of 10, then one every 6 seconds. */
const SIGN_IN_RATE: BucketRate = { perSecond: 1 / 6, burst: 10 };

/**
 * The console (issue 15): server-rendered HTML under /console for team members. Sessions
 * are an HttpOnly, SameSite=Strict cookie (Secure when BASE_URL is https); every form
 * carries the session's CSRF token (the login form a double-submit one); a strict CSP with
 * a per-response nonce, no third-party assets. Members see only their developer's data.
 *
 * Pages: sign in (password or one-time link), sign out; approvals (pending approvals,
 * updated live over server-sent events, each card with its end user and the decoded request
 * (To/Cc/Subject of a mail, channel and text of a Slack post, guests of an event, amount of
 * a payment); approve with a scope up to max_scope, or deny; the decision goes through the
 * approvals service as `decided_via: console` with the member); grants (list, revoke); the
 * audit log (filters, chain verification).
 */
const COOKIE = 'gw_console';
const LOGIN_CSRF = 'gw_login_csrf';
const SCOPE_ORDER = ['once', 'task', 'session', 'time_limited', 'permanent'];

/**
 * Currencies without minor units (Stripe's list, as policy-engine/describe.ts shows amounts):
 * the console takes amounts in major units (50.00 USD, 5000 JPY) and sends minor units.
 */
const ZERO_DECIMAL = new Set(['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf']);

/** `50`, `49.99` → minor units of `currency`; null when it is not such an amount. */
function minorUnits(text: string, currency: string): number | null {
  const zero = ZERO_DECIMAL.has(currency.toLowerCase());
  const m = (zero ? /^(\d{1,15})$/ : /^(\d{1,13})(?:\.(\d{1,2}))?$/).exec(text.trim().replace(/,/g, ''));
  if (!m) return null;
  return zero ? Number(m[1]) : Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
}

/** Minor units as a person reads them: 5000 usd → `50.00 USD`. */
function majorUnits(minor: number, currency: string): string {
  const c = currency.toLowerCase();
  return `${ZERO_DECIMAL.has(c) ? String(minor) : (minor / 100).toFixed(2)} ${c.toUpperCase()}`;
}

const esc = (s: unknown): string => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function cookies(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of String(req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    try {
      out[part.slice(0, i).trim()] = decodeURIComponent(part.slice(i + 1).trim());
    } catch {
      // Not percent-encoding: not one of ours (a malformed cookie is never a 500).
    }
  }
  return out;
}

export interface ConsoleDeps {
  members: MembersService;
  approvals: ApprovalsService;
  audit: AuditService;
  /** The end user an environment belongs to (shown on approval cards); null when it is gone. */
  endUserOf: (developerId: string, environmentId: string) => Promise<string | null>;
  /** True when the public base URL is https (cookies are Secure then). */
  secure: () => boolean;
  /** The service's clock (ms): a time-limited grant runs an hour from now by it. */
  nowMs?: () => number;
}

export function consoleRouter(deps: ConsoleDeps): Router {
  const { members, approvals } = deps;
  const r = Router();
  r.use(express.urlencoded({ extended: false, limit: '16kb' }));

  /** Sign-in attempts by remote address (a token bucket each; full ones are forgotten past 10,000 addresses). */
  const attempts = new Map<string, TokenBucket>();
  const attemptsOf = (address: string): number => {
    const now = performance.now();
    let b = attempts.get(address);
    if (b === undefined) {
      if (attempts.size >= 10_000) for (const [a, x] of attempts) if (x.full(now)) attempts.delete(a);
      b = new TokenBucket(SIGN_IN_RATE, now);
      if (attempts.size < 10_000) attempts.set(address, b);
    }
    return b.take(now);
  };

  const cookieAttrs = (): string => `Path=/console; HttpOnly; SameSite=Strict${deps.secure() ? '; Secure' : ''}`;

  function page(res: Response, status: number, title: string, body: string, session: ConsoleSession | null, script = ''): void {
    const nonce = randomBytes(16).toString('base64');
    res.status(status).set({
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      'Referrer-Policy': 'no-referrer',
      'X-Frame-Options': 'DENY',
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
    }).send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)} · Agent gateway console</title>
<style nonce="${nonce}">
body{margin:0;font:15px/1.45 system-ui,sans-serif;background:#f6f7f9;color:#1d2330}
header{display:flex;align-items:center;gap:16px;padding:10px 24px;background:#1d2330;color:#fff}
header nav a{color:#cfe0ff;margin-right:6px} table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
td,th{border-bottom:1px solid #e5e8ee;padding:6px 8px;text-align:left;vertical-align:top} .ok{color:#1f8a4c} code{font-size:12px}
header b{flex:1} header form{margin:0} a{color:#2456c7}
main{max-width:880px;margin:24px auto;padding:0 16px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:10px;padding:16px 18px;margin:0 0 14px}
.meta{color:#5b6476;font-size:13px} .summary{font-size:17px;margin:6px 0 10px}
.row{display:flex;gap:8px;align-items:center;flex-wrap:wrap}
button{font:inherit;padding:6px 14px;border-radius:6px;border:1px solid #b8c0cc;background:#fff;cursor:pointer}
button.approve{background:#1f8a4c;border-color:#1f8a4c;color:#fff} button.deny{background:#b42318;border-color:#b42318;color:#fff}
label{display:block;margin:10px 0 4px} input,select{font:inherit;padding:6px 8px;border:1px solid #b8c0cc;border-radius:6px}
.err{color:#b42318} .empty{color:#5b6476} .cat{font-weight:600;text-transform:uppercase;font-size:12px;letter-spacing:.04em}
dl.details{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0 0 12px;padding:10px 12px;background:#f6f7f9;border-radius:8px}
dl.details dt{color:#5b6476;font-size:13px} dl.details dd{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
.warn{color:#8a5a00;background:#fff6e0;border-radius:6px;padding:6px 10px}
</style></head><body>
<header><b>Agent gateway console</b>${session ? '<nav><a href="/console/approvals">Approvals</a> · <a href="/console/grants">Grants</a> · <a href="/console/audit">Audit log</a></nav>' : ''}${session ? `<span>${esc(session.member.name)} &lt;${esc(session.member.email)}&gt;</span><form method="post" action="/console/logout"><input type="hidden" name="csrf" value="${esc(session.csrf)}"><button type="submit">Sign out</button></form>` : ''}</header>
<main>${body}</main>${script ? `<script nonce="${nonce}">${script}</script>` : ''}</body></html>`);
  }

  async function sessionOf(req: Request): Promise<{ token: string; session: ConsoleSession } | null> {
    const token = cookies(req)[COOKIE] ?? '';
    const session = token ? await members.session(token) : null;
    return session ? { token, session } : null;
  }

  function csrfOk(req: Request, session: ConsoleSession): boolean {
    return typeof req.body?.csrf === 'string' && constantTimeEqual(req.body.csrf, session.csrf);
  }

  function loginPage(res: Response, status: number, error: string | null): void {
    const csrf = randomBytes(24).toString('base64url');
    res.setHeader('Set-Cookie', `${LOGIN_CSRF}=${csrf}; ${cookieAttrs()}; Max-Age=1800`);
    page(res, status, 'Sign in', `<div class="card"><h1>Sign in</h1>${error ? `<p class="err">${esc(error)}</p>` : ''}
<form method="post" action="/console/login"><input type="hidden" name="csrf" value="${csrf}">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<p><button type="submit" class="approve">Sign in</button></p></form>
<p class="meta">No password? Ask for a one-time sign-in link (<code>npm run members -- link &lt;email&gt;</code>, or the API).</p></div>`, null);
  }

  r.get('/', async (req, res) => {
    res.redirect(303, (await sessionOf(req)) ? '/console/approvals' : '/console/login');
  });

  r.get('/login', (_req, res) => loginPage(res, 200, null));

  r.post('/login', async (req, res) => {
    const want = cookies(req)[LOGIN_CSRF] ?? '';
    if (!want || typeof req.body?.csrf !== 'string' || !constantTimeEqual(req.body.csrf, want)) {
      return loginPage(res, 403, 'The form expired; please try again.');
    }
    // Password guessing from one address: 10 attempts, then one every 6 seconds.
    const wait = attemptsOf(req.socket.remoteAddress ?? '');
    if (wait > 0) {
      res.setHeader('Retry-After', String(Math.ceil(wait / 1000)));
      return loginPage(res, 429, 'Too many sign-in attempts from here; wait a little and try again.');
    }
    let out: Awaited<ReturnType<MembersService['signIn']>> = null;
    try {
      out = typeof req.body.email === 'string' && typeof req.body.password === 'string'
        ? await members.signIn(req.body.email.slice(0, 320), req.body.password.slice(0, 1024))
        : null;
    } catch (err) {
      if (!(err instanceof SignInBusyError)) throw err;
      res.setHeader('Retry-After', '2');
      return loginPage(res, 429, 'Too many sign-ins at once; try again in a moment.');
    }
    if (!out) return loginPage(res, 401, 'That email and password do not match a team member.');
    res.setHeader('Set-Cookie', [`${COOKIE}=${out.token}; ${cookieAttrs()}; Max-Age=${12 * 3600}`, `${LOGIN_CSRF}=; ${cookieAttrs()}; Max-Age=0`]);
    res.redirect(303, '/console/approvals');
  });

  r.get('/sign-in/:token', async (req, res) => {
    const out = /^[A-Za-z0-9_-]{20,100}$/.test(req.params.token!) ? await members.signInWithLink(req.params.token!) : null;
    if (!out) return page(res, 404, 'Link not valid', '<div class="card"><h1>This sign-in link is not valid</h1><p>It was used already or has expired.</p><p><a href="/console/login">Sign in</a></p></div>', null);
    res.setHeader('Set-Cookie', `${COOKIE}=${out.token}; ${cookieAttrs()}; Max-Age=${12 * 3600}`);
    res.redirect(303, '/console/approvals');
  });

  r.post('/logout', async (req, res) => {
    const s = await sessionOf(req);
    if (s && csrfOk(req, s.session)) await members.signOut(s.token);
    else if (s) return page(res, 403, 'Forbidden', '<div class="card"><p class="err">The form expired; please try again.</p></div>', s.session);
    res.setHeader('Set-Cookie', `${COOKIE}=; ${cookieAttrs()}; Max-Age=0`);
    res.redirect(303, '/console/login');
  });

  function scopeChooser(a: ApprovalCard): string {
    const max = SCOPE_ORDER.indexOf(a.max_scope);
    const allowed = SCOPE_ORDER.filter((s, i) => i <= max && (s !== 'task' || a.task_id) && (s !== 'session' || a.session_id));
    const label: Record<string, string> = { once: 'This request only', task: 'This task', session: 'This session', time_limited: 'For one hour', permanent: 'Always' };
    return `<select name="scope" aria-label="Scope">${allowed.map((s) => `<option value="${s}">${label[s]}</option>`).join('')}</select>`;
  }

  /**
   * The decoded request (policy-engine describeRequest): every value is text, never markup.
   * A mail's addresses one a line, the address first and whole, its display name after it
   * (bounded by the decoder), so a name can neither push an address off the card nor pass
   * for one (issue 23, item 5); a field that names more addresses than listed says how many.
   */
  function details(a: ApprovalCard): string {
    const d = a.details;
    if (!d) return '';
    type Field = (typeof d.fields)[number];
    const address = (x: NonNullable<Field['addresses']>[number]): string =>
      `<div class="addr"><b>${esc(x.address !== '' ? x.address : x.group !== undefined ? `${x.group}:;` : '<>')}</b>${x.name ? ` — “${esc(x.name)}”` : ''}${x.group !== undefined && x.address !== '' ? ` (group ${esc(x.group)})` : ''}${x.note ? ` <i>(${esc(x.note)})</i>` : ''}</div>`;
    const value = (f: Field): string =>
      Array.isArray(f.addresses) ? `${f.addresses.map(address).join('')}${f.more ? `<div class="warn">… and ${esc(f.more)} more not shown</div>` : ''}` : esc(f.value);
    const rows = d.fields.map((f) => `<dt>${esc(f.label)}</dt><dd>${value(f)}</dd>`).join('');
    const warn = d.unreadable ? `<p class="warn">Could not show the content: ${esc(d.unreadable)}. Approve only if you expect this request.</p>` : '';
    return `${rows ? `<dl class="details">${rows}</dl>` : ''}${warn}`;
  }

  /**
   * Spending limits for the grant an approval stores (issue 26, item 2): amounts and a
   * currency (prefilled from the request's own) for a payment, recipient domains for a
   * send, a number of uses for both. Left empty, the grant has no limits. They bound a
   * grant, so they are not for "This request only" (the decision then says so).
   */
  function limitsFields(a: ApprovalCard): string {
    if (a.category !== 'pay' && a.category !== 'send') return '';
    const id = esc(a.id);
    const num = (name: string, label: string, placeholder: string) =>
      `<label for="${name}-${id}">${label}</label><input id="${name}-${id}" name="${name}" inputmode="decimal" placeholder="${placeholder}" size="10">`;
    const pay = a.category === 'pay'
      ? `${num('limit_per_request', 'At most per request', 'e.g. 50.00')}${num('limit_total', 'At most in total', 'e.g. 200.00')}
<label for="limit_currency-${id}">Currency</label><input id="limit_currency-${id}" name="limit_currency" size="4" maxlength="3" value="${esc((a.facts?.amount?.currency ?? '').toUpperCase())}">`
      : `<label for="limit_recipients-${id}">Recipients only within (domains, comma-separated)</label><input id="limit_recipients-${id}" name="limit_recipients" placeholder="e.g. acme.com" size="30">`;
    return `<details class="limits"><summary>Limits for the grant (optional)</summary><div class="row">${pay}
<label for="limit_max_uses-${id}">At most this many requests</label><input id="limit_max_uses-${id}" name="limit_max_uses" inputmode="numeric" size="5"></div>
<p class="meta">The request above counts as the first use. Requests beyond a limit ask again.</p></details>`;
  }

  function card(a: ApprovalCard, endUser: string | null, csrf: string): string {
    return `<div class="card" data-approval="${esc(a.id)}">
<div class="meta">${esc(a.connector)} · <span class="cat">${esc(a.category)}</span> · end user <b>${esc(endUser ?? '(environment deleted)')}</b> · environment <code>${esc(a.environment_id)}</code>${a.task_id ? ` · task ${esc(a.task_id)}` : ''}${a.session_id ? ` · session ${esc(a.session_id)}` : ''} · expires ${esc(a.expires_at)}</div>
<div class="summary">${esc(a.summary)}</div>${details(a)}
<form method="post" action="/console/approvals/${esc(a.id)}/decide" class="row"><input type="hidden" name="csrf" value="${esc(csrf)}">
${scopeChooser(a)}<button type="submit" name="decision" value="approve" class="approve">Approve</button>
<button type="submit" name="decision" value="deny" class="deny">Deny</button>${limitsFields(a)}</form></div>`;
  }

  r.get('/approvals', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.redirect(303, '/console/login');
    const pending = await approvals.listCards(s.session.developerId, { status: 'pending', limit: 200, after: null });
    const users = new Map<string, string | null>();
    for (const a of pending) if (!users.has(a.environment_id)) users.set(a.environment_id, await deps.endUserOf(s.session.developerId, a.environment_id));
    const body = `<h1>Pending approvals</h1>${pending.length ? pending.map((a) => card(a, users.get(a.environment_id) ?? null, s.session.csrf)).join('') : '<p class="empty" id="none">Nothing waits for a decision.</p>'}`;
    // Live: the page reloads when the set of pending approvals changes (server-sent events).
    page(res, 200, 'Approvals', body, s.session, `new EventSource('/console/approvals/stream').addEventListener('changed', () => location.reload());`);
  });

  r.get('/approvals/stream', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.status(401).end();
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
    const key = async (): Promise<string> => (await approvals.list(s.session.developerId, { status: 'pending', limit: 200, after: null })).map((a) => a.id).join(',');
    let last = await key();
    res.write(': connected\n\n');
    const timer = setInterval(() => {
      void key().then((k) => {
        if (k !== last) {
          last = k;
          res.write('event: changed\ndata: {}\n\n');
        } else res.write(': ping\n\n');
      }).catch(() => {});
    }, 1000);
    req.on('close', () => clearInterval(timer));
  });

  r.post('/approvals/:id/decide', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.redirect(303, '/console/login');
    if (!csrfOk(req, s.session)) return page(res, 403, 'Forbidden', '<div class="card"><p class="err">The form expired; please reload the page.</p></div>', s.session);
    const id = req.params.id!;
    let body: unknown;
    if (req.body.decision === 'deny') body = { decision: 'deny' };
    else {
      const a = await approvals.get(s.session.developerId, id).catch(() => null);
      if (!a) return page(res, 404, 'Not found', '<div class="card"><p>No such approval.</p></div>', s.session);
      const scope = String(req.body.scope ?? 'once');
      // The decision's `until` is Unix seconds (service.md); by the service's clock, so a test
      // clock moved ahead does not make the hour already past.
      const kind = scope === 'time_limited' ? { kind: 'until', until: Math.floor(((deps.nowMs ?? Date.now)() + 3_600_000) / 1000) } : scope === 'task' ? { kind: 'task', task_id: a.task_id } : scope === 'session' ? { kind: 'session', session_id: a.session_id } : { kind: scope };
      const limits = limitsOf(req.body as Record<string, unknown>);
      if (typeof limits === 'string') return page(res, 400, 'Not decided', `<div class="card"><p class="err">${esc(limits)}</p><p><a href="/console/approvals">Back to approvals</a></p></div>`, s.session);
      body = { decision: 'approve', scope: kind, ...(limits ? { limits } : {}) };
    }
    try {
      await approvals.decide(id, { via: 'console', developerId: s.session.developerId, memberId: s.session.member.id }, { ok: true, value: body });
    } catch (err) {
      if (err instanceof ServiceError) return page(res, err.status >= 500 ? 503 : err.status, 'Not decided', `<div class="card"><p class="err">${esc(err.message)}</p><p><a href="/console/approvals">Back to approvals</a></p></div>`, s.session);
      throw err;
    }
    res.redirect(303, '/console/approvals');
  });

  /**
   * The approve form's limits as the decision's `limits` (amounts to minor units), null when
   * none was filled in, or what is wrong with them. The decision checks the rest.
   */
  function limitsOf(b: Record<string, unknown>): Record<string, unknown> | null | string {
    const field = (k: string): string => (typeof b[k] === 'string' ? (b[k] as string).trim().slice(0, 2000) : '');
    const out: Record<string, unknown> = {};
    const currency = field('limit_currency').toLowerCase();
    for (const [k, name] of [['limit_per_request', 'per_request_minor_units'], ['limit_total', 'total_minor_units']] as const) {
      const v = field(k);
      if (v === '') continue;
      if (!/^[a-z]{3}$/.test(currency)) return 'An amount limit needs its currency (three letters, like USD).';
      const minor = minorUnits(v, currency);
      if (minor === null || minor < 1) return `${v} is not an amount in ${currency.toUpperCase()} (like 50 or 49.99).`;
      out[name] = minor;
    }
    if (out.per_request_minor_units !== undefined || out.total_minor_units !== undefined) out.currency = currency;
    const uses = field('limit_max_uses');
    if (uses !== '') {
      if (!/^\d{1,9}$/.test(uses) || Number(uses) < 1) return 'The number of requests must be a whole number of at least 1.';
      out.max_uses = Number(uses);
    }
    const recipients = field('limit_recipients');
    if (recipients !== '') out.recipients_within = recipients.split(/[\s,]+/).filter((d) => d !== '');
    return Object.keys(out).length > 0 ? out : null;
  }

  /** A grant's limits and what was spent, for the grants page. */
  function limitsText(g: Pick<Grant, 'limits' | 'used'>): string {
    const l = g.limits;
    if (!l) return 'none';
    const parts: string[] = [];
    const cur = l.currency ?? '';
    if (l.per_request_minor_units !== undefined) parts.push(`at most ${majorUnits(l.per_request_minor_units, cur)} per request`);
    if (l.total_minor_units !== undefined) parts.push(`${majorUnits(g.used.minor_units, cur)} of ${majorUnits(l.total_minor_units, cur)} spent`);
    if (l.max_uses !== undefined) parts.push(`${g.used.uses} of ${l.max_uses} requests`);
    if (l.recipients_within !== undefined) parts.push(`recipients within ${l.recipients_within.join(', ')}`);
    return parts.join('; ');
  }

  r.get('/grants', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.redirect(303, '/console/login');
    const grants = await deps.approvals.listGrants(s.session.developerId, { limit: 200, after: null });
    const rows = grants.map((g) => `<tr><td><code>${esc(g.environment_id)}</code></td><td>${esc(g.connector)}</td><td>${esc(g.category)}</td><td>${esc(g.scope)}${g.task_id ? ` (task ${esc(g.task_id)})` : ''}${g.session_id ? ` (session ${esc(g.session_id)})` : ''}</td><td>${esc(g.expires_at ?? 'never')}</td><td>${esc(limitsText(g))}</td><td>${esc(g.created_at)}</td>
<td><form method="post" action="/console/grants/${esc(g.id)}/revoke"><input type="hidden" name="csrf" value="${esc(s.session.csrf)}"><button type="submit" class="deny">Revoke</button></form></td></tr>`).join('');
    page(res, 200, 'Grants', `<h1>Grants in effect</h1>${grants.length ? `<table><tr><th>Environment</th><th>Connector</th><th>Category</th><th>Scope</th><th>Expires</th><th>Limits</th><th>Granted</th><th></th></tr>${rows}</table>` : '<p class="empty">No grant is in effect.</p>'}`, s.session);
  });

  r.post('/grants/:id/revoke', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.redirect(303, '/console/login');
    if (!csrfOk(req, s.session)) return page(res, 403, 'Forbidden', '<div class="card"><p class="err">The form expired; please reload the page.</p></div>', s.session);
    try {
      await deps.approvals.revokeGrant(s.session.developerId, req.params.id!);
    } catch (err) {
      if (err instanceof ServiceError) return page(res, err.status, 'Not revoked', `<div class="card"><p class="err">${esc(err.message)}</p></div>`, s.session);
      throw err;
    }
    res.redirect(303, '/console/grants');
  });

  r.get('/audit', async (req, res) => {
    const s = await sessionOf(req);
    if (!s) return res.redirect(303, '/console/login');
    const q = (k: string): string | undefined => (typeof req.query[k] === 'string' && req.query[k] !== '' ? String(req.query[k]).slice(0, 200) : undefined);
    const decision = q('decision');
    const filters = { environment_id: q('environment_id'), connector: q('connector'), decision: decision && ['allow', 'deny', 'ask'].includes(decision) ? (decision as 'allow') : undefined };
    const [entries, verify] = await Promise.all([
      deps.audit.list(s.session.developerId, { ...filters, limit: 200, after: null }),
      deps.audit.verify(s.session.developerId),
    ]);
    const rows = entries.map((e) => `<tr><td>${esc(e.created_at)}</td><td><code>${esc(e.environment_id)}</code></td><td>${esc(e.method)} ${esc(e.host)}${esc(e.path)}</td><td>${esc(e.connector ?? '')}</td><td>${esc(e.category ?? '')}</td><td>${esc(e.decision)}</td><td>${esc(e.reason)}</td><td>${esc(e.status)}</td></tr>`).join('');
    const opt = (v: string) => `<option value="${v}"${filters.decision === v ? ' selected' : ''}>${v || 'any decision'}</option>`;
    page(res, 200, 'Audit log', `<h1>Audit log</h1>
<p class="${verify.ok ? 'ok' : 'err'}" id="verify">Chain verification: ${verify.ok ? `intact (${verify.checked} entries checked)` : `BROKEN at ${esc(verify.first_broken_id)} (after ${verify.checked} entries)`}</p>
<form method="get" action="/console/audit" class="row"><input name="environment_id" placeholder="environment id" value="${esc(filters.environment_id ?? '')}"><input name="connector" placeholder="connector" value="${esc(filters.connector ?? '')}"><select name="decision">${['', 'allow', 'deny', 'ask'].map(opt).join('')}</select><button type="submit">Filter</button></form>
${entries.length ? `<table><tr><th>Time</th><th>Environment</th><th>Request</th><th>Connector</th><th>Category</th><th>Decision</th><th>Reason</th><th>Status</th></tr>${rows}</table>` : '<p class="empty">No entry matches.</p>'}`, s.session);
  });

  return r;
}
