import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { RuntimeService, ExecInput } from '../../hosts/runtime.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { execSchema, writeFileSchema } from '../schemas/runtime.js';

/**
 * Exec and files inside an environment (decisions.md; docs/environments.md).
 *
 * POST /exec answers `{exit_code, stdout, stderr, duration_ms}` once the command ends; with
 * `Accept: text/event-stream` it streams instead (agents' builds and test runs take
 * minutes): `stdout` and `stderr` events carry `{data}` (UTF-8 text) as output comes, and
 * one `exit` event ends the stream with `{exit_code, duration_ms, timed_out, ...}`.
 */
export function runtimeRouter(deps: { runtime: RuntimeService }): Router {
  const { runtime } = deps;
  const r = Router();

  r.post('/environments/:id/exec', async (req, res) => {
    const input = validateBody<ExecInput>(execSchema, requireJson(req));
    const developerId = developerOf(req).id;
    if (!/text\/event-stream/i.test(req.headers.accept ?? '')) {
      res.json(await runtime.exec(developerId, req.params.id!, input).then(({ timed_out: _t, ...out }) => out));
      return;
    }
    const abort = new AbortController();
    let started = false;
    const send = (event: string, data: unknown): void => {
      if (!started) {
        started = true;
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
      }
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      const out = await runtime.exec(developerId, req.params.id!, input, {
        onOutput: (stream, chunk) => send(stream, { data: chunk.toString('utf8') }),
        signal: abort.signal,
      });
      send('exit', { exit_code: out.exit_code, duration_ms: out.duration_ms, timed_out: out.timed_out });
      res.end();
    } catch (err) {
      // Before the first byte, the usual JSON error; after it, an error event ends the stream.
      if (!started) throw err;
      const e = err instanceof ServiceError ? { error: err.code, message: err.message } : { error: 'internal_error', message: 'internal error' };
      send('error', e);
      res.end();
    }
  });

  r.put('/environments/:id/files', async (req, res) => {
    const input = validateBody<{ path: string; content: string; encoding: 'utf8' | 'base64' }>(writeFileSchema, requireJson(req));
    if (input.encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(input.content)) {
      throw new ServiceError('invalid_request', 'content is not valid base64');
    }
    res.json(await runtime.writeFile(developerOf(req).id, req.params.id!, input));
  });

  r.get('/environments/:id/files', noBody, async (req, res) => {
    const path = req.query.path;
    if (typeof path !== 'string') throw new ServiceError('invalid_request', 'query parameter path is required (once)');
    res.json(await runtime.readFile(developerOf(req).id, req.params.id!, path));
  });

  r.get('/hosts', noBody, async (_req, res) => {
    res.json({ data: await runtime.listHosts() });
  });

  return r;
}
