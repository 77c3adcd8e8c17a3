import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Developers, API keys, templates and the environment records with everything that hangs
 * off them without a VM: idempotency keys, configuration, secrets, events, wakeups,
 * schedules. Times are BIGINT milliseconds since the epoch (service clock) on both
 * engines; JSON is TEXT. Ids are `<prefix>_<24 hex>` (27 characters).
 */
const ID = 40;

export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'developers', (t) => {
    t.string('id', ID).primary();
    t.string('name', 200).notNullable();
    t.string('default_agent_version', 200).nullable();
    t.text('egress_allow').nullable();
    t.bigInteger('created_at').notNullable();
  });

  await createTable(knex, 'api_keys', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('key_hash', 64).notNullable().unique();
    t.string('last4', 4).notNullable();
    t.string('label', 200).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['developer_id', 'created_at']);
  });

  await createTable(knex, 'templates', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('name', 100).notNullable();
    t.string('version', 100).notNullable();
    t.string('status', 20).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['developer_id', 'name', 'version']);
  });

  await createTable(knex, 'environments', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('end_user_id', 200).notNullable();
    // SHA-256 hex of end_user_id while the environment is not destroyed, NULL after. The
    // unique index below is what makes "one non-destroyed environment per end user" hold
    // under concurrent creates on both engines (NULLs never collide). A hash, not the id
    // itself: MariaDB's PAD SPACE collations would make "bob" and "bob " one end user.
    t.string('live_end_user_id', 64).nullable();
    t.string('agent_version', 200).nullable();
    t.string('desired_state', 20).notNullable();
    t.string('state', 20).notNullable();
    t.string('template', 201).nullable();
    t.string('host_id', 100).nullable();
    t.text('failure_reason').nullable();
    t.boolean('limit_exceeded').notNullable().defaultTo(false);
    t.integer('cpus').notNullable();
    t.integer('memory_mib').notNullable();
    t.integer('base_memory_mib').notNullable();
    t.integer('disk_gib').notNullable();
    t.integer('suspend_after_secs').notNullable();
    t.integer('stop_after_secs').notNullable();
    t.bigInteger('keep_awake_until').nullable();
    t.bigInteger('last_active_at').notNullable();
    t.text('egress_allow').nullable();
    t.text('agent_settings').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('destroyed_at').nullable();
    t.unique(['developer_id', 'live_end_user_id']);
    t.index(['developer_id', 'created_at', 'id']);
    t.index(['developer_id', 'end_user_id']);
  });

  await createTable(knex, 'idempotency_keys', (t) => {
    t.string('developer_id', ID).notNullable();
    t.string('idem_key', 255).notNullable();
    t.string('environment_id', ID).notNullable();
    t.string('end_user_id', 200).notNullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['developer_id', 'idem_key']);
    t.index(['environment_id']);
  });

  await createTable(knex, 'environment_configs', (t) => {
    t.string('environment_id', ID).primary().references('environments.id');
    t.text('env', 'mediumtext').notNullable();
    t.text('files', 'longtext').notNullable();
    t.bigInteger('updated_at').notNullable();
  });

  await createTable(knex, 'secrets', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('environment_id', ID).nullable();
    // The environment id, or '*' for a developer-level secret: NULL would let two
    // developer-level secrets of one name past the unique index.
    t.string('scope', ID).notNullable();
    t.string('name', 64).notNullable();
    t.text('value_enc').notNullable();
    t.string('placeholder', 64).notNullable().unique();
    t.text('allowed_hosts').notNullable();
    t.boolean('infrastructure').notNullable().defaultTo(false);
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['developer_id', 'scope', 'name']);
  });

  await createTable(knex, 'environment_events', (t) => {
    t.bigIncrements('id').primary();
    t.string('environment_id', ID).notNullable();
    t.string('developer_id', ID).notNullable();
    t.string('kind', 50).notNullable();
    t.string('source', 10).notNullable();
    t.text('data').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['environment_id', 'id']);
  });

  await createTable(knex, 'wakeups', (t) => {
    t.string('id', ID).primary();
    t.string('environment_id', ID).notNullable();
    t.string('developer_id', ID).notNullable();
    t.bigInteger('at').notNullable();
    t.string('reason', 500).nullable();
    t.string('status', 20).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('fired_at').nullable();
    t.bigInteger('cancelled_at').nullable();
    t.index(['environment_id', 'status', 'at']);
    t.index(['status', 'at']);
  });

  await createTable(knex, 'schedules', (t) => {
    t.string('id', ID).primary();
    t.string('environment_id', ID).notNullable();
    t.string('developer_id', ID).notNullable();
    t.string('schedule_key', 200).notNullable();
    t.string('cron', 200).nullable();
    t.string('tz', 100).nullable();
    t.bigInteger('at').nullable();
    t.string('source', 10).notNullable();
    t.bigInteger('next_run_at').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['environment_id', 'schedule_key']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['schedules', 'wakeups', 'environment_events', 'secrets', 'environment_configs', 'idempotency_keys', 'environments', 'templates', 'api_keys', 'developers']) {
    await knex.schema.dropTableIfExists(t);
  }
}
