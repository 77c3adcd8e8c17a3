import { Router } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { RuntimeService, ExecInput } from '../../hosts/runtime.service.js';
import { EXEC_STREAM_BACKLOG_BYTES } from '../../hosts/driver.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { execSchema, writeFileSchema } from '../schemas/runtime.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam } from '../schemas/common.js';
import { execResultRecord, fileReadRecord, fileWrittenRecord, hostList } from '../schemas/records.js';

import Joi from 'joi';
import type { ErrorCode } from '../../lib/errors.js';

/** What exec and files can answer while the environment is woken and reached. */
const RUNTIME_ERRORS: ErrorCode[] = ['environment_failed', 'environment_destroyed', 'limit_exceeded', 'environment_not_placed', 'environment_not_running', 'host_unavailable', 'guest_unavailable'];

/**
 * Exec and files inside an environment (decisions.md; docs/environments.md).
 *
 * POST /exec answers `{exit_code, stdout, stderr, duration_ms}` once the command ends; with
 * `Accept: text/event-stream` it streams instead (agents' builds and test runs take
 * minutes): `stdout` and `stderr` events carry `{data}` (UTF-8 text) as output comes, and
 * one `exit` event ends the stream with `{exit_code, duration_ms, timed_out, ...}`.
 */
/** Commands one environment may run at once through one node's API (exec, streamed or not). */
export const MAX_EXECS_PER_ENVIRONMENT = 64;
/** argv and env of one exec, at most: Linux's limit for a new program's arguments and environment (ARG_MAX, 2 MiB). */
export const MAX_EXEC_ARG_BYTES = 2 * 1024 * 1024;
/** Execs under way by environment id (this process). */
const execsRunning = new Map<string, number>();

export function runtimeRouter(deps: { runtime: RuntimeService }): Router {
  const { runtime } = deps;
  const r = Router();

  r.post('/environments/:id/exec', describeRoute({
    params: environmentIdParam,
    summary: 'Run a command in the environment (wakes it); JSON when done, or a text/event-stream with Accept: text/event-stream',
    description: 'With `Accept: text/event-stream` the answer streams: events stdout and stderr carry {data} as output comes, and one exit event {exit_code, duration_ms, timed_out} ends it.',
    body: execSchema,
    responses: {
      200: {
        description: 'The command ended (JSON), or the event stream: events stdout and stderr {data}, then exit {exit_code, duration_ms, timed_out} (or error {error, message})',
        content: { 'application/json': execResultRecord, 'text/event-stream': { type: 'string' } },
      },
    },
    errors: ['exec_failed', 'exec_timeout', ...RUNTIME_ERRORS],
  }), async (req, res) => {
    const input = validateBody<ExecInput>(execSchema, requireJson(req));
    const developerId = developerOf(req).id;
    // What execve takes at most (the launcher read up to ~48 MiB of argv as root before the
    // command's limits applied; a fourth review): refused before anything starts.
    let argBytes = 0;
    for (const a of input.command) argBytes += Buffer.byteLength(a) + 1;
    for (const [k, v] of Object.entries(input.env ?? {})) argBytes += Buffer.byteLength(k) + Buffer.byteLength(v) + 2;
    if (argBytes > MAX_EXEC_ARG_BYTES) throw new ServiceError('invalid_request', `command and env together may be at most ${MAX_EXEC_ARG_BYTES} bytes (the kernel's limit for a new program)`);
    // Commands running at once through this node, per environment: each holds descriptors of
    // the service (a few thousand at once took it to its limit, every tenant's; a fourth review).
    const environmentId = req.params.id!;
    const key = `${developerId}/${environmentId}`; // another developer's id counts apart (and learns nothing)
    const running = execsRunning.get(key) ?? 0;
    if (running >= MAX_EXECS_PER_ENVIRONMENT) {
      throw new ServiceError('exec_failed', `this environment already runs ${MAX_EXECS_PER_ENVIRONMENT} commands at once; wait for one to end`);
    }
    execsRunning.set(key, running + 1);
    // Counted until the command has ended, not until the client leaves (a plain exec goes on then).
    try {
      await execute(req, res, developerId, environmentId, input);
    } finally {
      const n = (execsRunning.get(key) ?? 1) - 1;
      if (n > 0) execsRunning.set(key, n);
      else execsRunning.delete(key);
    }
  });

  async function execute(req: import('express').Request, res: import('express').Response, developerId: string, environmentId: string, input: ExecInput): Promise<void> {
    if (!/text\/event-stream/i.test(req.headers.accept ?? '')) {
      res.json(await runtime.exec(developerId, environmentId, input).then(({ timed_out: _t, ...out }) => out));
      return;
    }
    const abort = new AbortController();
    let started = false;
    const send = (event: string, data: unknown): void => {
      if (!started) {
        started = true;
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
      }
      if (res.destroyed) return;
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      // A client that stops reading would make the service hold all the command's output
      // (`yes` for 600 s: ~100 MiB/s of memory, every tenant's process): past the backlog
      // the command is killed and the stream cut, as a closed connection does.
      if (res.writableLength > EXEC_STREAM_BACKLOG_BYTES) {
        abort.abort();
        res.destroy();
      }
    };
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      const out = await runtime.exec(developerId, environmentId, input, {
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
  }

  r.put('/environments/:id/files', describeRoute({ params: environmentIdParam, summary: 'Write a file on the environment\'s data disk', body: writeFileSchema, responses: { 200: fileWrittenRecord }, errors: ['file_operation_failed', ...RUNTIME_ERRORS] }), async (req, res) => {
    const input = validateBody<{ path: string; content: string; encoding: 'utf8' | 'base64' }>(writeFileSchema, requireJson(req));
    if (input.encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(input.content)) {
      throw new ServiceError('invalid_request', 'content is not valid base64');
    }
    res.json(await runtime.writeFile(developerOf(req).id, req.params.id!, input));
  });

  r.get('/environments/:id/files', noBody, describeRoute({
    params: environmentIdParam,
    summary: 'Read a file (at most 16 MiB), base64',
    query: Joi.object({ path: Joi.string().required().description('Absolute, or relative to /home/agent') }),
    responses: { 200: fileReadRecord },
    errors: ['file_operation_failed', ...RUNTIME_ERRORS],
  }), async (req, res) => {
    const path = req.query.path;
    if (typeof path !== 'string') throw new ServiceError('invalid_request', 'query parameter path is required (once)');
    res.json(await runtime.readFile(developerOf(req).id, req.params.id!, path));
  });

  r.get('/hosts', noBody, describeRoute({ summary: 'The platform\'s hosts and their measured isolation', responses: { 200: hostList } }), async (_req, res) => {
    res.json({ data: await runtime.listHosts() });
  });

  return r;
}
