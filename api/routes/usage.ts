import { Router } from 'express';
import Joi from 'joi';
import type { UsageService } from '../../environments/usage.service.js';
import type { AgentVersionsService } from '../../environments/agent-versions.service.js';
import type { EnvironmentsService } from '../../environments/environments.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam, rolloutIdParam } from '../schemas/common.js';
import { agentVersionRecord, environmentRecord, rolloutList, rolloutRecord, usageRecord } from '../schemas/records.js';

const limitSchema = Joi.object({ running_seconds: Joi.number().integer().min(0).max(1e12).required() });
const versionSchema = Joi.object({ version: Joi.string().min(1).max(200).required() });
const defaultSchema = Joi.object({ default_version: Joi.string().min(1).max(200).allow(null).required() });

/**
 * Usage and its limit, agent versions and rollouts (issue 13, items 5 and 6;
 * docs/environments.md, "Usage limit" and "Agent versions").
 */
export function usageRouter(deps: { usage: UsageService; versions: AgentVersionsService; environments: EnvironmentsService }): Router {
  const { usage, versions, environments } = deps;
  const r = Router();

  r.get('/usage', noBody, describeRoute({ summary: 'Running seconds this month and the limit', responses: { 200: usageRecord } }), async (req, res) => {
    res.json(await usage.get(developerOf(req).id));
  });
  r.put('/usage/limit', describeRoute({ summary: 'Set the monthly running-seconds limit', body: limitSchema, responses: { 200: usageRecord } }), async (req, res) => {
    const { running_seconds } = validateBody<{ running_seconds: number }>(limitSchema, requireJson(req));
    res.json(await usage.setLimit(developerOf(req).id, running_seconds));
  });
  r.delete('/usage/limit', noBody, describeRoute({ summary: 'Remove the limit', responses: { 200: usageRecord } }), async (req, res) => {
    res.json(await usage.clearLimit(developerOf(req).id));
  });

  r.get('/agent-version', noBody, describeRoute({ summary: 'The default agent version of new environments', responses: { 200: agentVersionRecord } }), async (req, res) => {
    res.json({ default_version: await versions.defaultVersion(developerOf(req).id) });
  });
  r.put('/agent-version', describeRoute({ summary: 'Set (or clear with null) the default agent version', body: defaultSchema, responses: { 200: agentVersionRecord } }), async (req, res) => {
    const { default_version } = validateBody<{ default_version: string | null }>(defaultSchema, requireJson(req));
    await versions.setDefaultVersion(developerOf(req).id, default_version);
    res.json({ default_version });
  });
  r.post('/environments/:id/agent-upgrade', describeRoute({ params: environmentIdParam, summary: 'Upgrade one environment\'s agent', body: versionSchema, responses: { 200: environmentRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const { version } = validateBody<{ version: string }>(versionSchema, requireJson(req));
    const developerId = developerOf(req).id;
    await versions.upgrade(developerId, req.params.id!, version);
    res.json(await environments.get(developerId, req.params.id!));
  });
  r.post('/agent-rollouts', describeRoute({ summary: 'Start a rollout of an agent version to every environment', body: versionSchema, responses: { 201: rolloutRecord }, errors: ['rollout_in_progress'] }), async (req, res) => {
    const { version } = validateBody<{ version: string }>(versionSchema, requireJson(req));
    res.status(201).json(await versions.startRollout(developerOf(req).id, version));
  });
  r.get('/agent-rollouts', noBody, describeRoute({ summary: 'List rollouts', responses: { 200: rolloutList } }), async (req, res) => {
    res.json({ data: await versions.listRollouts(developerOf(req).id) });
  });
  r.get('/agent-rollouts/:id', noBody, describeRoute({ params: rolloutIdParam, summary: 'Get a rollout', responses: { 200: rolloutRecord } }), async (req, res) => {
    res.json(await versions.getRollout(developerOf(req).id, req.params.id!));
  });
  return r;
}
