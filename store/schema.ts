import type { Knex } from 'knex';

/**
 * Creates a table the way every migration here does. On MySQL, tables are utf8mb4_bin:
 * knex names only the connection's charset on CREATE TABLE, so MariaDB would pick a
 * case-insensitive collation and "Key" and "key" would be one Idempotency-Key.
 *
 * Migrations import this rather than copying it; it must keep producing the same schema
 * for migrations that already ran, so change it only by adding options.
 */
export function createTable(knex: Knex, name: string, build: (t: Knex.CreateTableBuilder) => void): Knex.SchemaBuilder {
  return knex.schema.createTable(name, (t) => {
    if (knex.client.config.client === 'mysql2') {
      t.charset('utf8mb4');
      t.collate('utf8mb4_bin');
    }
    build(t);
  });
}
