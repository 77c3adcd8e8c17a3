import { Router, type Request } from 'express';
import type { SecretsService } from '../../environments/secrets.service.js';
import { SECRET_NAME, type SecretInput } from '../../environments/rules.js';
import { ServiceError } from '../../lib/errors.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { secretPutSchema } from '../schemas/secrets.js';
import { describeRoute } from '../openapi/route-spec.js';
import { environmentIdParam, secretNameParam } from '../schemas/common.js';
import { secretList, secretRecord } from '../schemas/records.js';

/**
 * Environment secrets (`/environments/{id}/secrets`) and developer-level secrets
 * (`/secrets`, scope '*'): same records, same rules. Values are never returned.
 * PUT answers 201 when it created the secret and 200 when it replaced one.
 */
export function secretsRouter(deps: { secrets: SecretsService }): Router {
  const { secrets } = deps;
  const r = Router();

  const put = async (req: Request, environmentId: string | null) => {
    const developerId = developerOf(req).id;
    const name = req.params.name as string;
    // The path names the resource: a name that can never exist is 400 before the body is read.
    if (!SECRET_NAME.test(name)) throw new ServiceError('invalid_request', `secret name "${name}" must match [A-Z][A-Z0-9_]{0,63}`);
    const body = validateBody<SecretInput>(secretPutSchema, requireJson(req));
    return secrets.put(developerId, environmentId, name, body);
  };

  r.get('/environments/:id/secrets', describeRoute({ params: environmentIdParam, summary: 'List the environment\'s secrets (never their values)', responses: { 200: secretList } }), async (req, res) => {
    res.json({ data: await secrets.list(developerOf(req).id, req.params.id) });
  });
  r.put('/environments/:id/secrets/:name', describeRoute({ params: { ...environmentIdParam, ...secretNameParam }, summary: 'Create (201) or replace (200) an environment secret', body: secretPutSchema, responses: { 201: secretRecord, 200: secretRecord }, errors: ['environment_destroyed'] }), async (req, res) => {
    const out = await put(req, req.params.id as string);
    res.status(out.created ? 201 : 200).json(out.secret);
  });
  r.delete('/environments/:id/secrets/:name', describeRoute({ params: { ...environmentIdParam, ...secretNameParam }, summary: 'Delete an environment secret', responses: { 204: null } }), async (req, res) => {
    await secrets.remove(developerOf(req).id, req.params.id, req.params.name);
    res.status(204).end();
  });

  r.get('/secrets', describeRoute({ summary: 'List the developer-level secrets (every environment)', responses: { 200: secretList } }), async (req, res) => {
    res.json({ data: await secrets.list(developerOf(req).id, null) });
  });
  r.put('/secrets/:name', describeRoute({ params: secretNameParam, summary: 'Create (201) or replace (200) a developer-level secret', body: secretPutSchema, responses: { 201: secretRecord, 200: secretRecord } }), async (req, res) => {
    const out = await put(req, null);
    res.status(out.created ? 201 : 200).json(out.secret);
  });
  r.delete('/secrets/:name', describeRoute({ params: secretNameParam, summary: 'Delete a developer-level secret', responses: { 204: null } }), async (req, res) => {
    await secrets.remove(developerOf(req).id, null, req.params.name);
    res.status(204).end();
  });

  return r;
}
