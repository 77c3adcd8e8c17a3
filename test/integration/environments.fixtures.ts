/**
 * Shared helpers of the environments acceptance suite (test/integration/environments-*.test.ts).
 * Not a test file itself: mocha only loads `*.test.ts`.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { ApiClient, ApiResponse } from '../helpers/service.js';

export const ENV_ID = /^env_[0-9a-f]{24}$/;
export const WAKEUP_ID = /^wak_[0-9a-f]{24}$/;
/** RFC 3339 UTC with milliseconds (decisions.md, Conventions). */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A fresh end user id, so tests sharing one service never collide. */
export function uid(prefix = 'user'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

/**
 * Status, `error` code and the exact key set of an error body: `error` and `message`,
 * plus `environment_id` only where the spec says so (and then equal to `environmentId`).
 */
export function expectError(res: ApiResponse, status: number, code: string, environmentId?: string): void {
  expect(res.status, `${res.status} ${res.text}`).to.equal(status);
  expect(res.headers.get('content-type') ?? '').to.match(/^application\/json/);
  expect(res.body.error, res.text).to.equal(code);
  expect(res.body.message).to.be.a('string').and.not.equal('');
  if (environmentId === undefined) {
    expect(Object.keys(res.body).sort(), res.text).to.deep.equal(['error', 'message']);
  } else {
    expect(Object.keys(res.body).sort(), res.text).to.deep.equal(['environment_id', 'error', 'message']);
    expect(res.body.environment_id).to.equal(environmentId);
  }
}

export function expectNotFound(res: ApiResponse): void {
  expectError(res, 404, 'not_found');
  expect(res.body.message).to.equal('no such resource');
}

/** Creates an environment and asserts the 201; returns the record. */
export async function createEnv(api: ApiClient, body: Record<string, unknown> = {}, headers?: Record<string, string>): Promise<any> {
  const res = await api.post('/v1/environments', { end_user_id: uid(), ...body }, headers);
  expect(res.status, res.text).to.equal(201);
  return res.body;
}

/** Walks a string-cursor list to the end, asserting the page envelope on the way. */
export async function walk(api: ApiClient, path: string, limit: number): Promise<{ items: any[]; pages: number }> {
  const items: any[] = [];
  let after: string | null = null;
  let pages = 0;
  const sep = path.includes('?') ? '&' : '?';
  for (;;) {
    const res: ApiResponse = await api.get(`${path}${sep}limit=${limit}${after ? `&after=${after}` : ''}`);
    expect(res.status, res.text).to.equal(200);
    expect(Object.keys(res.body).sort()).to.deep.equal(['data', 'next']);
    pages++;
    items.push(...res.body.data);
    expect(res.body.data.length).to.be.at.most(limit);
    if (res.body.next === null) return { items, pages };
    expect(res.body.next).to.equal(res.body.data[res.body.data.length - 1].id);
    after = res.body.next;
    if (pages > 1000) throw new Error('pagination does not end');
  }
}
