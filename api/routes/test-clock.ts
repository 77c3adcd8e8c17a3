import { Router } from 'express';
import Joi from 'joi';
import type { ServiceClock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { describeRoute } from '../openapi/route-spec.js';
import { testClockRecord } from '../schemas/records.js';

const advanceSchema = Joi.object({ seconds: Joi.number().min(0).max(10 * 365 * 86400).required() });

/**
 * POST /v1/test-clock/advance (only with GATEWAY_TEST_CLOCK=1): moves the service clock
 * forward, then runs what became due before answering. Mounted in every service so the
 * OpenAPI document lists it (issue 25); while off it passes the request on, and the
 * answer is the 404 `no such route` of any unknown path, as before.
 */
export function testClockRouter(deps: { enabled: boolean; clock: ServiceClock; runDue: () => Promise<void>; beforeAdvance?: () => Promise<void> }): Router {
  const r = Router();
  r.post('/test-clock/advance', describeRoute({
    summary: 'Move the service clock forward and run what became due (only with GATEWAY_TEST_CLOCK=1; otherwise 404 no such route)',
    body: advanceSchema,
    responses: { 200: testClockRecord },
  }), async (req, res, next) => {
    if (!deps.enabled) return next();
    const { seconds } = validateBody<{ seconds: number }>(advanceSchema, requireJson(req));
    // What happened in real time before the jump (the VMs' CPU since the last reading) is
    // dated before it: read after the jump, a shell's last command would count as activity
    // at the new time, and an idle ladder 601 s later would find the VM just active.
    await deps.beforeAdvance?.();
    deps.clock.advance(seconds * 1000);
    await deps.runDue();
    res.json({ now: iso(deps.clock.nowMs()) });
  });
  return r;
}
