import { Router, type Request } from 'express';
import { ServiceError } from '../../lib/errors.js';
import type { EnvironmentsService, CreateEnvironmentInput } from '../../environments/environments.service.js';
import type { WakeupsService } from '../../environments/wakeups.service.js';
import type { SchedulesService } from '../../environments/schedules.service.js';
import type { AgentSettings } from '../../environments/rules.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { check, validateBody } from '../validation.js';
import { optionalString, page, parseLimit, parsePage } from '../pagination.js';
import {
  IDEMPOTENCY_KEY, agentSettingsSchema, batchCreateSchema, configSchema, createEnvironmentSchema, idleSchema, keepAwakeSchema, resourcesUpdateSchema, wakeupSchema,
} from '../schemas/environments.js';
import Joi from 'joi';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam, pageQuery } from '../schemas/common.js';
import {
  agentSettingsRecord, batchResultRecord, configurationRecord, environmentPage, environmentRecord, eventPage, schedulePage, wakeupPage, wakeupRecord,
} from '../schemas/records.js';

const MAX_INT64 = 9223372036854775807n;

function idempotencyKey(req: Request): string | undefined {
  const raw = req.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !IDEMPOTENCY_KEY.test(raw)) {
    throw new ServiceError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters');
  }
  return raw;
}

export function environmentsRouter(deps: { environments: EnvironmentsService; wakeups: WakeupsService; schedules: SchedulesService }): Router {
  const { environments, wakeups, schedules } = deps;
  const r = Router();

  r.get('/environments', describeRoute({
    summary: 'List environments, ascending by created_at then id (destroyed ones included)',
    query: pageQuery.keys({ state: Joi.string().description('Only environments in this state (not validated)') }),
    responses: { 200: environmentPage },
  }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    const state = optionalString(req.query, 'state');
    const items = await environments.list(developerOf(req).id, { state, limit, after });
    res.json(page(items, limit));
  });

  r.post('/environments', describeRoute({
    summary: 'Create an environment (one non-destroyed environment per end user)',
    headers: { 'Idempotency-Key': Joi.string().pattern(IDEMPOTENCY_KEY).description('1 to 255 visible ASCII characters; a retry with the same key returns the original with 200') },
    body: createEnvironmentSchema,
    responses: { 201: environmentRecord, 200: environmentRecord },
    errors: ['environment_exists', 'idempotency_key_reused', 'template_not_ready'],
  }), async (req, res) => {
    const key = idempotencyKey(req);
    const input = validateBody<CreateEnvironmentInput>(createEnvironmentSchema, requireJson(req));
    const out = await environments.create(developerOf(req).id, input, key);
    res.status(out.status).json(out.environment);
  });

  r.post('/environments/batch', describeRoute({
    summary: 'Create up to 200 environments; each item answers {environment} or its own error',
    body: batchCreateSchema,
    responses: { 200: batchResultRecord },
  }), async (req, res) => {
    const body = requireJson(req) as { environments?: unknown } | null;
    const items = body && typeof body === 'object' && !Array.isArray(body) ? body.environments : undefined;
    if (!body || typeof body !== 'object' || Array.isArray(body) || Object.keys(body).some((k) => k !== 'environments')) {
      throw new ServiceError('invalid_body', 'the body must be {environments: [...]}');
    }
    if (!Array.isArray(items) || items.length < 1 || items.length > 200) {
      throw new ServiceError('invalid_body', 'environments must be an array of 1 to 200 create-environment requests');
    }
    // Shape errors in any item fail the whole batch with nothing created; value errors
    // and conflicts are reported per item.
    const checked = items.map((item) => check<CreateEnvironmentInput>(createEnvironmentSchema, item));
    const shapeError = checked.findIndex((c) => c.error?.code === 'invalid_body');
    if (shapeError >= 0) {
      throw new ServiceError('invalid_body', `environments[${shapeError}]: ${checked[shapeError]!.error!.message}`);
    }
    const developerId = developerOf(req).id;
    const data: unknown[] = [];
    for (const c of checked) {
      if (c.error) {
        data.push(c.error.toBody());
        continue;
      }
      try {
        data.push({ environment: (await environments.create(developerId, c.value!)).environment });
      } catch (err) {
        if (err instanceof ServiceError) data.push(err.toBody());
        else throw err;
      }
    }
    res.json({ data });
  });

  r.get('/environments/:id', describeRoute({ params: environmentIdParam, summary: 'Get an environment', responses: { 200: environmentRecord } }), async (req, res) => {
    res.json(await environments.get(developerOf(req).id, req.params.id));
  });

  r.delete('/environments/:id', describeRoute({ params: environmentIdParam, summary: 'Destroy an environment (desired_state destroyed; a repeat succeeds)', responses: { 200: environmentRecord } }), async (req, res) => {
    res.json(await environments.destroy(developerOf(req).id, req.params.id));
  });

  r.post('/environments/:id/suspend', noBody, describeRoute({ params: environmentIdParam, summary: 'Suspend (desired_state suspended)', responses: { 200: environmentRecord }, errors: ['invalid_state_transition'] }), async (req, res) => {
    res.json(await environments.suspend(developerOf(req).id, req.params.id));
  });
  r.post('/environments/:id/resume', noBody, describeRoute({ params: environmentIdParam, summary: 'Resume (desired_state running; not activity)', responses: { 200: environmentRecord }, errors: ['invalid_state_transition', 'limit_exceeded'] }), async (req, res) => {
    res.json(await environments.resume(developerOf(req).id, req.params.id));
  });
  r.post('/environments/:id/wake', noBody, describeRoute({ params: environmentIdParam, summary: 'Wake (running, and counts as activity)', responses: { 200: environmentRecord }, errors: ['invalid_state_transition', 'limit_exceeded'] }), async (req, res) => {
    res.json(await environments.wake(developerOf(req).id, req.params.id));
  });
  r.post('/environments/:id/keep-awake', describeRoute({ params: environmentIdParam, summary: 'Keep the environment awake for a number of seconds', body: keepAwakeSchema, responses: { 200: environmentRecord }, errors: ['invalid_state_transition', 'limit_exceeded'] }), async (req, res) => {
    const { seconds } = validateBody<{ seconds: number }>(keepAwakeSchema, requireJson(req));
    res.json(await environments.keepAwake(developerOf(req).id, req.params.id, seconds));
  });
  r.patch('/environments/:id/resources', describeRoute({ params: environmentIdParam, summary: 'Change resources (only the fields sent; {} reads)', body: resourcesUpdateSchema, responses: { 200: environmentRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const resources = validateBody<Record<'cpus' | 'memory_mib' | 'base_memory_mib' | 'disk_gib', number>>(resourcesUpdateSchema, requireJson(req));
    res.json(await environments.updateResources(developerOf(req).id, req.params.id, resources));
  });

  r.patch('/environments/:id/idle', describeRoute({ params: environmentIdParam, summary: 'Change the idle ladder', body: idleSchema, responses: { 200: environmentRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const idle = validateBody<Record<'suspend_after_secs' | 'stop_after_secs', number>>(idleSchema, requireJson(req));
    res.json(await environments.updateIdle(developerOf(req).id, req.params.id, idle));
  });

  r.get('/environments/:id/config', describeRoute({ params: environmentIdParam, summary: 'Get the configuration (env and files)', responses: { 200: configurationRecord } }), async (req, res) => {
    res.json(await environments.getConfig(developerOf(req).id, req.params.id));
  });
  r.put('/environments/:id/config', describeRoute({ params: environmentIdParam, summary: 'Replace the configuration (env and files)', body: configSchema, responses: { 200: configurationRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const config = validateBody<{ env?: Record<string, string>; files?: Record<string, string> }>(configSchema, requireJson(req));
    res.json(await environments.putConfig(developerOf(req).id, req.params.id, config));
  });

  r.get('/environments/:id/events', describeRoute({ params: environmentIdParam, summary: 'List events, ascending by integer id',
    query: Joi.object({
      after: Joi.string().pattern(/^-?\d{1,19}$/).description('An event id (an integer); not an integer: 400'),
      limit: Joi.number().integer().description('1 to 200 (clamped); default 100'),
      kind: Joi.string().description('Only events of this kind'),
    }),
    responses: { 200: eventPage },
  }), async (req, res) => {
    const rawAfter = optionalString(req.query, 'after');
    let after: number | null = null;
    if (rawAfter !== undefined && rawAfter !== '') {
      if (!/^-?\d{1,19}$/.test(rawAfter) || BigInt(rawAfter) > MAX_INT64) throw new ServiceError('invalid_request', 'after must be an integer');
      after = Number(rawAfter);
    }
    const limit = parseLimit(req.query.limit, 100);
    const kind = optionalString(req.query, 'kind');
    res.json(await environments.listEvents(developerOf(req).id, req.params.id, { after, limit, kind }));
  });

  r.post('/environments/:id/wakeups', describeRoute({ params: environmentIdParam, summary: 'Schedule a wakeup', body: wakeupSchema, responses: { 201: wakeupRecord }, errors: ['environment_destroyed', 'wakeup_limit_reached'] }), async (req, res) => {
    const input = validateBody<{ at: string; reason?: string | null }>(wakeupSchema, requireJson(req));
    res.status(201).json(await wakeups.create(developerOf(req).id, req.params.id, input));
  });
  r.get('/environments/:id/wakeups', describeRoute({ params: environmentIdParam, summary: 'List pending wakeups, ascending by at', query: pageQuery, responses: { 200: wakeupPage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    res.json(page(await wakeups.listPending(developerOf(req).id, req.params.id, limit, after), limit));
  });
  r.delete('/environments/:id/wakeups/:wakeupId', describeRoute({ params: environmentIdParam, summary: 'Cancel a pending wakeup (404 once fired or cancelled)', responses: { 204: null } }), async (req, res) => {
    await wakeups.cancel(developerOf(req).id, req.params.id, req.params.wakeupId);
    res.status(204).end();
  });

  r.get('/environments/:id/schedules', describeRoute({ params: environmentIdParam, summary: 'List the agent\'s schedules', query: pageQuery, responses: { 200: schedulePage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    res.json(page(await schedules.list(developerOf(req).id, req.params.id, limit, after), limit));
  });
  r.delete('/environments/:id/schedules/:key', describeRoute({ params: environmentIdParam, summary: 'Delete a schedule by key', responses: { 204: null } }), async (req, res) => {
    await schedules.cancel(developerOf(req).id, req.params.id, req.params.key);
    res.status(204).end();
  });

  r.get('/environments/:id/agent-settings', describeRoute({ params: environmentIdParam, summary: 'Get the agent settings (scheduling and keep-awake limits)', responses: { 200: agentSettingsRecord } }), async (req, res) => {
    res.json(await environments.getAgentSettings(developerOf(req).id, req.params.id));
  });
  r.patch('/environments/:id/agent-settings', describeRoute({ params: environmentIdParam, summary: 'Change agent settings (only the fields sent; {} reads)', body: agentSettingsSchema, responses: { 200: agentSettingsRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const patch = validateBody<Partial<AgentSettings>>(agentSettingsSchema, requireJson(req));
    res.json(await environments.updateAgentSettings(developerOf(req).id, req.params.id, patch));
  });

  return r;
}
