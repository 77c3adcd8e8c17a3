import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Which process holds a request (issue 25, item 6; docs/deploy.md): every process that runs
 * a gateway proxy is a node, registered here for its life with the address of its RPC
 * (hosts/rpc.ts); an approval records the node whose proxy holds the agent's request, so a
 * decision made on another node tells that one at once instead of waiting for its poll.
 *
 * `nodes.id` is per process (`node_<24 hex>`, new at every start: held requests do not
 * survive a restart). `approvals.held_by` is NULL for rows written before this migration
 * and by processes without a node: their waiters learn of decisions by the store poll.
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'nodes', (t) => {
    t.string('id', 40).primary();
    t.string('rpc_url', 300).notNullable();
    t.bigInteger('started_at').notNullable();
    t.bigInteger('seen_at').notNullable();
    t.index(['seen_at']);
  });
  await knex.schema.alterTable('approvals', (t) => {
    t.string('held_by', 40).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('approvals', (t) => {
    t.dropColumn('held_by');
  });
  await knex.schema.dropTable('nodes');
}
