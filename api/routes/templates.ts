import { Router } from 'express';
import type { TemplatesService } from '../../environments/templates.service.js';
import { developerOf } from '../middleware/auth.js';
import { requireJson, noBody } from '../middleware/json-body.js';
import { validateBody } from '../validation.js';
import { page, parsePage } from '../pagination.js';
import { templateSchema } from '../schemas/environments.js';
import { describeRoute } from '../openapi/route-spec.js';
import { pageQuery, templateIdParam } from '../schemas/common.js';
import { templatePage, templateRecord } from '../schemas/records.js';

export function templatesRouter(deps: { templates: TemplatesService }): Router {
  const { templates } = deps;
  const r = Router();
  r.post('/templates', describeRoute({ summary: 'Register a template version (status building)', body: templateSchema, responses: { 201: templateRecord }, errors: ['template_exists'] }), async (req, res) => {
    const { name, version } = validateBody<{ name: string; version: string }>(templateSchema, requireJson(req));
    res.status(201).json(await templates.create(developerOf(req).id, name, version));
  });
  r.get('/templates', describeRoute({ summary: 'List templates', query: pageQuery, responses: { 200: templatePage } }), async (req, res) => {
    const { limit, after } = parsePage(req.query);
    res.json(page(await templates.list(developerOf(req).id, limit, after), limit));
  });
  r.get('/templates/:id', describeRoute({ params: templateIdParam, summary: 'Get a template', responses: { 200: templateRecord } }), async (req, res) => {
    res.json(await templates.get(developerOf(req).id, req.params.id));
  });
  // Stands in for the template builder until builds run here (docs/api.md).
  r.post('/templates/:id/ready', noBody, describeRoute({ params: templateIdParam, summary: 'Mark a template ready (stands in for the builder)', responses: { 200: templateRecord } }), async (req, res) => {
    res.json(await templates.setStatus(developerOf(req).id, req.params.id, 'ready'));
  });
  r.post('/templates/:id/failed', noBody, describeRoute({ params: templateIdParam, summary: 'Mark a template failed (stands in for the builder)', responses: { 200: templateRecord } }), async (req, res) => {
    res.json(await templates.setStatus(developerOf(req).id, req.params.id, 'failed'));
  });
  return r;
}
