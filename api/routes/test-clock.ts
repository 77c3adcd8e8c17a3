import { Router } from 'express';
import Joi from 'joi';
import type { ServiceClock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';

const advanceSchema = Joi.object({ seconds: Joi.number().min(0).max(10 * 365 * 86400).required() });

/**
 * POST /v1/test-clock/advance (only with GATEWAY_TEST_CLOCK=1): moves the service clock
 * forward, then runs what became due before answering.
 */
export function testClockRouter(deps: { clock: ServiceClock; runDue: () => Promise<void> }): Router {
  const r = Router();
  r.post('/test-clock/advance', async (req, res) => {
    const { seconds } = validateBody<{ seconds: number }>(advanceSchema, requireJson(req));
    deps.clock.advance(seconds * 1000);
    await deps.runDue();
    res.json({ now: iso(deps.clock.nowMs()) });
  });
  return r;
}
