import { Router } from 'express';
import type { PoliciesService, PolicyCheckInput } from '../../policies/policies.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { parsePolicyBody, policyCheckSchema } from '../schemas/policies.js';

/** Policies (decisions.md "Policies"): developer default, environment policy, policy check. */
export function policiesRouter(deps: { policies: PoliciesService }): Router {
  const { policies } = deps;
  const r = Router();

  r.get('/policy', async (req, res) => {
    res.json(await policies.getDeveloperPolicy(developerOf(req).id));
  });
  r.put('/policy', async (req, res) => {
    const rules = parsePolicyBody(requireJson(req));
    res.json(await policies.putDeveloperPolicy(developerOf(req).id, rules));
  });
  r.delete('/policy', async (req, res) => {
    res.json(await policies.deleteDeveloperPolicy(developerOf(req).id));
  });

  r.get('/environments/:id/policy', async (req, res) => {
    res.json(await policies.getEnvironmentPolicy(developerOf(req).id, req.params.id));
  });
  r.put('/environments/:id/policy', async (req, res) => {
    const rules = parsePolicyBody(requireJson(req));
    res.json(await policies.putEnvironmentPolicy(developerOf(req).id, req.params.id, rules));
  });
  r.delete('/environments/:id/policy', async (req, res) => {
    res.json(await policies.deleteEnvironmentPolicy(developerOf(req).id, req.params.id));
  });

  r.post('/environments/:id/policy/check', async (req, res) => {
    const input = validateBody<PolicyCheckInput>(policyCheckSchema, requireJson(req));
    res.json(await policies.check(developerOf(req).id, req.params.id, input));
  });

  return r;
}
