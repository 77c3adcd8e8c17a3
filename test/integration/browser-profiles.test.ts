import { expect } from 'chai';
import { startTestService, type TestService, type ApiClient } from '../helpers/service.js';

/** Browser profiles and limits (issue 14, item 1; service.md, Browser endpoints). */
describe('browser profiles', function () {
  this.timeout(30_000);
  let t: TestService;

  before(async () => {
    t = await startTestService({ GATEWAY_BROWSER_LEASES_PER_END_USER: '3' });
  });
  after(async () => {
    await t.close();
  });

  it('create: 201 with version 0; the same name for the same end user is 409 profile_exists, for another end user fine', async () => {
    const r = await t.api.post('/v1/browser/profiles', { end_user_id: 'u1', name: 'work' });
    expect(r.status).to.equal(201);
    expect(r.body).to.include({ end_user_id: 'u1', name: 'work', version: 0 });
    expect(r.body.id).to.match(/^bpr_[0-9a-f]{24}$/);
    const again = await t.api.post('/v1/browser/profiles', { end_user_id: 'u1', name: 'work' });
    expect(again.status).to.equal(409);
    expect(again.body.error).to.equal('profile_exists');
    expect((await t.api.post('/v1/browser/profiles', { end_user_id: 'u2', name: 'work' })).status).to.equal(201);
    // Names differ by case or a trailing space: distinct (no collation folds them together).
    expect((await t.api.post('/v1/browser/profiles', { end_user_id: 'u1', name: 'Work' })).status).to.equal(201);
    expect((await t.api.post('/v1/browser/profiles', { end_user_id: 'u1', name: 'work ' })).status).to.equal(201);
  });

  it('racing creates of one name: exactly one wins', async () => {
    const rs = await Promise.all(Array.from({ length: 8 }, () => t.api.post('/v1/browser/profiles', { end_user_id: 'race', name: 'same' })));
    expect(rs.map((r) => r.status).sort()).to.deep.equal([201, 409, 409, 409, 409, 409, 409, 409]);
  });

  it('validation: 422 for a missing or wrong-typed field or an unknown one, 400 for an empty or over-long value, 415 without JSON', async () => {
    const cases: Array<[unknown, number]> = [
      [{ name: 'x' }, 422], [{ end_user_id: 'u' }, 422], [{ end_user_id: 1, name: 'x' }, 422], [{ end_user_id: 'u', name: 'x', extra: 1 }, 422],
      [{ end_user_id: '', name: 'x' }, 400], [{ end_user_id: 'u', name: '' }, 400], [{ end_user_id: 'x'.repeat(201), name: 'x' }, 400], [{ end_user_id: 'u', name: 'a\nb' }, 400],
    ];
    for (const [body, status] of cases) {
      const r = await t.api.post('/v1/browser/profiles', body);
      expect(r.status, JSON.stringify(body)).to.equal(status);
    }
    const raw = await t.raw('POST', '/v1/browser/profiles', { body: '{"end_user_id":"u","name":"n"}', headers: { authorization: `Bearer ${t.api.key}` } });
    expect(raw.status).to.equal(415);
  });

  it('get, list (by end user, paginated, ascending), delete: 204, then 404 and hidden; the name is free again', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await t.api.post('/v1/browser/profiles', { end_user_id: 'pager', name: `p${i}` })).body.id);
    expect((await t.api.get(`/v1/browser/profiles/${ids[0]}`)).body.name).to.equal('p0');
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const q: string = `/v1/browser/profiles?end_user_id=pager&limit=2${after ? `&after=${after}` : ''}`;
      const pg: any = (await t.api.get(q)).body;
      seen.push(...pg.data.map((p: any) => p.id));
      if (!pg.next) break;
      after = pg.next;
    }
    expect(seen).to.deep.equal(ids);
    const del = await t.api.delete(`/v1/browser/profiles/${ids[1]}`);
    expect(del.status).to.equal(204);
    expect((await t.api.get(`/v1/browser/profiles/${ids[1]}`)).status).to.equal(404);
    expect((await t.api.delete(`/v1/browser/profiles/${ids[1]}`)).status).to.equal(404);
    expect((await t.api.get('/v1/browser/profiles?end_user_id=pager')).body.data.map((p: any) => p.id)).to.not.include(ids[1]);
    expect((await t.api.post('/v1/browser/profiles', { end_user_id: 'pager', name: 'p1' })).status).to.equal(201);
  });

  it('another developer sees none of them: 404', async () => {
    const mine = (await t.api.post('/v1/browser/profiles', { end_user_id: 'mine', name: 'x' })).body.id;
    const other: ApiClient = await t.otherDeveloper();
    expect((await other.get(`/v1/browser/profiles/${mine}`)).status).to.equal(404);
    expect((await other.delete(`/v1/browser/profiles/${mine}`)).status).to.equal(404);
    expect((await other.get('/v1/browser/profiles')).body.data).to.deep.equal([]);
    // The same end user id and name under another developer is theirs to create.
    expect((await other.post('/v1/browser/profiles', { end_user_id: 'mine', name: 'x' })).status).to.equal(201);
  });

  it('limits: the operator\'s configuration', async () => {
    const r = await t.api.get('/v1/browser/limits');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ per_developer: 50, per_end_user: 3, lease_secs: 900, save_deadline_secs: 60 });
  });
});
