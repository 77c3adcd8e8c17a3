import { Router } from 'express';
import Joi from 'joi';
import { ServiceError } from '../../lib/errors.js';
import type { SlackInteractivityService } from '../../approval-channels/slack-interactivity.service.js';
import { readJsonBody } from '../middleware/json-body.js';
import { describeRoute } from '../openapi/route-spec.js';

/** A Slack interactivity request is one small form field; anything bigger is not Slack's. */
export const SLACK_BODY_BYTES = 64 * 1024;

/**
 * POST /v1/slack/interactivity (issue 27): the Request URL of the developer's Slack app's
 * Interactivity. Public (no API key): mounted before the key check and before any body
 * parser, it reads the raw body itself (64 KiB at most: Slack's signature covers the exact
 * bytes) and answers Slack within its 3 seconds. 401 invalid_signature for a missing,
 * stale, wrong or reused signature, with nothing changed; 200 with no body otherwise (the
 * presser learns of a refusal from an ephemeral message, and everyone of a decision from
 * the card's update).
 */
export function slackRouter(deps: { interactivity: SlackInteractivityService }): Router {
  const r = Router();
  r.post('/slack/interactivity', describeRoute({
    summary: 'Slack interactivity: a button press on an approval card (signed by Slack)',
    description: 'Body: application/x-www-form-urlencoded `payload=<JSON>` of type block_actions, as Slack sends it; '
      + 'headers X-Slack-Request-Timestamp and X-Slack-Signature (v0 HMAC-SHA256 with the signing secret of the approval\'s developer). '
      + 'A signature is accepted once, within 5 minutes of its timestamp. Not for developers to call.',
    auth: 'none',
    headers: {
      'X-Slack-Request-Timestamp': Joi.string().pattern(/^\d+$/).required().description('Unix seconds when Slack sent the request'),
      'X-Slack-Signature': Joi.string().required().description('v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}" with the signing secret>'),
    },
    responses: { 200: null },
    errors: ['invalid_signature', 'invalid_request', 'payload_too_large'],
  }), async (req, res) => {
    await readJsonBody(req, res, SLACK_BODY_BYTES);
    // The form is not JSON: jsonBody records that as a body error and keeps the bytes.
    if (req.bodyError && (req.rawBody === undefined || req.bodyError.code === 'payload_too_large')) throw req.bodyError;
    const header = (name: string): string | undefined => {
      const v = req.headers[name];
      return typeof v === 'string' ? v : undefined;
    };
    const answer = await deps.interactivity.handle({
      rawBody: req.rawBody ?? Buffer.alloc(0),
      timestamp: header('x-slack-request-timestamp'),
      signature: header('x-slack-signature'),
    });
    if (answer.status !== 200) throw new ServiceError(answer.error, answer.message);
    res.status(200).end();
  });
  return r;
}
