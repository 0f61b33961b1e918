import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { outboxMigrationsFor } from 'nestjs-pg-outbox';

/** A database of its own for one spec file, migrated, dropped at the end. */
export interface TestDatabase {
  url: string;
  name: string;
  /** Runs SQL as the superuser (for set-up and for checking results, never to prove isolation). */
  sql<T = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
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

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/**
 * Creates a fresh database, runs the outbox migrations (in `schema`, default `public`) and `extraSql`, and
 * returns a handle.
 */
export async function createTestDatabase(
  extraSql: string[] = [],
  { schema }: { schema?: string } = {},
): Promise<TestDatabase> {
  const db = await createEmptyDatabase();
  await migrateOutbox(db, schema, extraSql);
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
  const migrator = new DataSource({
    type: 'postgres',
    url: db.url,
    migrations: outboxMigrationsFor({ schema }),
    migrationsRun: false,
  });
  await migrator.initialize();
  try {
    await migrator.runMigrations({ transaction: 'each' });
    for (const statement of extraSql) await migrator.query(statement);
  } finally {
    await migrator.destroy();
  }
}

/** Creates a fresh database with nothing in it (for tests that build the schema their own way). */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  const name = `outbox_t_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl(), name);
  const client = new Client({ connectionString: url });
  await client.connect();
  return {
    url,
    name,
    sql: async <T>(text: string, values?: unknown[]) => (await client.query(text, values)).rows as T[],
    drop: async () => {
      await client.end();
      const dropper = new Client({ connectionString: adminUrl() });
      await dropper.connect();
      try {
        await dropper.query(`drop database if exists ${name} with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
