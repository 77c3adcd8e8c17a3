import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The agent's control socket, `/run/service/control.sock` (service.md, Agent control
 * socket): local HTTP over a Unix socket of its own per environment, so the environment is
 * the socket the request came through, never anything the agent sends. Served by the
 * host; the process runtime binds one socket per sandbox.
 *
 * Today: GET /connections (decisions.md: the stand-in tokens of the end user's
 * connections). The schedule and keep-awake calls come with the idle ladder (issue 13);
 * until then they are 404 `not_found`, said in words.
 */
export interface ControlPorts {
  connections(environmentId: string): Promise<Array<{ connector: string; connection_id: string; token: string }>>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' });
  res.end(text);
}

export function controlHandler(ports: ControlPorts, environmentId: string) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    // Bodies are small JSON; never read more than 64 KiB from the agent.
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 64 * 1024) req.destroy();
    });
    const path = (req.url ?? '/').split('?')[0];
    void (async () => {
      try {
        if (req.method === 'GET' && path === '/connections') {
          json(res, 200, { data: await ports.connections(environmentId) });
          return;
        }
        if (path === '/schedules' || path?.startsWith('/schedules/') || path === '/keep-awake' || path === '/browser/takeover') {
          json(res, 404, { error: 'not_found', message: 'this control socket call is not available yet (schedules, keep-awake and takeover arrive with the idle ladder and the browser pool)' });
          return;
        }
        json(res, 404, { error: 'not_found', message: 'no such route' });
      } catch {
        json(res, 500, { error: 'internal_error', message: 'internal error' });
      }
    })();
  };
}
