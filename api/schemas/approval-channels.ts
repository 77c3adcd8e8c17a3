import Joi from 'joi';

/**
 * PUT /v1/approval-channels/slack (issue 27; docs/slack-approvals.md). A wrong type, a
 * missing or unknown field is 422 invalid_body; a value that breaks a rule (a bot token not
 * `xoxb-`, a URL that is not absolute http(s)) is 400 invalid_request.
 */
export const setSlackChannelSchema = Joi.object({
  bot_token: Joi.string().pattern(/^xox[a-z]-[\x21-\x7e]{1,500}$/).required()
    .description('The Slack app\'s bot token (xoxb-...): sealed, never returned, sent only to api_base_url'),
  signing_secret: Joi.string().pattern(/^[\x21-\x7e]{1,200}$/).required()
    .description('The Slack app\'s signing secret: sealed, never returned; verifies button presses'),
  channel_id: Joi.string().pattern(/^[A-Za-z0-9_-]{1,64}$/).required()
    .description('The channel cards are posted to (C..., G...); the bot must be a member'),
  api_base_url: Joi.string().max(2048).uri({ scheme: ['https', 'http'] })
    // GET echoes it: a URL carrying credentials (user:password@) is refused, never stored.
    .custom((v: string, h) => {
      const u = new URL(v);
      return u.username || u.password ? h.message({ custom: 'api_base_url must not carry credentials (user:password@)' }) : v;
    })
    .description('Default https://slack.com/api; for tests and Slack-compatible servers'),
});

export interface SetSlackChannelInput {
  bot_token: string;
  signing_secret: string;
  channel_id: string;
  api_base_url?: string;
}

/** PATCH /v1/team-members/{id}. */
export const SLACK_USER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const patchMemberSchema = Joi.object({
  name: Joi.string().min(1).max(200),
  slack_user_id: Joi.string().pattern(SLACK_USER_ID).allow(null)
    .description('The member\'s Slack user id (U... or W...); null unlinks it'),
}).min(1);
