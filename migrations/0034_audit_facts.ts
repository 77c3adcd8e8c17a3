import type { Knex } from 'knex';

/**
 * `facts`: what the policy read from the request (amount, recipients, channel; issue 26),
 * bounded and scrubbed by the writer (audit/entry.ts sanitizeFacts), as JSON text; null
 * when the request had none. A policy simulation replays draft rules on it
 * (docs/policies-approvals.md, "Simulation"). Hashed into the chain only when not null
 * (audit/chain.ts), so the entries written before this column keep their hashes.
 * MEDIUMTEXT on MySQL: the writer caps the text at 16,384 characters, which in utf8mb4
 * can pass TEXT's 65,535 bytes (SQLite has one TEXT).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.text('facts', 'mediumtext').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.dropColumn('facts');
  });
}
