import { Router } from 'express';
import { notFound } from '../../lib/errors.js';
import type { SlackChannelService } from '../../approval-channels/slack-channel.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { describeRoute } from '../openapi/route-spec.js';
import { setSlackChannelSchema, type SetSlackChannelInput } from '../schemas/approval-channels.js';
import { slackChannelRecord } from '../schemas/records.js';

/**
 * The Slack approval channel (issue 27; docs/slack-approvals.md): the developer's own Slack
 * app posts a card per held request and decides from its buttons. The bot token and the
 * signing secret are sealed and never returned.
 */
export function approvalChannelsRouter(deps: { slack: SlackChannelService }): Router {
  const r = Router();
  r.put('/approval-channels/slack', describeRoute({
    summary: 'Set the Slack approval channel (bot token and signing secret are sealed, never returned)',
    body: setSlackChannelSchema,
    responses: { 200: slackChannelRecord },
  }), async (req, res) => {
    const input = validateBody<SetSlackChannelInput>(setSlackChannelSchema, requireJson(req));
    res.json(await deps.slack.set(developerOf(req).id, input));
  });
  r.get('/approval-channels/slack', describeRoute({ summary: 'The Slack approval channel (404 when none is set; never its secrets)', responses: { 200: slackChannelRecord }, errors: ['not_found'] }), async (req, res) => {
    const ch = await deps.slack.get(developerOf(req).id);
    if (!ch) throw notFound();
    res.json(ch);
  });
  r.delete('/approval-channels/slack', describeRoute({ summary: 'Remove the Slack approval channel (no further cards or card updates)', responses: { 204: null } }), async (req, res) => {
    await deps.slack.remove(developerOf(req).id);
    res.status(204).end();
  });
  return r;
}
