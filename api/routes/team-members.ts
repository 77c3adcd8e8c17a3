import { Router } from 'express';
import Joi from 'joi';
import type { MembersService } from '../../accounts/members.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { describeRoute } from '../openapi/route-spec.js';
import { memberIdParam } from '../schemas/common.js';
import { createdMemberRecord, memberList, memberRecord } from '../schemas/records.js';
import { patchMemberSchema } from '../schemas/approval-channels.js';

const createSchema = Joi.object({
  email: Joi.string().email({ tlds: false }).max(320).required(),
  name: Joi.string().min(1).max(200).required(),
  password: Joi.string().min(12).max(1024),
  slack_user_id: patchMemberSchema.extract('slack_user_id'),
});

/**
 * Team members of the console (issue 15, item 1): created by the developer, each with a
 * one-time sign-in link (shown once, valid 24 hours) and optionally a password (12+
 * characters, stored as a scrypt hash).
 */
export function teamMembersRouter(deps: { members: MembersService; baseUrl: () => string }): Router {
  const r = Router();
  r.post('/team-members', describeRoute({ summary: 'Add a console team member (answers a one-time sign-in link)', body: createSchema, responses: { 201: createdMemberRecord }, errors: ['member_exists'] }), async (req, res) => {
    const input = validateBody<{ email: string; name: string; password?: string; slack_user_id?: string | null }>(createSchema, requireJson(req));
    const { member, signInToken } = await deps.members.create(developerOf(req).id, input);
    res.status(201).json({ ...member, sign_in_url: `${deps.baseUrl()}/console/sign-in/${signInToken}` });
  });
  r.get('/team-members', noBody, describeRoute({ summary: 'List team members', responses: { 200: memberList } }), async (req, res) => {
    res.json({ data: await deps.members.list(developerOf(req).id) });
  });
  r.patch('/team-members/:id', describeRoute({ params: memberIdParam, summary: 'Update a team member: name, and the Slack user id whose card presses decide as this member (null unlinks)', body: patchMemberSchema, responses: { 200: memberRecord } }), async (req, res) => {
    const patch = validateBody<{ name?: string; slack_user_id?: string | null }>(patchMemberSchema, requireJson(req));
    res.json(await deps.members.update(developerOf(req).id, req.params.id!, patch));
  });
  r.delete('/team-members/:id', noBody, describeRoute({ params: memberIdParam, summary: 'Remove a team member', responses: { 204: null } }), async (req, res) => {
    await deps.members.remove(developerOf(req).id, req.params.id!);
    res.status(204).end();
  });
  return r;
}
