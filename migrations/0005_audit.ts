import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * The audit log: one row per proxied request, hash-chained per developer
 * (docs/audit.md), and the head of each developer's chain.
 *
 * - The primary key is (developer_id, seq), not id: on InnoDB the table is clustered by
 *   it, so appends land at the end of each developer's range instead of at random
 *   places (ids are random), and "newest first" and verify's walk read the clustered
 *   index in order. `id` is a unique secondary key (lookups, `after`).
 * - No foreign keys: an append-only log must never refuse an entry over a reference,
 *   and needs no parent-row lock per insert.
 * - The filter indexes end in seq, so every listing reads one index range newest first.
 * - Times are BIGINT ms; matched_rules is JSON text; hashes are 64 lowercase hex.
 */
const ID = 40;

export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'audit_log', (t) => {
    t.string('developer_id', ID).notNullable();
    t.bigInteger('seq').notNullable();
    t.string('id', ID).notNullable().unique();
    t.bigInteger('created_at').notNullable();
    t.string('environment_id', ID).nullable();
    t.string('method', 16).notNullable();
    t.string('host', 255).notNullable();
    t.text('path').notNullable();
    t.string('connector', 100).nullable();
    t.string('category', 32).nullable();
    t.string('credential', 10).notNullable();
    t.string('decision', 5).notNullable();
    t.string('reason', 255).nullable();
    t.text('matched_rules').notNullable();
    t.string('approval_id', ID).nullable();
    t.string('grant_id', ID).nullable();
    t.integer('status').notNullable();
    t.integer('upstream_status').nullable();
    t.bigInteger('bytes_in').notNullable();
    t.bigInteger('bytes_out').notNullable();
    t.bigInteger('duration_ms').notNullable();
    t.string('prev_hash', 64).notNullable();
    t.string('hash', 64).notNullable();
    t.primary(['developer_id', 'seq']);
    t.index(['developer_id', 'environment_id', 'seq']);
    t.index(['developer_id', 'decision', 'seq']);
    t.index(['developer_id', 'connector', 'seq']);
  });

  // One row per developer with an audit log: the last seq and hash. Appends lock it (the
  // per-developer serialisation point) and move it in the same transaction, so verify can
  // tell rows removed from the end of the chain from a chain that simply ends there.
  await createTable(knex, 'audit_chain_heads', (t) => {
    t.string('developer_id', ID).primary();
    t.bigInteger('seq').notNullable();
    t.string('hash', 64).notNullable();
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('audit_chain_heads');
  await knex.schema.dropTableIfExists('audit_log');
}
