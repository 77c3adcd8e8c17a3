import { Router } from 'express';
import type { TemplatesService } from '../../environments/templates.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { page, parsePage } from '../pagination.js';
import { templateSchema } from '../schemas/environments.js';

export function templatesRouter(deps: { templates: TemplatesService }): Router {
  const { templates } = deps;
  const r = Router();
  r.post('/templates', async (req, res) => {
    const { name, version } = validateBody<{ name: string; version: string }>(templateSchema, requireJson(req));
    res.status(201).json(await templates.create(developerOf(req).id, name, version));
  });
  r.get('/templates', async (req, res) => {
    const { limit, after } = parsePage(req.query);
    res.json(page(await templates.list(developerOf(req).id, limit, after), limit));
  });
  r.get('/templates/:id', async (req, res) => {
    res.json(await templates.get(developerOf(req).id, req.params.id));
  });
  // Stands in for the template builder until builds run here (docs/api.md).
  r.post('/templates/:id/ready', noBody, async (req, res) => {
    res.json(await templates.setStatus(developerOf(req).id, req.params.id, 'ready'));
  });
  r.post('/templates/:id/failed', noBody, async (req, res) => {
    res.json(await templates.setStatus(developerOf(req).id, req.params.id, 'failed'));
  });
  return r;
}
