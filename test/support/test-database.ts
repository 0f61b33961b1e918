import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { outboxMigrationsFor } from 'nestjs-pg-outbox';
import { migrate, runSql, TEMPLATE_DATABASE_ENV, withDatabase } from './template-database';

/** A database of its own for one spec file, migrated, dropped at the end. */
export interface TestDatabase {
  url: string;
  name: string;
  /** Runs SQL as the superuser (for set-up and for checking results, never to prove isolation). */
  sql<T = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** Options for {@link createTestDatabase}. */
export interface CreateTestDatabaseOptions {
  /**
   * Run the outbox migrations in the new database rather than copy global-setup's migrated template: for specs
   * that test the migrations themselves. Default false (a copy, as fast as an empty database).
   */
  runMigrations?: boolean;
  /** The outbox's schema (default `public`): another one is migrated in place, in that schema. */
  schema?: string;
}

/** The URL of the server the tests run against (embedded, or DATABASE_URL). */
export function adminUrl(): string {
  const url = process.env.OUTBOX_TEST_ADMIN_URL ?? process.env.DATABASE_URL;
  if (!url)
    throw new Error(
      'no test database: run the tests with jest (global-setup starts one) or set DATABASE_URL',
    );
  return url;
}

/**
 * Creates a fresh database with the outbox (a copy of the migrated template; migrated in place when asked to,
 * when the outbox goes in another `schema` than `public`, or when no global setup made a template), runs
 * `extraSql`, and returns a handle.
 */
export async function createTestDatabase(
  extraSql: string[] = [],
  { runMigrations = false, schema }: CreateTestDatabaseOptions = {},
): Promise<TestDatabase> {
  const template = process.env[TEMPLATE_DATABASE_ENV];
  if (runMigrations || !template || (schema !== undefined && schema !== 'public')) {
    const db = await createEmptyDatabase();
    await migrateOutbox(db, schema, extraSql);
    return db;
  }
  const db = await createDatabase(template);
  if (extraSql.length > 0) await runSql(db.url, extraSql);
  return db;
}

/**
 * Runs the outbox migrations in `schema` (default `public`) on `db`, then `extraSql`: another schema's
 * migrations go to the same TypeORM migrations table, under names of their own.
 */
export async function migrateOutbox(
  db: TestDatabase,
  schema?: string,
  extraSql: string[] = [],
): Promise<void> {
  await migrate(db.url, outboxMigrationsFor({ schema }), extraSql);
}

/** Creates a fresh database with nothing in it (for tests that build the schema their own way). */
export function createEmptyDatabase(): Promise<TestDatabase> {
  return createDatabase(null);
}

async function createDatabase(template: string | null): Promise<TestDatabase> {
  const name = `outbox_t_${randomBytes(6).toString('hex')}`;
  await runSql(adminUrl(), [`create database ${name}${template ? ` template ${template}` : ''}`]);
  const url = withDatabase(adminUrl(), name);
  const client = new Client({ connectionString: url });
  await client.connect();
  return {
    url,
    name,
    sql: async <T>(text: string, values?: unknown[]) => (await client.query(text, values)).rows as T[],
    drop: async () => {
      await client.end();
      await runSql(adminUrl(), [`drop database if exists ${name} with (force)`]);
    },
  };
}
