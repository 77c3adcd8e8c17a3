/**
 * Retention (issue 10, item 6; docs/retention.md): the hourly `retention` job on the job
 * runner prunes each table past its window and not before. The real service on a real
 * database (SQLite, or MySQL when DATABASE_URL says so); time moves by the test clock
 * (POST /v1/test-clock/advance runs what became due), nothing sleeps.
 */
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { createEnv } from './environments.fixtures.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { eventsStore, type WebhookEventStatus } from '../../webhooks/events.store.js';
import { deliveriesStore } from '../../webhooks/deliveries.store.js';
import { AGENDA_JOBS_TABLE } from '../../jobs/agenda-knex-backend.js';
import { RETENTION_EVERY_MS, RETENTION_JOB, runRetention } from '../../jobs/retention.job.js';
import { silentLogger } from '../../lib/log.js';
import { ServiceClock } from '../../lib/clock.js';
import type { AuditEntryInput } from '../../audit/audit.service.js';
import { deleteInBatches } from '../../store/prune.js';
import { freshDb } from '../helpers/db.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;

const hex = (n: number) => randomBytes(n).toString('hex');

function auditEntry(developerId: string, i: number): AuditEntryInput {
  return {
    developer_id: developerId, environment_id: null, method: 'GET', host: 'api.example.com', path: `/v1/items/${i}`,
    connector: null, category: null, credential: 'none', decision: 'deny', reason: 'no_rule', matched_rules: [],
    approval_id: null, grant_id: null, status: 403, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 1,
  };
}

describe('retention job', function () {
  this.timeout(120_000);

  describe('default windows (webhooks 30 days, jobs and wakeups 7 days, audit kept forever)', () => {
    let t: TestService;
    let envId: string;
    let t0: number;
    /** What was created at t0 (old) and at t0 + 20 days (newer), by kind. */
    const ids = {
      events: {} as Record<string, string>,
      deliveries: [] as string[],
      newerEvent: '',
      newerDelivery: '',
      wakeups: { fired: '', cancelled: '', pending: '' },
      jobs: {} as Record<string, string>,
      audit: [] as string[],
    };

    const eventIds = async () => (await t.svc.db('webhook_events').select('id')).map((r: { id: string }) => r.id);
    const deliveryIds = async () => (await t.svc.db('webhook_deliveries').select('id')).map((r: { id: string }) => r.id);
    const wakeupIds = async () => (await t.svc.db('wakeups').select('id')).map((r: { id: string }) => r.id);
    const jobIds = async () => (await t.svc.db(AGENDA_JOBS_TABLE).select('id')).map((r: { id: string }) => r.id);

    async function event(status: WebhookEventStatus, createdAt: number, nextAttemptAt: number | null = null): Promise<string> {
      const id = `evt_${hex(12)}`;
      await eventsStore.insert(t.svc.db, {
        id, developer_id: DEFAULT_DEVELOPER_ID, environment_id: null, type: 'approval.requested', body: '{}', created_at: createdAt, status,
        attempts: status === 'pending' ? 0 : 1, next_attempt_at: nextAttemptAt, last_attempt_at: status === 'pending' ? null : createdAt,
        delivered_at: status === 'delivered' ? createdAt : null, locked_until: null,
      });
      return id;
    }

    async function delivery(eventId: string, at: number, ok: boolean): Promise<string> {
      const id = `dlv_${hex(12)}`;
      await deliveriesStore.insert(t.svc.db, {
        id, event_id: eventId, developer_id: DEFAULT_DEVELOPER_ID, url: 'https://hooks.example.test/', attempted_at: at,
        status: ok ? 'succeeded' : 'failed', status_code: ok ? 200 : 500, error: ok ? null : 'http_status', duration_ms: 3, next_attempt_at: null,
      });
      return id;
    }

    async function job(name: string, cols: Record<string, unknown>): Promise<string> {
      const id = randomUUID();
      await t.svc.db(AGENDA_JOBS_TABLE).insert({ id, name, priority: 0, type: 'normal', disabled: false, fork: false, data: 'null', next_run_at: null, ...cols });
      return id;
    }

    before(async () => {
      t = await startTestService();
      envId = (await createEnv(t.api)).id;
      t0 = t.svc.clock.nowMs();

      // Webhook events that are over, each with attempts, and one still pending (its next
      // attempt far ahead, so no sweep takes it).
      ids.events.delivered = await event('delivered', t0);
      ids.events.failed = await event('failed', t0);
      ids.events.cancelled = await event('cancelled', t0);
      ids.events.pending = await event('pending', t0, t0 + 1000 * DAY);
      ids.deliveries.push(await delivery(ids.events.delivered, t0, true));
      ids.deliveries.push(await delivery(ids.events.failed, t0, false), await delivery(ids.events.failed, t0 + HOUR, false));

      // Wakeups: one fires an hour from now, one is cancelled, one stays pending (far ahead).
      const at = (ms: number) => new Date(ms).toISOString();
      const mk = async (when: number) => {
        const r = await t.api.post(`/v1/environments/${envId}/wakeups`, { at: at(when) });
        expect(r.status, r.text).to.equal(201);
        return r.body.id as string;
      };
      ids.wakeups.fired = await mk(t0 + HOUR);
      ids.wakeups.cancelled = await mk(t0 + 2 * HOUR);
      ids.wakeups.pending = await mk(t0 + 300 * DAY);
      expect((await t.api.delete(`/v1/environments/${envId}/wakeups/${ids.wakeups.cancelled}`)).status).to.equal(204);

      // Agenda jobs of a name no runner defines (so none of them runs): finished, failed for
      // good, still pending, mid-run (locked, no next run), disabled.
      ids.jobs.finished = await job('test-one-off', { last_run_at: t0, last_finished_at: t0 });
      ids.jobs.failed = await job('test-one-off', { last_run_at: t0, last_finished_at: t0, failed_at: t0, fail_count: 1, fail_reason: 'boom' });
      ids.jobs.pending = await job('test-one-off', { next_run_at: t0 + 1000 * DAY });
      ids.jobs.running = await job('test-one-off', { locked_at: t0, last_run_at: t0, last_finished_at: t0 - DAY });
      ids.jobs.disabled = await job('test-one-off', { disabled: true, last_finished_at: t0 });

      for (let i = 0; i < 5; i++) ids.audit.push((await t.svc.audit.record(auditEntry(DEFAULT_DEVELOPER_ID, i))).id);

      await t.advance(2 * 3600); // the wakeup fires
      const fired = await t.svc.db('wakeups').where({ id: ids.wakeups.fired }).first();
      expect(fired.status).to.equal('fired');
    });
    after(async () => {
      await t?.close();
    });

    it('is registered on the job runner: one recurring `retention` job, every hour', async () => {
      const rows = await t.svc.db(AGENDA_JOBS_TABLE).where({ name: RETENTION_JOB });
      expect(rows).to.have.length(1);
      expect(rows[0].type).to.equal('single');
      expect(Number(rows[0].repeat_interval)).to.equal(RETENTION_EVERY_MS);
      expect(rows[0].next_run_at).to.not.equal(null);
    });

    it('prunes nothing inside the windows (6 days on)', async () => {
      await t.advance(6 * 86400);
      const ran = await t.svc.db(AGENDA_JOBS_TABLE).where({ name: RETENTION_JOB }).first();
      expect(Number(ran.last_finished_at)).to.be.above(t0 + 6 * DAY); // the job did run after the advance
      expect(await eventIds()).to.have.members(Object.values(ids.events));
      expect(await deliveryIds()).to.have.members(ids.deliveries);
      expect(await wakeupIds()).to.include.members(Object.values(ids.wakeups));
      expect(await jobIds()).to.include.members(Object.values(ids.jobs));
    });

    it('8 days on: finished and failed jobs, fired and cancelled wakeups are pruned; webhooks are not yet', async () => {
      // A newer event and attempt, 20 days before the webhook cutoff below.
      ids.newerEvent = await event('delivered', t.svc.clock.nowMs());
      ids.newerDelivery = await delivery(ids.newerEvent, t.svc.clock.nowMs(), true);
      await t.advance(2 * 86400);
      const jobs = await jobIds();
      expect(jobs).to.not.include(ids.jobs.finished);
      expect(jobs).to.not.include(ids.jobs.failed);
      // Pending, mid-run and disabled jobs stay, and so do the service's recurring ones.
      expect(jobs).to.include.members([ids.jobs.pending, ids.jobs.running, ids.jobs.disabled]);
      expect((await t.svc.db(AGENDA_JOBS_TABLE).where({ name: RETENTION_JOB })).length).to.equal(1);
      expect(await wakeupIds()).to.deep.equal([ids.wakeups.pending]);
      // The pending wakeup is still listed; a pruned one cancels as 404, as a fired one did.
      const listed = await t.api.get(`/v1/environments/${envId}/wakeups`);
      expect(listed.body.data.map((w: { id: string }) => w.id)).to.deep.equal([ids.wakeups.pending]);
      expect((await t.api.delete(`/v1/environments/${envId}/wakeups/${ids.wakeups.fired}`)).status).to.equal(404);
      expect(await eventIds()).to.include.members(Object.values(ids.events));
      expect(await deliveryIds()).to.include.members(ids.deliveries);
    });

    it('31 days on: webhook events that are over go with their attempts; pending and newer events stay', async () => {
      await t.advance(23 * 86400);
      expect(await eventIds()).to.have.members([ids.events.pending, ids.newerEvent]);
      expect(await deliveryIds()).to.deep.equal([ids.newerDelivery]);
      const listed = await t.api.get('/v1/webhook-deliveries');
      expect(listed.body.data.map((d: { id: string }) => d.id)).to.deep.equal([ids.newerDelivery]);
    });

    it('the audit log is untouched without GATEWAY_AUDIT_RETENTION_DAYS', async () => {
      const rows = await t.svc.db('audit_log').where({ developer_id: DEFAULT_DEVELOPER_ID }).orderBy('seq').select('id');
      expect(rows.map((r: { id: string }) => r.id)).to.deep.equal(ids.audit);
      const head = await t.svc.db('audit_chain_heads').where({ developer_id: DEFAULT_DEVELOPER_ID }).first();
      expect([Number(head.pruned_seq), head.pruned_at]).to.deep.equal([0, null]);
      expect((await t.api.get('/v1/audit-log/verify')).body).to.deep.equal({ ok: true, checked: 5, first_broken_id: null, checked_from: ids.audit[0] });
    });
  });

  describe('GATEWAY_AUDIT_RETENTION_DAYS=10', () => {
    let t: TestService;
    const ids: string[] = [];

    before(async () => {
      t = await startTestService({ GATEWAY_AUDIT_RETENTION_DAYS: '10' });
      for (let i = 0; i < 6; i++) ids.push((await t.svc.audit.record(auditEntry(DEFAULT_DEVELOPER_ID, i))).id);
      await t.advance(5 * 86400);
      for (let i = 6; i < 10; i++) ids.push((await t.svc.audit.record(auditEntry(DEFAULT_DEVELOPER_ID, i))).id);
    });
    after(async () => {
      await t?.close();
    });

    const kept = async () =>
      (await t.svc.db('audit_log').where({ developer_id: DEFAULT_DEVELOPER_ID }).orderBy('seq').select('id')).map((r: { id: string }) => r.id);

    it('keeps everything inside the window', async () => {
      await t.advance(4 * 86400); // the oldest entries are 9 days old
      expect(await kept()).to.deep.equal(ids);
    });

    it('prunes the prefix past the window; verify is ok from the oldest kept id', async () => {
      await t.advance(2 * 86400); // 11 and 6 days old
      expect(await kept()).to.deep.equal(ids.slice(6));
      const v = await t.api.get('/v1/audit-log/verify');
      expect(v.body).to.deep.equal({ ok: true, checked: 4, first_broken_id: null, checked_from: ids[6] });
    });

    it('a middle entry deleted afterwards still fails verify', async () => {
      await t.svc.db('audit_log').where({ id: ids[8] }).delete();
      const v = await t.api.get('/v1/audit-log/verify');
      expect(v.body).to.deep.equal({ ok: false, checked: 3, first_broken_id: ids[9], checked_from: ids[6] });
    });
  });

  it('deleteInBatches: bounded statements, looped until nothing matches; rows not matching stay', async () => {
    const fresh = await freshDb();
    try {
      const rows = Array.from({ length: 9 }, (_, i) => ({
        id: `wak_${String(i).padStart(24, '0')}`, environment_id: 'env_x', developer_id: 'dev_x', at: i, reason: null,
        status: i < 7 ? 'fired' : 'pending', created_at: i, fired_at: i < 7 ? i : null, cancelled_at: null,
      }));
      await fresh.db('wakeups').insert(rows);
      const sizes: number[] = [];
      let before = 9;
      const n = await deleteInBatches(fresh.db, 'wakeups', (q) => q.where('status', 'fired'), {
        batchSize: 3,
        onBatch: async () => {
          const left = Number((await fresh.db('wakeups').count({ n: '*' }))[0]!.n);
          sizes.push(before - left);
          before = left;
        },
      });
      expect(n).to.equal(7);
      expect(sizes).to.deep.equal([3, 3]); // then a last batch of 1, with no pause after it
      expect((await fresh.db('wakeups').select('id')).map((r: { id: string }) => r.id).sort()).to.deep.equal([rows[7]!.id, rows[8]!.id]);
    } finally {
      await fresh.cleanup();
    }
  });

  describe('runRetention', () => {
    const clock = new ServiceClock();
    const noop = async () => 0;

    it('gives each target its own cutoff, skips the audit log when its window is unset, and the auth-state hook when absent', async () => {
      const seen: Record<string, number> = {};
      const rec = (name: string) => async (before: number) => {
        seen[name] = before;
        return 1;
      };
      const now = clock.nowMs();
      const counts = await runRetention(
        { webhooks: rec('webhooks'), jobs: rec('jobs'), wakeups: rec('wakeups'), audit: rec('audit') },
        { webhookDays: 30, jobDays: 7, auditDays: null },
        { clock, log: silentLogger },
      );
      expect(counts).to.deep.equal({ webhooks: 1, jobs: 1, wakeups: 1 });
      expect(Object.keys(seen).sort()).to.deep.equal(['jobs', 'wakeups', 'webhooks']);
      expect(seen.webhooks).to.be.closeTo(now - 30 * DAY, 1_000);
      expect(seen.jobs).to.be.closeTo(now - 7 * DAY, 1_000);
      expect(seen.wakeups).to.equal(seen.jobs);

      const withAudit = await runRetention(
        { webhooks: noop, jobs: noop, wakeups: noop, audit: rec('audit'), authorizationStates: rec('authorizationStates') },
        { webhookDays: 30, jobDays: 7, auditDays: 365 },
        { clock, log: silentLogger },
      );
      expect(withAudit).to.deep.equal({ webhooks: 0, jobs: 0, wakeups: 0, authorizationStates: 1, audit: 1 });
      expect(seen.audit).to.be.closeTo(now - 365 * DAY, 1_000);
      expect(seen.authorizationStates).to.be.closeTo(now - 7 * DAY, 1_000);
    });

    it('one failing target does not stop the others; the run then fails', async () => {
      let audited = false;
      const run = runRetention(
        { webhooks: async () => { throw new Error('store down'); }, jobs: noop, wakeups: noop, audit: async () => { audited = true; return 0; } },
        { webhookDays: 30, jobDays: 7, auditDays: 1 },
        { clock, log: silentLogger },
      );
      let err: unknown;
      try {
        await run;
      } catch (e) {
        err = e;
      }
      expect((err as Error)?.message).to.equal('retention: pruning failed for webhooks');
      expect(audited).to.equal(true);
    });
  });
});
