import type { Knex } from 'knex';

/**
 * Audit retention (issue 10, item 6; docs/audit.md "Retention"). When an operator sets
 * GATEWAY_AUDIT_RETENTION_DAYS, the oldest entries of a chain are pruned, and only a
 * prefix: the chain head row then also records where the kept chain starts.
 *
 * - `pruned_seq`: the seq of the last pruned entry (0: nothing pruned);
 * - `pruned_hash`: that entry's hash, the first kept entry's expected `prev_hash` (the
 *   genesis hash, 64 zeros, while nothing is pruned);
 * - `pruned_at`: when entries were last pruned (service time ms), null if never.
 *
 * Verify starts from (pruned_seq, pruned_hash) instead of (0, genesis), so a prefix pruned
 * by retention verifies, and rows deleted any other way (at the start, in the middle, at
 * the end) still break the chain. Existing heads get "nothing pruned", which is what they are.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_chain_heads', (t) => {
    t.bigInteger('pruned_seq').notNullable().defaultTo(0);
    t.string('pruned_hash', 64).notNullable().defaultTo('0'.repeat(64));
    t.bigInteger('pruned_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_chain_heads', (t) => {
    t.dropColumn('pruned_seq');
    t.dropColumn('pruned_hash');
    t.dropColumn('pruned_at');
  });
}
