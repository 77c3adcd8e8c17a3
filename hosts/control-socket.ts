import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { peerOf, type Peer } from './peer.js';
import type { ControlAnswer } from '../environments/agent.service.js';

/**
 * The agent's control socket, `/run/service/control.sock` (service.md, Agent control
 * socket; decisions.md): local HTTP over a Unix socket of its own per environment, so the
 * environment is the socket the request came through, never anything the agent sends.
 * Served by the host; the process runtime binds one socket per sandbox.
 *
 * | call | body | answer |
 * |---|---|---|
 * | GET /connections | | 200 `{data: [{connector, connection_id, token}]}` (stand-in tokens) |
 * | GET /schedules | | 200 `{data: [schedule]}`, the agent's own |
 * | PUT /schedules/<key> | `{cron, tz?, command?}` or `{at, command?}` | 201 / 200 schedule |
 * | DELETE /schedules/<key> | | 204 |
 * | POST /keep-awake | `{seconds}` | 200 `{seconds, until, keep_awake_until}`; held while the calling process lives |
 * | POST /browser/takeover | `{lease_id, reason?}` | 202; webhook `browser.takeover_requested` |
 *
 * Refusals are `{error, message}` (docs/environments.md lists the codes).
 */
export interface ControlPorts {
  connections(environmentId: string): Promise<Array<{ connector: string; connection_id: string; token: string }>>;
  listSchedules?(environmentId: string): Promise<ControlAnswer>;
  setSchedule?(environmentId: string, key: string, body: unknown): Promise<ControlAnswer>;
  deleteSchedule?(environmentId: string, key: string): Promise<ControlAnswer>;
  keepAwake?(environmentId: string, body: unknown, peer: Peer | null): Promise<ControlAnswer>;
  /** POST /browser/takeover `{lease_id, reason?}` → webhook browser.takeover_requested (decisions.md). */
  requestTakeover?(environmentId: string, body: unknown): Promise<ControlAnswer>;
}

const MAX_BODY = 64 * 1024;

function answer(res: ServerResponse, a: ControlAnswer): void {
  if (a.status === 204) {
    res.writeHead(204, { 'Cache-Control': 'no-store' }).end();
    return;
  }
  const text = JSON.stringify(a.body);
  res.writeHead(a.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' });
  res.end(text);
}

function readJson(req: IncomingMessage): Promise<{ ok: true; body: unknown } | { ok: false; message: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve({ ok: false, message: 'the body is larger than 64 KiB' });
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve({ ok: true, body: {} });
      try {
        resolve({ ok: true, body: JSON.parse(text) });
      } catch {
        resolve({ ok: false, message: 'the body is not JSON' });
      }
    });
    req.on('error', () => resolve({ ok: false, message: 'the body could not be read' }));
  });
}

const notFound: ControlAnswer = { status: 404, body: { error: 'not_found', message: 'no such route' } };

/** `peer`: who is at the other end of a request's socket (hosts/peer.ts; the driver knows the VM's namespace). */
export function controlHandler(ports: ControlPorts, environmentId: string, peer: (socket: Socket) => Promise<Peer | null> = (s) => peerOf(s)) {
  return (req: IncomingMessage, res: ServerResponse): void => {
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
        if ((key !== null && method === 'PUT' && ports.setSchedule) || (path === '/keep-awake' && method === 'POST' && ports.keepAwake)) {
          // Whose request it is, before reading the body: the process may exit right after.
          const who = path === '/keep-awake' ? await peer(req.socket as Socket) : null;
          const body = await readJson(req);
          if (!body.ok) return answer(res, { status: 400, body: { error: 'invalid_request', message: body.message } });
          if (key !== null) return answer(res, await ports.setSchedule!(environmentId, key, body.body));
          return answer(res, await ports.keepAwake!(environmentId, body.body, who));
        }
        if (path === '/browser/takeover' && method === 'POST' && ports.requestTakeover) {
          const body = await readJson(req);
          if (!body.ok) return answer(res, { status: 400, body: { error: 'invalid_request', message: body.message } });
          return answer(res, await ports.requestTakeover(environmentId, body.body));
        }
        return answer(res, notFound);
      } catch {
        answer(res, { status: 500, body: { error: 'internal_error', message: 'internal error' } });
      }
    })();
  };
}
