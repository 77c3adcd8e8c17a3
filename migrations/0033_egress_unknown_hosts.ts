import type { Knex } from 'knex';

/**
 * What the gateway does with a host off an environment's egress allowlist (issue 26, item 3;
 * docs/secrets-egress.md, "Unknown hosts"): `deny` (403 `egress_denied`, the behaviour
 * before this column) or `ask` (the request is held as an approval, connector
 * `egress:<host>`, category `connect`). Per environment; every existing row keeps `deny`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.string('egress_unknown_hosts', 8).notNullable().defaultTo('deny');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.dropColumn('egress_unknown_hosts');
  });
}
