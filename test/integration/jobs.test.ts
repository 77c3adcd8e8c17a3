import { expect } from 'chai';
import { ServiceClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createDb, parseDatabaseUrl, type Db } from '../../store/db.js';
import { freshDb, type FreshDb } from '../helpers/db.js';
import { createJobRunner, type JobRunner, type JobRunnerOptions } from '../../jobs/runner.js';
import { AGENDA_JOBS_TABLE, KnexJobRepository, type AgendaJobRow } from '../../jobs/agenda-knex-backend.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('jobs: agenda on the knex store', function () {
  let fresh: FreshDb;
  let clock: ServiceClock;
  const runners: JobRunner[] = [];
  const extraDbs: Db[] = [];

  function runner(opts: Partial<JobRunnerOptions> = {}): JobRunner {
    const r = createJobRunner({ db: fresh.db, clock, log: silentLogger, processEveryMs: 50, ...opts });
    runners.push(r);
    return r;
  }

  /** A second knex pool on the same database, as a second worker process would have. */
  async function secondPool(): Promise<Db> {
    const db = await createDb(parseDatabaseUrl(fresh.url)!);
    extraDbs.push(db);
    return db;
  }

  function rows(): Promise<AgendaJobRow[]> {
    return fresh.db<AgendaJobRow>(AGENDA_JOBS_TABLE).select('*') as Promise<AgendaJobRow[]>;
  }

  async function row(id: string): Promise<AgendaJobRow> {
    const r = (await fresh.db<AgendaJobRow>(AGENDA_JOBS_TABLE).where('id', id).first()) as AgendaJobRow | undefined;
    if (!r) throw new Error(`no job ${id}`);
    return r;
  }

  beforeEach(async () => {
    fresh = await freshDb();
    clock = new ServiceClock();
  });

  afterEach(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop({ timeoutMs: 2_000 })));
    await Promise.all(extraDbs.splice(0).map((d) => d.destroy()));
    await fresh.cleanup();
  });

  it('runs a scheduled job once, with its data', async () => {
    const seen: Array<{ data: unknown; attempt: number }> = [];
    const r = runner();
    r.define('hello', (data, ctx) => {
      seen.push({ data, attempt: ctx.attempt });
    });
    const job = await r.schedule('hello', clock.nowMs(), { who: 'world' });
    await r.start();
    await waitFor('the job to run', () => seen.length === 1);
    // The runner is done with it (the signal), and it ran once.
    await waitFor('the lock to be released', async () => (await row(job.id)).locked_at == null);
    expect(seen).to.deep.equal([{ data: { who: 'world' }, attempt: 1 }]);
    const after = await row(job.id);
    expect(after.next_run_at).to.equal(null);
    expect(after.last_finished_at).to.not.equal(null);
    expect(after.failed_at).to.equal(null);
  });

  it('does not run a job before it is due, and runs it once the clock reaches it', async () => {
    let runs = 0;
    const r = runner();
    r.define('later', () => {
      runs++;
    });
    const job = await r.schedule('later', clock.nowMs() + 2 * SECOND, {});
    expect(job.runAtMs).to.be.closeTo(clock.nowMs() + 2 * SECOND, 50);
    await r.start();
    // runDue() is the signal: the runner looked for due jobs and found none.
    expect((await r.runDue()).ran).to.equal(0);
    expect(runs).to.equal(0);

    clock.advance(2 * SECOND);
    const result = await r.runDue();
    expect(result).to.deep.equal({ ran: 1, timedOut: false });
    expect(runs).to.equal(1);
  });

  it('retries a failing handler with backoff, on the service clock', async () => {
    const attempts: number[] = [];
    const r = runner();
    r.define(
      'flaky',
      (_data, ctx) => {
        attempts.push(ctx.attempt);
        if (ctx.attempt < 3) throw new Error(`boom ${ctx.attempt}`);
      },
      { retry: { retries: 3, delayMs: MINUTE, factor: 2 } },
    );
    const job = await r.schedule('flaky', clock.nowMs(), null);
    await r.start();

    await r.runDue();
    expect(attempts).to.deep.equal([1]);
    let state = await row(job.id);
    expect(Number(state.fail_count)).to.equal(1);
    expect(state.fail_reason).to.equal('boom 1');
    expect(Number(state.next_run_at)).to.be.closeTo(clock.nowMs() + MINUTE, 2 * SECOND);

    // Not due yet: the retry waits for its backoff.
    await r.runDue();
    expect(attempts).to.deep.equal([1]);

    clock.advance(MINUTE);
    await r.runDue();
    expect(attempts).to.deep.equal([1, 2]);
    state = await row(job.id);
    expect(Number(state.next_run_at)).to.be.closeTo(clock.nowMs() + 2 * MINUTE, 2 * SECOND);

    clock.advance(2 * MINUTE);
    await r.runDue();
    expect(attempts).to.deep.equal([1, 2, 3]);
    state = await row(job.id);
    expect(Number(state.fail_count)).to.equal(0);
    expect(state.next_run_at).to.equal(null);
  });

  it('does not retry when retry is false, and stops after the last retry', async () => {
    let once = 0;
    let twice = 0;
    const r = runner();
    r.define('once', () => {
      once++;
      throw new Error('no');
    }, { retry: false });
    r.define('twice', () => {
      twice++;
      throw new Error('no');
    }, { retry: { retries: 1, delayMs: SECOND } });
    await r.schedule('once', clock.nowMs(), null);
    await r.schedule('twice', clock.nowMs(), null);
    await r.start();
    await r.runDue();
    clock.advance(HOUR);
    await r.runDue();
    clock.advance(HOUR);
    await r.runDue();
    expect(once).to.equal(1);
    expect(twice).to.equal(2);
  });

  it('two runners on two pools never run the same job twice', async function () {
    const N = 40;
    const runs: Array<{ data: number; by: string }> = [];
    const a = runner({ processEveryMs: 20 });
    const b = runner({ db: await secondPool(), processEveryMs: 20 });
    for (const [r, by] of [[a, 'a'], [b, 'b']] as const) {
      r.define('work', async (data: number) => {
        runs.push({ data, by });
        await sleep(5);
      });
    }
    for (let i = 0; i < N; i++) await a.schedule('work', clock.nowMs(), i);
    await Promise.all([a.start(), b.start()]);
    await waitFor('every job to run', () => runs.length >= N, 10_000);
    // Both runners are done with every job (nothing locked): only then count the runs.
    await waitFor('every lock to be released', async () => (await rows()).every((j) => j.locked_at == null), 10_000);
    expect(runs).to.have.length(N);
    expect(new Set(runs.map((r) => r.data)).size).to.equal(N);
    const locked = (await rows()).filter((r) => r.locked_at != null);
    expect(locked).to.have.length(0);
  });

  it('runs a job scheduled while no runner was up once a new runner starts', async () => {
    let runs = 0;
    const first = runner();
    first.define('mail', () => {
      runs++;
    });
    await first.start();
    await first.stop();
    // Process down: the job is only written to the table.
    await first.schedule('mail', clock.nowMs(), { to: 'a@example.com' });
    expect(runs).to.equal(0); // no runner is started: nothing can run it

    const second = runner();
    second.define('mail', () => {
      runs++;
    });
    await second.start();
    await waitFor('the new runner to pick it up', () => runs === 1);
  });

  it('stop() waits for a running job and leaves nothing locked', async () => {
    let finished = false;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = runner();
    r.define('slow', async () => {
      await gate;
      finished = true;
    });
    const job = await r.schedule('slow', clock.nowMs(), null);
    await r.start();
    await waitFor('the job to start', async () => (await row(job.id)).last_run_at != null);
    // The job is still running when stop() is called; it finishes only afterwards.
    const stopping = r.stop();
    expect(finished).to.equal(false);
    release();
    await stopping;
    expect(finished).to.equal(true);
    expect((await row(job.id)).locked_at).to.equal(null);
  });

  it('a job due in 6 hours fires when the clock is advanced 6 hours and runDue() is called', async () => {
    const fired: number[] = [];
    const r = runner({ processEveryMs: 5 * SECOND });
    r.define('idle-step', () => {
      fired.push(clock.nowMs());
    });
    const dueAt = clock.nowMs() + 6 * HOUR;
    await r.schedule('idle-step', dueAt, { env: 'env_1' });
    await r.start();
    expect((await r.runDue()).ran).to.equal(0);

    const t0 = Date.now();
    clock.advance(6 * HOUR);
    const result = await r.runDue({ timeoutMs: 3_000 });
    expect(Date.now() - t0).to.be.lessThan(1_500);
    expect(result).to.deep.equal({ ran: 1, timedOut: false });
    expect(fired).to.have.length(1);
    expect(fired[0]).to.be.at.least(dueAt);
  });

  it('runDue() also waits for jobs that handlers schedule for now', async () => {
    const order: string[] = [];
    const r = runner({ processEveryMs: 5 * SECOND });
    r.define('first', async () => {
      order.push('first');
      await r.schedule('second', clock.nowMs(), null);
    });
    r.define('second', () => {
      order.push('second');
    });
    await r.schedule('first', clock.nowMs() + HOUR, null);
    await r.start();
    clock.advance(HOUR);
    const result = await r.runDue();
    expect(result.timedOut).to.equal(false);
    expect(order).to.deep.equal(['first', 'second']);
  });

  it('a job locked by a dead worker is picked up once its lock expires', async () => {
    const ran: string[] = [];
    const insertLocked = async (id: string, lockedAgoMs: number) => {
      await fresh.db(AGENDA_JOBS_TABLE).insert({
        id,
        name: 'sync',
        priority: 0,
        type: 'normal',
        // Crashed mid-run: agenda clears next_run_at of a one-off job when it starts it.
        next_run_at: null,
        locked_at: clock.nowMs() - lockedAgoMs,
        last_run_at: clock.nowMs() - lockedAgoMs,
        disabled: false,
        fork: false,
        data: JSON.stringify({ id }),
        last_modified_by: 'dead-worker',
      });
    };
    await insertLocked('old-lock', 11 * MINUTE);
    await insertLocked('recent-lock', 1 * MINUTE);
    const r = runner();
    r.define('sync', (data: { id: string }) => {
      ran.push(data.id);
    });
    await r.start();
    await r.runDue();
    expect(ran).to.deep.equal(['old-lock']);

    // The other worker is still within its 10 minutes; once they pass, its job is ours.
    clock.advance(9 * MINUTE + 30 * SECOND);
    await r.runDue();
    expect(ran).to.deep.equal(['old-lock', 'recent-lock']);
    expect((await rows()).every((j) => j.locked_at == null)).to.equal(true);
  });

  it('a running job is not started again when the clock jumps past its lock lifetime', async () => {
    let starts = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = runner();
    r.define('long', async () => {
      starts++;
      await gate;
    });
    await r.schedule('long', clock.nowMs(), null);
    await r.start();
    await waitFor('the job to start', () => starts === 1);
    clock.advance(HOUR);
    const due = r.runDue();
    await sleep(200);
    release();
    const result = await due;
    expect(result.timedOut).to.equal(false);
    expect(starts).to.equal(1);
  });

  it('a unique key queues a logical job once, atomically across runners', async () => {
    const a = runner();
    const b = runner({ db: await secondPool() });
    const at = clock.nowMs() + HOUR;
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).schedule('deliver', at + i, { n: i }, { uniqueKey: 'outbox:42' })),
    );
    expect(new Set(results.map((j) => j.id)).size).to.equal(1);
    const all = await rows();
    expect(all).to.have.length(1);

    // A second schedule returns the queued job unchanged...
    const again = await a.schedule('deliver', at + 999, { n: 99 }, { uniqueKey: 'outbox:42' });
    expect(again.id).to.equal(all[0].id);
    expect(JSON.parse((await row(again.id)).data!)).to.deep.equal(JSON.parse(all[0].data!));
    // ...unless asked to replace it.
    const moved = await a.schedule('deliver', at + 5 * HOUR, { n: 100 }, { uniqueKey: 'outbox:42', replace: true });
    expect(moved.id).to.equal(all[0].id);
    expect(moved.runAtMs).to.be.closeTo(at + 5 * HOUR, 5);
    expect(JSON.parse((await row(moved.id)).data!)).to.deep.equal({ n: 100 });

    // Another key, or another name, is another job.
    await a.schedule('deliver', at, { n: 1 }, { uniqueKey: 'outbox:43' });
    await a.schedule('other', at, { n: 1 }, { uniqueKey: 'outbox:42' });
    expect(await rows()).to.have.length(3);

    expect(await a.cancel({ name: 'deliver', uniqueKey: 'outbox:42' })).to.equal(1);
    expect(await rows()).to.have.length(2);
  });

  it('every() keeps one job per name and repeats on the service clock', async () => {
    let runs = 0;
    const r = runner();
    r.define('sweep', () => {
      runs++;
    });
    const first = await r.every('sweep', MINUTE, null);
    const second = await r.every('sweep', MINUTE, null);
    expect(second.id).to.equal(first.id);
    expect(await rows()).to.have.length(1);
    await r.start();
    await r.runDue();
    expect(runs).to.equal(1);
    const next = Number((await row(first.id)).next_run_at);
    expect(next).to.be.closeTo(clock.nowMs() + MINUTE, 2 * SECOND);

    // Re-declaring at boot keeps the pending run instead of firing again now.
    await r.every('sweep', MINUTE, null);
    expect(Number((await row(first.id)).next_run_at)).to.equal(next);
    await r.runDue();
    expect(runs).to.equal(1);

    clock.advance(MINUTE);
    await r.runDue();
    expect(runs).to.equal(2);
  });

  it('cancel() removes a pending job before it runs', async () => {
    let runs = 0;
    const r = runner();
    r.define('reminder', () => {
      runs++;
    });
    const job = await r.schedule('reminder', clock.nowMs() + MINUTE, null);
    await r.start();
    expect(await r.cancel({ id: job.id })).to.equal(1);
    clock.advance(MINUTE);
    await r.runDue();
    expect(runs).to.equal(0);
  });

  describe('KnexJobRepository', () => {
    function repo(): KnexJobRepository {
      return new KnexJobRepository({ db: fresh.db, clock });
    }

    const base = { priority: 0, type: 'normal' as const };

    it('saves, reads back and computes states and the overview', async () => {
      const rp = repo();
      const now = Date.now();
      const future = await rp.saveJob({ ...base, name: 'a', nextRunAt: new Date(now + HOUR), data: { k: 1 } }, undefined);
      const queued = await rp.saveJob({ ...base, name: 'a', nextRunAt: new Date(now - SECOND), data: { k: 2 } }, undefined);
      const paused = await rp.saveJob({ ...base, name: 'b', nextRunAt: new Date(now + HOUR), data: { k: 3 }, disabled: true }, undefined);

      const got = await rp.getJobById(String(future._id));
      expect(got?.data).to.deep.equal({ k: 1 });
      expect(got?.nextRunAt?.getTime()).to.equal(now + HOUR);

      const scheduled = await rp.queryJobs({ state: 'scheduled' });
      expect(scheduled.jobs.map((j) => String(j._id)).sort()).to.deep.equal([String(future._id), String(paused._id)].sort());
      expect((await rp.queryJobs({ state: 'queued' })).jobs.map((j) => String(j._id))).to.deep.equal([String(queued._id)]);
      expect((await rp.queryJobs({ state: 'paused' })).total).to.equal(1);
      expect((await rp.queryJobs({ includeDisabled: false })).total).to.equal(2);
      expect((await rp.queryJobs({ data: { k: 2 } })).jobs).to.have.length(1);
      expect((await rp.queryJobs({ search: 'A' })).total).to.equal(2);
      const page = await rp.queryJobs({ sort: { nextRunAt: 'asc' }, limit: 1, skip: 1 });
      expect(page.total).to.equal(3);
      expect(page.jobs).to.have.length(1);
      expect(await rp.getQueueSize()).to.equal(1);
      expect(await rp.getDistinctJobNames()).to.deep.equal(['a', 'b']);

      const overview = await rp.getJobsOverview();
      expect(overview.find((o) => o.name === 'a')).to.include({ total: 2, scheduled: 1, queued: 1 });
      expect(overview.find((o) => o.name === 'b')).to.include({ total: 1, scheduled: 1, paused: 1 });

      expect(await rp.disableJobs({ name: 'a', data: { k: 1 } })).to.equal(1);
      expect(await rp.enableJobs({ name: 'b' })).to.equal(1);
      expect(await rp.removeJobs({ data: { k: 2 } })).to.equal(1);
      expect(await rp.removeJobs({})).to.equal(0);
      expect(await rp.purgeAllJobs()).to.equal(2);
    });

    it('stores service time: advancing the clock makes a stored job due for agenda', async () => {
      const rp = repo();
      const saved = await rp.saveJob({ ...base, name: 'x', nextRunAt: new Date(Date.now() + HOUR), data: null }, undefined);
      const lockDeadline = new Date(Date.now() - 10 * MINUTE);
      expect(await rp.getNextJobToRun('x', new Date(), lockDeadline, undefined, undefined)).to.equal(undefined);
      clock.advance(HOUR);
      const locked = await rp.getNextJobToRun('x', new Date(), new Date(Date.now() - 10 * MINUTE), undefined, { lastModifiedBy: 'w1' });
      expect(String(locked?._id)).to.equal(String(saved._id));
      // Handed back in agenda's wall frame: about "now", not an hour ahead.
      expect(locked!.lockedAt!.getTime()).to.be.closeTo(Date.now(), 2 * SECOND);
      const stored = await row(String(saved._id));
      expect(Number(stored.locked_at)).to.be.closeTo(clock.nowMs(), 2 * SECOND);
      expect(stored.last_modified_by).to.equal('w1');
      // A second repository (another worker) cannot take it while the lock is fresh.
      const other = new KnexJobRepository({ db: fresh.db, clock });
      expect(await other.getNextJobToRun('x', new Date(), new Date(Date.now() - 10 * MINUTE), undefined, undefined)).to.equal(undefined);
      expect(await other.lockJob({ ...locked!, lockedAt: undefined }, undefined)).to.equal(undefined);
    });

    it('type single upserts by name; a concurrent burst still leaves one row', async () => {
      const rp = repo();
      const other = new KnexJobRepository({ db: await secondPool(), clock });
      const saves = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? rp : other).saveJob({ ...base, type: 'single', name: 's', nextRunAt: new Date(Date.now() + HOUR), repeatInterval: '5 minutes', data: { i } }, undefined),
        ),
      );
      expect(new Set(saves.map((s) => String(s._id))).size).to.equal(1);
      expect(await rows()).to.have.length(1);
      const got = await rp.getJobById(String(saves[0]._id));
      expect(got?.repeatInterval).to.equal('5 minutes');
    });

    it('debounce pushes a trailing job back and keeps one row', async () => {
      const rp = repo();
      const job = (data: unknown) => ({
        ...base,
        name: 'reindex',
        nextRunAt: new Date(),
        data,
        unique: { 'data.entity': 'products' },
        uniqueOpts: { debounce: { delay: 5 * SECOND } },
      });
      const first = await rp.saveJob(job({ entity: 'products', v: 1 }), undefined);
      expect(first.nextRunAt!.getTime()).to.be.closeTo(Date.now() + 5 * SECOND, SECOND);
      clock.advance(3 * SECOND);
      const second = await rp.saveJob(job({ entity: 'products', v: 2 }), undefined);
      expect(String(second._id)).to.equal(String(first._id));
      // Pushed to 5 s after the second save (service time), i.e. 8 s after the first.
      expect(Number((await row(String(first._id))).next_run_at)).to.be.closeTo(clock.nowMs() + 5 * SECOND, SECOND);
      expect(second.data).to.deep.equal({ entity: 'products', v: 2 });
      expect(await rows()).to.have.length(1);
    });

    it('leading debounce runs the first call and folds the rest into it', async () => {
      const rp = repo();
      const job = (v: number) => ({
        ...base,
        name: 'notify',
        nextRunAt: new Date(),
        data: { v },
        unique: { channel: '#alerts' },
        uniqueOpts: { debounce: { delay: MINUTE, strategy: 'leading' as const } },
      });
      const first = await rp.saveJob(job(1), undefined);
      const firstAt = Number((await row(String(first._id))).next_run_at);
      expect(firstAt).to.be.closeTo(clock.nowMs(), SECOND);
      clock.advance(10 * SECOND);
      await rp.saveJob(job(2), undefined);
      const after = await row(String(first._id));
      expect(Number(after.next_run_at)).to.equal(firstAt);
      expect(JSON.parse(after.data!)).to.deep.equal({ v: 2 });
      expect(await rows()).to.have.length(1);
    });

    it('lockJob takes a job only while it is free and unchanged', async () => {
      const rp = repo();
      const at = new Date(Date.now() - SECOND);
      const saved = await rp.saveJob({ ...base, name: 'l', nextRunAt: at, data: null }, undefined);
      const locked = await rp.lockJob(saved, undefined);
      expect(locked?.lockedAt).to.be.instanceOf(Date);
      expect(await new KnexJobRepository({ db: fresh.db, clock }).lockJob(saved, undefined)).to.equal(undefined);
      await rp.unlockJob(locked!);
      expect((await row(String(saved._id))).locked_at).to.equal(null);
      expect(rp.heldCount()).to.equal(0);
      // saveJobState on a removed job reports it, as agenda expects.
      await rp.removeJobs({ id: String(saved._id) });
      let error: unknown;
      try {
        await rp.saveJobState({ ...saved, lockedAt: undefined }, undefined);
      } catch (err) {
        error = err;
      }
      expect(String(error)).to.match(/cannot be updated/);
    });
  });
});
