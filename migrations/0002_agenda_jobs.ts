import type { Knex } from 'knex';

/**
 * The agenda job table for jobs/agenda-knex-backend.ts.
 *
 * Every time is BIGINT milliseconds of *service* time (lib/clock.ts), so advancing the test
 * clock makes stored jobs due; the backend translates to agenda's wall time at the boundary.
 *
 * unique_key is a sha256 hex of the job name and its `unique()` object (or of the name for
 * `type: 'single'` jobs). The UNIQUE index on it is what makes those upserts atomic across
 * processes; ordinary jobs leave it NULL, and both engines allow any number of NULLs.
 *
 * Key lengths: name is VARCHAR(191) so an index on it stays within MySQL's utf8mb4 limits
 * (191 * 4 = 764 bytes, under the 767-byte limit of older row formats).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('agenda_jobs', (t) => {
    if (knex.client.config.client === 'mysql2') {
      // knex names the connection's charset on CREATE TABLE, which silently picks
      // utf8mb4_general_ci over the database's utf8mb4_bin: job names would then compare
      // case-insensitively on MySQL only.
      t.charset('utf8mb4');
      t.collate('utf8mb4_bin');
    }
    t.string('id', 36).primary();
    t.string('name', 191).notNullable();
    t.integer('priority').notNullable().defaultTo(0);
    t.bigInteger('next_run_at').nullable();
    t.string('type', 16).notNullable().defaultTo('normal');
    t.bigInteger('locked_at').nullable();
    t.bigInteger('last_run_at').nullable();
    t.bigInteger('last_finished_at').nullable();
    t.bigInteger('failed_at').nullable();
    t.integer('fail_count').nullable();
    t.text('fail_reason').nullable();
    t.string('repeat_interval', 255).nullable();
    t.string('repeat_timezone', 64).nullable();
    t.string('repeat_at', 255).nullable();
    t.bigInteger('start_date').nullable();
    t.bigInteger('end_date').nullable();
    // JSON array of weekday numbers, e.g. "[0,6]".
    t.string('skip_days', 64).nullable();
    t.boolean('disabled').notNullable().defaultTo(false);
    t.double('progress').nullable();
    // JSON text; mediumtext on MySQL because TEXT stops at 64 KiB (plain TEXT on SQLite).
    t.text('data', 'mediumtext').nullable();
    t.string('unique_key', 64).nullable();
    t.string('last_modified_by', 191).nullable();
    t.bigInteger('debounce_started_at').nullable();
    t.boolean('fork').notNullable().defaultTo(false);

    t.unique(['unique_key'], { indexName: 'agenda_jobs_unique_key_uq' });
    // "Next job to run": name = ? AND ((locked_at IS NULL AND next_run_at <= ?) OR locked_at <= ?)
    // is two ranges on this one index.
    t.index(['name', 'locked_at', 'next_run_at'], 'agenda_jobs_next_idx');
    // Queue size and the test clock's "anything due?" check across all names.
    t.index(['next_run_at'], 'agenda_jobs_next_run_at_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('agenda_jobs');
}
