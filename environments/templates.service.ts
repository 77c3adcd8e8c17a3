import type { Db, Queryable } from '../store/db.js';
import { isUniqueViolation } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { ServiceError, notFound } from '../lib/errors.js';
import { applyKeysetAfter } from '../store/keyset.js';
import { TEMPLATE_REF } from './rules.js';

/**
 * A minimal template registry: a template version is created `building` and becomes
 * `ready` (or `failed`) when its build ends. Builds are not run here yet; the
 * `/ready` endpoint stands in for the builder so the create-environment rules
 * (must exist, must be ready) can be exercised.
 */
export type TemplateStatus = 'building' | 'ready' | 'failed';

interface TemplateRow {
  id: string;
  developer_id: string;
  name: string;
  version: string;
  status: TemplateStatus;
  created_at: number;
  updated_at: number;
}

export interface Template {
  id: string;
  name: string;
  version: string;
  ref: string;
  status: TemplateStatus;
  created_at: string | null;
  updated_at: string | null;
}

function toTemplate(r: TemplateRow): Template {
  return { id: r.id, name: r.name, version: r.version, ref: `${r.name}:${r.version}`, status: r.status, created_at: iso(r.created_at), updated_at: iso(r.updated_at) };
}

export function createTemplatesService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  async function create(developerId: string, name: string, version: string): Promise<Template> {
    const now = clock.nowMs();
    const row: TemplateRow = { id: newId('tpl'), developer_id: developerId, name, version, status: 'building', created_at: now, updated_at: now };
    try {
      await db('templates').insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceError('template_exists', `template ${name}:${version} already exists`);
      throw err;
    }
    return toTemplate(row);
  }

  async function get(developerId: string, id: string): Promise<Template> {
    const row = await db<TemplateRow>('templates').where({ developer_id: developerId, id }).first();
    if (!row) throw notFound();
    return toTemplate(row);
  }

  async function list(developerId: string, limit: number, after: string | null): Promise<Template[]> {
    const q = db<TemplateRow>('templates').where({ developer_id: developerId });
    await applyKeysetAfter(db, q, 'templates', 'created_at', after, 'asc', { developer_id: developerId });
    return (await q.limit(limit + 1)).map(toTemplate);
  }

  async function setStatus(developerId: string, id: string, status: TemplateStatus): Promise<Template> {
    const n = await db('templates').where({ developer_id: developerId, id }).update({ status, updated_at: clock.nowMs() });
    if (n === 0) throw notFound();
    return get(developerId, id);
  }

  /**
   * The create-environment rule: a nonexistent version is 400, one that is not ready 409
   * `template_not_ready`. Runs inside the create transaction.
   */
  async function requireReady(trx: Queryable, developerId: string, ref: string): Promise<void> {
    const m = TEMPLATE_REF.exec(ref);
    if (!m) throw new ServiceError('invalid_request', 'template must be name:version');
    const row = await trx<TemplateRow>('templates').where({ developer_id: developerId, name: m[1], version: m[2] }).first();
    if (!row) throw new ServiceError('invalid_request', `template ${ref} does not exist`);
    if (row.status !== 'ready') throw new ServiceError('template_not_ready', `template ${ref} is ${row.status}, not ready`);
  }

  return { create, get, list, setStatus, requireReady };
}

export type TemplatesService = ReturnType<typeof createTemplatesService>;
