import { Router } from 'express';
import type { PoliciesService, PolicyCheckInput } from '../../policies/policies.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { parsePolicyBody, parsePolicySimulateBody, policyBodySchema, policyCheckSchema, policySimulateSchema } from '../schemas/policies.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam } from '../schemas/common.js';
import { policyCheckRecord, policyRecord, policySimulationRecord } from '../schemas/records.js';

/** Policies (decisions.md "Policies"): developer default, environment policy, policy check. */
export function policiesRouter(deps: { policies: PoliciesService }): Router {
  const { policies } = deps;
  const r = Router();

  r.get('/policy', describeRoute({ summary: 'The developer\'s default policy', responses: { 200: policyRecord } }), async (req, res) => {
    res.json(await policies.getDeveloperPolicy(developerOf(req).id));
  });
  r.put('/policy', describeRoute({ summary: 'Set the developer\'s default policy', body: policyBodySchema, responses: { 200: policyRecord } }), async (req, res) => {
    const rules = parsePolicyBody(requireJson(req));
    res.json(await policies.putDeveloperPolicy(developerOf(req).id, rules));
  });
  r.delete('/policy', describeRoute({ summary: 'Remove the developer\'s default policy', responses: { 200: policyRecord } }), async (req, res) => {
    res.json(await policies.deleteDeveloperPolicy(developerOf(req).id));
  });

  // Issue 26: draft rules against the recorded requests; reads only (docs/policies-approvals.md "Simulation").
  r.post('/policy/simulate', describeRoute({
    summary: 'Simulate draft rules on the requests the audit log recorded: what would change; nothing is stored',
    description: 'Evaluates the newest `limit` (default 1,000, at most 10,000) recorded requests that reached the policy, grants ignored; '
      + 'answers how many were evaluated, how many would change, the transitions ("allow->ask": n) and at most 50 examples, newest first.',
    body: policySimulateSchema,
    responses: { 200: policySimulationRecord },
    errors: ['not_found'],
  }), async (req, res) => {
    const input = parsePolicySimulateBody(requireJson(req));
    res.json(await policies.simulate(developerOf(req).id, input));
  });

  r.get('/environments/:id/policy', describeRoute({ params: environmentIdParam, summary: 'The environment\'s effective policy (its own, the developer\'s, or the default)', responses: { 200: policyRecord } }), async (req, res) => {
    res.json(await policies.getEnvironmentPolicy(developerOf(req).id, req.params.id));
  });
  r.put('/environments/:id/policy', describeRoute({ params: environmentIdParam, summary: 'Set the environment\'s policy', body: policyBodySchema, responses: { 200: policyRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const rules = parsePolicyBody(requireJson(req));
    res.json(await policies.putEnvironmentPolicy(developerOf(req).id, req.params.id, rules));
  });
  r.delete('/environments/:id/policy', describeRoute({ params: environmentIdParam, summary: 'Remove the environment\'s policy (the developer default applies)', responses: { 200: policyRecord } }), async (req, res) => {
    res.json(await policies.deleteEnvironmentPolicy(developerOf(req).id, req.params.id));
  });

  r.post('/environments/:id/policy/check', describeRoute({ params: environmentIdParam, summary: 'What the gateway would decide for a connector and category, grants included', body: policyCheckSchema, responses: { 200: policyCheckRecord } }), async (req, res) => {
    const input = validateBody<PolicyCheckInput>(policyCheckSchema, requireJson(req));
    res.json(await policies.check(developerOf(req).id, req.params.id, input));
  });

  return r;
}
