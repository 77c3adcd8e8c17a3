import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Policies, approval requests and grants (service.md "Policy rule", "Approval request",
 * "Grant"; decisions.md "Policies", "Approvals and grants"). Times are BIGINT ms of service
 * time (lib/clock.ts); rules are JSON TEXT.
 *
 * - policies: one row per developer default (`scope` = '*') and per environment policy
 *   (`scope` = the environment id). No row means "fall back" (environment → developer →
 *   built-in default). The primary key makes a concurrent first PUT an upsert race the
 *   database decides.
 * - approvals: a decision is one conditional UPDATE (`WHERE status = 'pending' AND
 *   expires_at > now`), so two concurrent decisions cannot both win. approvals_due_idx
 *   serves the expiry sweep (status, expires_at).
 * - grants: soft-deleted (`revoked_at`), so DELETE /v1/grants/{id} stays 204 after a
 *   revocation and is 404 only for ids never issued to the developer.
 */
const ID = 40;

/** utf8mb4_bin on MySQL, as in 0001: knex would otherwise pick a case-insensitive collation. */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'policies', (t) => {
    t.string('developer_id', ID).notNullable().references('developers.id');
    // '*' for the developer default, else the environment id.
    t.string('scope', ID).notNullable();
    // 100 rules of at most ~200 bytes each fit TEXT, mediumtext leaves room.
    t.text('rules', 'mediumtext').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['developer_id', 'scope']);
  });

  await createTable(knex, 'approvals', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('environment_id', ID).notNullable();
    t.string('connector', 100).notNullable();
    t.string('category', 32).notNullable();
    t.string('method', 32).notNullable();
    t.string('host', 255).notNullable();
    t.text('path').notNullable();
    t.text('summary').notNullable();
    t.string('task_id', 255).nullable();
    t.string('session_id', 255).nullable();
    t.string('max_scope', 20).notNullable();
    t.string('status', 20).notNullable();
    t.string('scope', 20).nullable();
    t.string('decided_via', 20).nullable();
    t.bigInteger('decided_at').nullable();
    t.string('grant_id', ID).nullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['developer_id', 'created_at', 'id'], 'approvals_developer_idx');
    t.index(['developer_id', 'environment_id', 'created_at'], 'approvals_environment_idx');
    t.index(['status', 'expires_at'], 'approvals_due_idx');
  });

  await createTable(knex, 'grants', (t) => {
    t.string('id', ID).primary();
    t.string('developer_id', ID).notNullable().references('developers.id');
    t.string('environment_id', ID).notNullable();
    t.string('connector', 100).notNullable();
    t.string('category', 32).notNullable();
    t.string('scope', 20).notNullable();
    t.string('task_id', 255).nullable();
    t.string('session_id', 255).nullable();
    t.bigInteger('expires_at').nullable();
    t.string('approval_id', ID).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['developer_id', 'environment_id', 'revoked_at'], 'grants_environment_idx');
    t.index(['developer_id', 'created_at', 'id'], 'grants_developer_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['grants', 'approvals', 'policies']) {
    await knex.schema.dropTableIfExists(t);
  }
}
