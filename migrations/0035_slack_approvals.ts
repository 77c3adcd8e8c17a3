import type { Knex } from 'knex';
import { createTable } from '../store/schema.js';

/**
 * Slack approval cards (issue 27; docs/slack-approvals.md).
 *
 * - `slack_channels`: one Slack approval channel per developer, the bot token and the
 *   signing secret sealed with the keyring (lib/crypto.ts), never stored in the clear.
 * - `slack_cards`: one card per approval, and its outbox at once. A card is never "an
 *   operation to replay" but "the state Slack should show": `version` goes up in the same
 *   transaction as every change of the approval (requested, decided, expired), and the
 *   delivery worker brings Slack up to it (chat.postMessage while there is no `ts`,
 *   chat.update after), rendering the approval's row as it is at send time. Changes
 *   coalesce, a late post shows the decided card, and an update can never overtake its
 *   post (both are the same row, leased by one worker at a time: `locked_until`,
 *   `lock_token`). `status`: `pending` (Slack is behind: due at next_attempt_at), `done`,
 *   `failed` (retries ran out), `cancelled` (the channel was removed).
 * - `slack_deliveries`: one row per call to Slack (the delivery log).
 * - `slack_used_signatures`: the replay cache of interactivity requests (a signature
 *   decides once), pruned past the 5-minute tolerance.
 * - `team_members.slack_user_id`: who a button press is, per developer (unique).
 */
export async function up(knex: Knex): Promise<void> {
  await createTable(knex, 'slack_channels', (t) => {
    t.string('developer_id', 40).primary();
    t.text('bot_token_enc').notNullable();
    t.text('signing_secret_enc').notNullable();
    t.string('channel_id', 64).notNullable();
    t.string('api_base_url', 2048).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  await createTable(knex, 'slack_cards', (t) => {
    t.string('approval_id', 40).primary();
    t.string('developer_id', 40).notNullable();
    t.string('channel_id', 64).notNullable();
    /** Slack's message timestamp once posted (the message's id for chat.update). */
    t.string('ts', 64).nullable();
    /** The approval status the message in Slack shows now. */
    t.string('rendered_state', 20).nullable();
    t.integer('version').notNullable();
    t.integer('sent_version').notNullable();
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable();
    /** When the current version was asked for: the retry window counts from it. */
    t.bigInteger('changed_at').notNullable();
    t.bigInteger('next_attempt_at').nullable();
    t.bigInteger('locked_until').nullable();
    t.string('lock_token', 40).nullable();
    t.string('last_error', 200).nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['status', 'next_attempt_at'], 'slack_cards_due_idx');
    t.index(['developer_id', 'status'], 'slack_cards_developer_idx');
  });
  await createTable(knex, 'slack_deliveries', (t) => {
    t.string('id', 40).primary();
    t.string('approval_id', 40).notNullable();
    t.string('developer_id', 40).notNullable();
    t.string('method', 40).notNullable();
    t.bigInteger('attempted_at').notNullable();
    t.boolean('ok').notNullable();
    t.integer('status_code').nullable();
    t.string('error', 200).nullable();
    t.integer('duration_ms').notNullable();
    t.index(['approval_id', 'attempted_at'], 'slack_deliveries_approval_idx');
    t.index(['attempted_at'], 'slack_deliveries_time_idx');
  });
  await createTable(knex, 'slack_used_signatures', (t) => {
    t.string('digest', 64).primary();
    t.bigInteger('t_secs').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['t_secs']);
  });
  await knex.schema.alterTable('team_members', (t) => {
    t.string('slack_user_id', 64).nullable();
    t.unique(['developer_id', 'slack_user_id'], { indexName: 'team_members_slack_user_uq' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('team_members', (t) => {
    t.dropUnique(['developer_id', 'slack_user_id'], 'team_members_slack_user_uq');
    t.dropColumn('slack_user_id');
  });
  await knex.schema.dropTableIfExists('slack_used_signatures');
  await knex.schema.dropTableIfExists('slack_deliveries');
  await knex.schema.dropTableIfExists('slack_cards');
  await knex.schema.dropTableIfExists('slack_channels');
}
