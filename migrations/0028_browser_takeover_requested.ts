import type { Knex } from 'knex';

/**
 * When the agent last asked for a person on this lease (control socket POST
 * /browser/takeover; issue 24, item 5): while that request is pending (10 minutes, and no
 * takeover since), another one answers 202 with it and sends no second webhook. NULL: never
 * asked.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('browser_leases', (t) => {
    t.bigInteger('takeover_requested_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('browser_leases', (t) => {
    t.dropColumn('takeover_requested_at');
  });
}
