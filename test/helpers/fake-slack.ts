import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { slackSignature } from '../../approval-channels/slack-signature.js';

/**
 * A Slack-compatible Web API on 127.0.0.1:0 for the tests (issue 27): chat.postMessage,
 * chat.update and chat.postEphemeral as the official @slack/web-api client calls them
 * (POST <base>/<method>, `Authorization: Bearer xoxb-...`, a form-urlencoded body whose
 * objects are JSON text, or a JSON body), answering Slack's shapes: `{ok: true, channel, ts,
 * message}` or `{ok: false, error}`. It keeps the channel's messages by ts, so a test reads
 * the card as Slack would show it now. `/response/<id>` stands in for an interaction's
 * response_url. `down` makes every call fail (503), `failNext` the next n.
 *
 * It also builds interactivity requests exactly as Slack sends them: a block_actions
 * payload as `payload=<JSON>` form-urlencoded, signed with `X-Slack-Signature: v0=<hex>`
 * and `X-Slack-Request-Timestamp`.
 */
export interface SlackCall {
  method: string;
  authorization: string | undefined;
  contentType: string | undefined;
  args: Record<string, unknown>;
  at: number;
}

export interface SlackMessage {
  channel: string;
  ts: string;
  text: string;
  blocks: Array<Record<string, any>>;
  /** How many chat.update calls changed it. */
  updates: number;
}

export interface FakeSlack {
  url: string;
  /** api_base_url for the channel setting. */
  apiBase: string;
  token: string;
  calls: SlackCall[];
  messages: Map<string, SlackMessage>;
  /** JSON bodies posted to response URLs, by id. */
  responses: Array<{ id: string; body: any }>;
  down: boolean;
  failNext: number;
  responseUrl(id: string): string;
  /** Resolves with the first message matching, polling; throws after `ms`. */
  waitForMessage(pred: (m: SlackMessage) => boolean, ms?: number): Promise<SlackMessage>;
  waitFor<T>(fn: () => T | undefined | null | false, ms?: number): Promise<T>;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Arguments as Slack's server reads them: form fields (objects as JSON text) or a JSON body. */
function parseArgs(contentType: string | undefined, text: string): Record<string, unknown> {
  if (contentType?.startsWith('application/json')) return JSON.parse(text) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of new URLSearchParams(text)) {
    out[k] = (k === 'blocks' || k === 'attachments') ? JSON.parse(v) : v;
  }
  return out;
}

export async function startFakeSlack(opts: { token?: string } = {}): Promise<FakeSlack> {
  const token = opts.token ?? 'xoxb-1111-2222-fakeslacktoken';
  const calls: SlackCall[] = [];
  const messages = new Map<string, SlackMessage>();
  const responses: Array<{ id: string; body: any }> = [];
  let seq = 0;
  const state = { down: false, failNext: 0 };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify(body));
      };
      if (state.down) return answer(503, { ok: false, error: 'service_unavailable' });
      if (state.failNext > 0) {
        state.failNext--;
        return answer(500, { ok: false, error: 'internal_error' });
      }
      const url = req.url ?? '';
      const resp = /^\/response\/([A-Za-z0-9_-]+)$/.exec(url);
      if (resp) {
        responses.push({ id: resp[1]!, body: JSON.parse(text) });
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.end('ok');
      }
      const m = /^\/api\/([a-zA-Z.]+)$/.exec(url);
      if (!m || req.method !== 'POST') return answer(404, { ok: false, error: 'unknown_method' });
      const method = m[1]!;
      let args: Record<string, unknown>;
      try {
        args = parseArgs(req.headers['content-type'], text);
      } catch {
        return answer(200, { ok: false, error: 'invalid_arguments' });
      }
      calls.push({ method, authorization: req.headers.authorization, contentType: req.headers['content-type'], args, at: Date.now() });
      if (req.headers.authorization !== `Bearer ${token}`) return answer(200, { ok: false, error: 'invalid_auth' });
      const channel = String(args.channel ?? '');
      if (method === 'chat.postMessage') {
        if (!channel) return answer(200, { ok: false, error: 'channel_not_found' });
        const ts = `${Math.floor(Date.now() / 1000)}.${String(++seq).padStart(6, '0')}`;
        const msg: SlackMessage = { channel, ts, text: String(args.text ?? ''), blocks: (args.blocks as SlackMessage['blocks']) ?? [], updates: 0 };
        messages.set(ts, msg);
        return answer(200, { ok: true, channel, ts, message: { type: 'message', text: msg.text, blocks: msg.blocks, ts } });
      }
      if (method === 'chat.update') {
        const msg = messages.get(String(args.ts ?? ''));
        if (!msg || msg.channel !== channel) return answer(200, { ok: false, error: 'message_not_found' });
        msg.text = String(args.text ?? msg.text);
        if (args.blocks !== undefined) msg.blocks = args.blocks as SlackMessage['blocks'];
        msg.updates++;
        return answer(200, { ok: true, channel, ts: msg.ts, text: msg.text, message: { text: msg.text, blocks: msg.blocks } });
      }
      if (method === 'chat.postEphemeral') return answer(200, { ok: true, message_ts: `${Date.now() / 1000}` });
      return answer(200, { ok: false, error: 'unknown_method' });
    })().catch(() => {
      res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const waitFor = async <T>(fn: () => T | undefined | null | false, ms = 10_000): Promise<T> => {
    const until = Date.now() + ms;
    for (;;) {
      const v = fn();
      if (v) return v;
      if (Date.now() > until) throw new Error('fake Slack: timed out waiting');
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return {
    url,
    apiBase: `${url}/api`,
    token,
    calls,
    messages,
    responses,
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    get failNext() {
      return state.failNext;
    },
    set failNext(v: number) {
      state.failNext = v;
    },
    responseUrl: (id) => `${url}/response/${id}`,
    waitFor,
    waitForMessage: (pred, ms) => waitFor(() => [...messages.values()].find(pred), ms),
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

export interface PressInput {
  approvalId: string;
  actionId: string;
  userId: string;
  teamId?: string;
  channelId?: string;
  messageTs?: string;
  responseUrl?: string;
}

/** The block_actions payload Slack sends for a button press on a message. */
export function blockActionsPayload(p: PressInput): Record<string, unknown> {
  return {
    type: 'block_actions',
    user: { id: p.userId, username: 'someone', name: 'someone', team_id: p.teamId ?? 'T0TEAM' },
    api_app_id: 'A0APP',
    token: 'verification-token-deprecated',
    container: { type: 'message', message_ts: p.messageTs ?? '1.000001', channel_id: p.channelId ?? 'C0APPROVALS', is_ephemeral: false },
    trigger_id: '1234.5678.abcdef',
    team: { id: p.teamId ?? 'T0TEAM', domain: 'example' },
    enterprise: null,
    is_enterprise_install: false,
    channel: { id: p.channelId ?? 'C0APPROVALS', name: 'approvals' },
    message: { type: 'message', ts: p.messageTs ?? '1.000001', text: 'card' },
    state: { values: {} },
    response_url: p.responseUrl ?? 'https://hooks.slack.com/actions/T0TEAM/1/abc',
    actions: [{ action_id: p.actionId, block_id: `approval:${p.approvalId}`, text: { type: 'plain_text', text: 'x', emoji: true }, value: p.approvalId, type: 'button', action_ts: '1700000000.000000' }],
  };
}

/** Body and headers of an interactivity request exactly as Slack signs it. */
export function signedInteraction(payload: unknown, secret: string, timestampSecs = Math.floor(Date.now() / 1000)): { body: string; headers: Record<string, string> } {
  const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  return {
    body,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(timestampSecs),
      'x-slack-signature': slackSignature(secret, String(timestampSecs), body),
    },
  };
}
