import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * The replay cache of signed decision callbacks (issue 9, hole 6): one row per signature
 * that was used, for as long as its timestamp is within the tolerance window. `digest` is
 * sha256 of the developer, `t` and the body's hash (approvals/used-signatures.store.ts),
 * never the signature itself; its primary key is what makes "used once" hold across API
 * processes. `t_secs` serves the pruning sweep.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'used_signatures', (t) => {
    t.string('digest', 64).primary();
    t.bigInteger('t_secs').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['t_secs']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('used_signatures');
}
