import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';

describe('regressions', () => {
  let t: TestService;
  before(async () => {
    t = await startTestService();
  });
  after(async () => {
    await t.close();
  });

  it('Idempotency-Keys that differ only in letter case are different keys (MySQL collation)', async () => {
    const a = await t.api.post('/v1/environments', { end_user_id: 'case-a' }, { 'idempotency-key': 'Retry-Key-1' });
    const b = await t.api.post('/v1/environments', { end_user_id: 'case-b' }, { 'idempotency-key': 'retry-key-1' });
    expect(a.status).to.equal(201);
    expect(b.status).to.equal(201);
    expect(a.body.id).to.not.equal(b.body.id);
  });

  it('end users that differ only in letter case are different end users', async () => {
    expect((await t.api.post('/v1/environments', { end_user_id: 'Alice' })).status).to.equal(201);
    expect((await t.api.post('/v1/environments', { end_user_id: 'alice' })).status).to.equal(201);
  });

  it('a wakeup due in an hour fires through the job runner when the test clock passes it', async () => {
    const env = (await t.api.post('/v1/environments', { end_user_id: 'wake-job' })).body;
    expect((await t.api.post(`/v1/environments/${env.id}/suspend`)).status).to.equal(200);
    const now = Date.parse((await t.api.post('/v1/test-clock/advance', { seconds: 0 })).body.now);
    const w = await t.api.post(`/v1/environments/${env.id}/wakeups`, { at: new Date(now + 3600_000).toISOString(), reason: 'daily digest' });
    expect(w.status).to.equal(201);
    await t.advance(3601);
    const after = (await t.api.get(`/v1/environments/${env.id}`)).body;
    expect(after.desired_state).to.equal('running');
    const kinds = (await t.api.get(`/v1/environments/${env.id}/events`)).body.data.map((e: { kind: string }) => e.kind);
    expect(kinds).to.include('wakeup_fired');
  });
});
