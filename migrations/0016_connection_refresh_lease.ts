import type { Knex } from 'knex';

/**
 * One token refresh per connection at a time across all processes (issue 11, item 4), as a
 * lease on the row instead of a lock held over the provider's HTTP call: on SQLite a
 * transaction open for that long would stop every other write (the audit log's included).
 * A process takes the lease with a conditional UPDATE, refreshes, and writes the tokens and
 * clears the lease in one short transaction; the others wait for the lease to clear and
 * read what it wrote. A crashed holder's lease runs out.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('connections', (t) => {
    t.bigInteger('refresh_lease_until').nullable();
    t.string('refresh_lease_owner', 40).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('connections', (t) => {
    t.dropColumn('refresh_lease_until');
    t.dropColumn('refresh_lease_owner');
  });
}
