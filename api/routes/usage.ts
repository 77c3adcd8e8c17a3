import { Router } from 'express';
import Joi from 'joi';
import type { UsageService } from '../../environments/usage.service.js';
import type { AgentVersionsService } from '../../environments/agent-versions.service.js';
import type { EnvironmentsService } from '../../environments/environments.service.js';
import { developerOf } from '../middleware/auth.js';
import { noBody, requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';

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

  r.get('/usage', noBody, async (req, res) => {
    res.json(await usage.get(developerOf(req).id));
  });
  r.put('/usage/limit', async (req, res) => {
    const { running_seconds } = validateBody<{ running_seconds: number }>(limitSchema, requireJson(req));
    res.json(await usage.setLimit(developerOf(req).id, running_seconds));
  });
  r.delete('/usage/limit', noBody, async (req, res) => {
    res.json(await usage.clearLimit(developerOf(req).id));
  });

  r.get('/agent-version', noBody, async (req, res) => {
    res.json({ default_version: await versions.defaultVersion(developerOf(req).id) });
  });
  r.put('/agent-version', async (req, res) => {
    const { default_version } = validateBody<{ default_version: string | null }>(defaultSchema, requireJson(req));
    await versions.setDefaultVersion(developerOf(req).id, default_version);
    res.json({ default_version });
  });
  r.post('/environments/:id/agent-upgrade', async (req, res) => {
    const { version } = validateBody<{ version: string }>(versionSchema, requireJson(req));
    const developerId = developerOf(req).id;
    await versions.upgrade(developerId, req.params.id!, version);
    res.json(await environments.get(developerId, req.params.id!));
  });
  r.post('/agent-rollouts', async (req, res) => {
    const { version } = validateBody<{ version: string }>(versionSchema, requireJson(req));
    res.status(201).json(await versions.startRollout(developerOf(req).id, version));
  });
  r.get('/agent-rollouts', noBody, async (req, res) => {
    res.json({ data: await versions.listRollouts(developerOf(req).id) });
  });
  r.get('/agent-rollouts/:id', noBody, async (req, res) => {
    res.json(await versions.getRollout(developerOf(req).id, req.params.id!));
  });
  return r;
}
