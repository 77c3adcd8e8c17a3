import type { Knex } from 'knex';

/** Which team member decided an approval in the console (issue 15, item 2); null otherwise. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.string('decided_by', 40).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.dropColumn('decided_by');
  });
}
