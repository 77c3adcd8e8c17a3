import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { peerOf, type Peer } from './peer.js';
import { TokenBucket, type BucketRate } from '../lib/token-bucket.js';
import type { ControlAnswer } from '../environments/agent.service.js';

/**
 * The agent's control socket, `/run/service/control.sock` (service.md, Agent control
 * socket; decisions.md): local HTTP over a Unix socket of its own per environment, so the
 * environment is the socket the request came through, never anything the agent sends.
 * Served by the host; the process runtime binds one socket per sandbox, the QEMU driver
 * bridges the guest's over its agent port to this same handler.
 *
 * | call | body | answer |
 * |---|---|---|
 * | GET /connections | | 200 `{data: [{connector, connection_id, token}]}` (stand-in tokens) |
 * | GET /schedules | | 200 `{data: [schedule]}`, the agent's own |
 * | PUT /schedules/<key> | `{cron, tz?, command?}` or `{at, command?}` | 201 / 200 schedule |
 * | DELETE /schedules/<key> | | 204 |
 * | POST /keep-awake | `{seconds}` | 200 `{seconds, until, keep_awake_until}`; held while the calling process lives |
 * | POST /browser/takeover | `{lease_id, reason?}` | 202; webhook `browser.takeover_requested` (once while pending) |
 *
 * Cheap to refuse (issue 24, item 5): every request first takes a token of its
 * environment's bucket (CONTROL_RATE), before the route, the body or the store; past it,
 * 429 `rate_limited` with Retry-After. The buckets live in this host process's memory (one
 * environment is served by one host), keyed by environment, so a VM restart does not refill
 * them. Only then are the body's shape and the caps checked, and only a keep-awake that
 * passed them looks up its caller (hosts/peer.ts: one helper process).
 *
 * Refusals are `{error, message}` (docs/environments.md lists the codes).
 */
export interface ControlPorts {
  connections(environmentId: string): Promise<Array<{ connector: string; connection_id: string; token: string }>>;
  listSchedules?(environmentId: string): Promise<ControlAnswer>;
  setSchedule?(environmentId: string, key: string, body: unknown): Promise<ControlAnswer>;
  deleteSchedule?(environmentId: string, key: string): Promise<ControlAnswer>;
  /** `peer`: the calling process, looked up when called (once); null where it cannot be known (a VM). */
  keepAwake?(environmentId: string, body: unknown, peer: () => Promise<Peer | null>): Promise<ControlAnswer>;
  /** POST /browser/takeover `{lease_id, reason?}` → webhook browser.takeover_requested (decisions.md). */
  requestTakeover?(environmentId: string, body: unknown): Promise<ControlAnswer>;
  /**
   * A request was refused 429 `rate_limited`. Called at most once per environment per
   * RATE_LIMITED_REPORT_MS, never per request (an event and a webhook each would be the
   * amplifier again): environments/agent.service.ts rateLimited records one
   * `agent_request_rejected {reason: "rate_limited"}`.
   */
  rateLimited?(environmentId: string): Promise<void>;
}

/** Per environment: 10 requests a second, 20 at once. */
export const CONTROL_RATE: BucketRate = { perSecond: 10, burst: 20 };
/**
 * Tokens a request takes: one, but a schedule's PUT two (its check walks the fire times of
 * the agent's whole set of schedules: ~10 to 25 ms with 20 schedules, ~90 ms with 1,000;
 * environments/schedule-union.ts): at most 5 a second, 10 at once, so an agent registering
 * its schedules at start is not slowed.
 */
export const PUT_SCHEDULE_COST = 2;
export function costOf(method: string | undefined, url: string | undefined): number {
  return method === 'PUT' && (url ?? '').startsWith('/schedules/') ? PUT_SCHEDULE_COST : 1;
}
export const RATE_LIMITED_REPORT_MS = 60_000;

const MAX_BODY = 64 * 1024;

interface Limiter {
  bucket: TokenBucket;
  reportedAt: number;
}

/** Per ports object (one per host process), per environment. */
const limiters = new WeakMap<ControlPorts, Map<string, Limiter>>();

function limiterOf(ports: ControlPorts, environmentId: string, rate: BucketRate, now: number): Limiter {
  let map = limiters.get(ports);
  if (!map) limiters.set(ports, (map = new Map()));
  let l = map.get(environmentId);
  if (!l) {
    // Forget environments whose bucket is full again (nothing to remember); bounded memory.
    if (map.size >= 10_000) for (const [id, x] of map) if (x.bucket.full(now) && now - x.reportedAt >= RATE_LIMITED_REPORT_MS) map.delete(id);
    l = { bucket: new TokenBucket(rate, now), reportedAt: -Infinity };
    map.set(environmentId, l);
  }
  return l;
}

function answer(res: ServerResponse, a: ControlAnswer, headers: Record<string, string | number> = {}): void {
  if (a.status === 204) {
    res.writeHead(204, { 'Cache-Control': 'no-store' }).end();
    return;
  }
  const text = JSON.stringify(a.body);
  res.writeHead(a.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', ...headers });
  res.end(text);
}

function readJson(req: IncomingMessage): Promise<{ ok: true; body: unknown } | { ok: false; message: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // The caller closed before the body was complete (the server keeps half-open sockets, below).
    const ended = (): void => {
      setImmediate(() => done({ ok: false, message: 'the body could not be read' }));
    };
    const done = (r: { ok: true; body: unknown } | { ok: false; message: string }): void => {
      req.socket?.off('end', ended);
      resolve(r);
    };
    req.socket?.once('end', ended);
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        done({ ok: false, message: 'the body is larger than 64 KiB' });
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return done({ ok: true, body: {} });
      try {
        done({ ok: true, body: JSON.parse(text) });
      } catch {
        done({ ok: false, message: 'the body is not JSON' });
      }
    });
    req.on('error', () => done({ ok: false, message: 'the body could not be read' }));
  });
}

/**
 * A caller that writes its request and exits at once must still be identified: its peer
 * credentials stay readable as long as the host holds its end of the socket, but by default
 * Node's HTTP server closes a socket as soon as the client's side ends, before the answer
 * (and before the keep-awake's checks, which come first, reach the lookup). Half-open
 * keeps it until the answer is written. (The driver could set this where it creates the server.)
 */
function holdOpen(socket: Socket): void {
  const server = (socket as unknown as { server?: { httpAllowHalfOpen?: boolean } }).server;
  if (server && server.httpAllowHalfOpen === false) server.httpAllowHalfOpen = true;
}

const notFound: ControlAnswer = { status: 404, body: { error: 'not_found', message: 'no such route' } };

export interface ControlOptions {
  rate?: BucketRate;
  /** Monotonic milliseconds for the buckets (tests). */
  now?: () => number;
}

/** `peer`: who is at the other end of a request's socket (hosts/peer.ts; the driver knows the sandbox). */
export function controlHandler(ports: ControlPorts, environmentId: string, peer: (socket: Socket) => Promise<Peer | null> = (s) => peerOf(s), opts: ControlOptions = {}) {
  const rate = opts.rate ?? CONTROL_RATE;
  const now = opts.now ?? (() => performance.now());
  return (req: IncomingMessage, res: ServerResponse): void => {
    // First, before anything else is looked at: the environment's rate.
    const t = now();
    const limiter = limiterOf(ports, environmentId, rate, t);
    const wait = limiter.bucket.take(t, costOf(req.method, req.url));
    if (wait > 0) {
      if (ports.rateLimited && t - limiter.reportedAt >= RATE_LIMITED_REPORT_MS) {
        limiter.reportedAt = t;
        void ports.rateLimited(environmentId).catch(() => {});
      }
      const secs = Math.max(1, Math.ceil(wait / 1000));
      req.resume();
      return answer(res, { status: 429, body: { error: 'rate_limited', message: `at most ${rate.perSecond} requests a second (${rate.burst} at once; a schedule's PUT counts ${PUT_SCHEDULE_COST}) per environment; retry in ${secs} s` } }, { 'Retry-After': secs });
    }
    holdOpen(req.socket as Socket);
    void (async () => {
      try {
        const path = (req.url ?? '/').split('?')[0]!;
        const method = req.method ?? 'GET';
        const sched = /^\/schedules\/([^/]+)$/.exec(path);
        let key: string | null = null;
        if (sched) {
          try {
            key = decodeURIComponent(sched[1]!);
          } catch {
            return answer(res, { status: 400, body: { error: 'invalid_request', message: 'the key is not valid percent-encoding' } });
          }
        }
        if (method === 'GET' && path === '/connections') return answer(res, { status: 200, body: { data: await ports.connections(environmentId) } });
        if (method === 'GET' && path === '/schedules' && ports.listSchedules) return answer(res, await ports.listSchedules(environmentId));
        if (key !== null && method === 'DELETE' && ports.deleteSchedule) return answer(res, await ports.deleteSchedule(environmentId, key));
        if (key !== null && method === 'PUT' && ports.setSchedule) {
          const body = await readJson(req);
          if (!body.ok) return answer(res, { status: 400, body: { error: 'invalid_request', message: body.message } });
          return answer(res, await ports.setSchedule(environmentId, key, body.body));
        }
        if (path === '/keep-awake' && method === 'POST' && ports.keepAwake) {
          const socket = req.socket as Socket;
          const body = await readJson(req);
          if (!body.ok) return answer(res, { status: 400, body: { error: 'invalid_request', message: body.message } });
          // Who asked: looked up only once the body and the caps passed (agent.service keepAwake).
          let lookup: Promise<Peer | null> | null = null;
          return answer(res, await ports.keepAwake(environmentId, body.body, () => (lookup ??= peer(socket))));
        }
        if (path === '/browser/takeover' && method === 'POST' && ports.requestTakeover) {
          const body = await readJson(req);
          if (!body.ok) return answer(res, { status: 400, body: { error: 'invalid_request', message: body.message } });
          return answer(res, await ports.requestTakeover(environmentId, body.body));
        }
        return answer(res, notFound);
      } catch {
        if (!res.headersSent) answer(res, { status: 500, body: { error: 'internal_error', message: 'internal error' } });
      }
    })();
  };
}
