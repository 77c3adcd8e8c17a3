import type { Knex } from 'knex';

/**
 * Spending mandates on grants (issue 26, item 2; docs/policies-approvals.md, Spending
 * mandates). A grant approved with `limits` covers only requests within them:
 * - grants.limits: JSON of the decision's `limits` as given (policy-engine GrantLimits,
 *   currency lower-cased), or null for a grant without limits;
 * - grants.used_minor_units, grants.uses: what requests forwarded under the grant consumed,
 *   counted only on a grant with limits, by one conditional UPDATE per request
 *   (approvals/grants.store.ts consume), so two nodes cannot both spend the last of a total.
 *   A grant is created with the approved request's own use (its first use).
 * - approvals.facts: JSON of what the held request would do (policy-engine RequestFacts:
 *   amount, recipients, channel), read by the gateway before the request is held, so a
 *   decision's limits are checked against the request being approved. Null when nothing
 *   could be read (or for approvals from before this migration).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('grants', (t) => {
    t.text('limits').nullable();
    t.bigInteger('used_minor_units').notNullable().defaultTo(0);
    t.integer('uses').notNullable().defaultTo(0);
  });
  await knex.schema.alterTable('approvals', (t) => {
    t.text('facts').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.dropColumn('facts');
  });
  await knex.schema.alterTable('grants', (t) => {
    t.dropColumn('uses');
    t.dropColumn('used_minor_units');
    t.dropColumn('limits');
  });
}
