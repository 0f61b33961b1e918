import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, type MigrationInterface } from 'typeorm';
// By path, as global-setup imports the migrations: it runs outside jest's resolver
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';

/**
 * Where global-setup leaves the name of the migrated template database, for `createTestDatabase` in every
 * spec file (jest's workers inherit the environment of the process that ran global-setup).
 */
export const TEMPLATE_DATABASE_ENV = 'OUTBOX_TEST_TEMPLATE_DB';

type Migrations = ReadonlyArray<new () => MigrationInterface>;

/**
 * `OUTBOX_TEST_PARTITIONED=1`: the template (so every spec file's database copied from it) has the partitioned layout
 * (docs/partitioning.md), converted after the migrations as an operator would, with daily ranges from yesterday to
 * three days ahead: the whole suite runs against it. Anything else but unset or `0` is refused.
 */
export const PARTITIONED_ENV = 'OUTBOX_TEST_PARTITIONED';

/** Whether the run's template is partitioned (throws on a value it does not know). */
export function partitionedTemplate(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env[PARTITIONED_ENV]?.trim() ?? '';
  if (value === '' || value === '0') return false;
  if (value === '1') return true;
  throw new Error(
    `${PARTITIONED_ENV} must be 1 (the partitioned layout) or 0/unset (today's), got ${JSON.stringify(value)}`,
  );
}

/** The conversion's statements, each to run on its own (none may run in a transaction). */
export function partitionedLayoutStatements(start: Date): string[] {
  const day = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate()));
  return partitionedLayoutSql('public', { start: day.toISOString(), ahead: 3 })
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('--'));
}

/** The migrated template database of a test run. */
export interface TemplateDatabase {
  name: string;
  /** How long creating and migrating it took. */
  tookMs: number;
  /** Whether it has the partitioned layout (`OUTBOX_TEST_PARTITIONED=1`). */
  partitioned: boolean;
  drop(): Promise<void>;
}

/** `url` with its database replaced by `name`. */
export function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/** Runs `statements` one after another on a connection of their own to `url`, closed afterwards. */
export async function runSql(url: string, statements: readonly string[]): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Runs `migrations` (each in its own transaction, as apps do), then `extraSql`, on the database at `url`. */
export async function migrate(url: string, migrations: Migrations, extraSql: string[] = []): Promise<void> {
  const migrator = new DataSource({
    type: 'postgres',
    url,
    migrations: [...migrations],
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

/**
 * Creates a database, runs the migrations in it once, and makes it a template that accepts no connections:
 * `create database … template …` then copies it per spec file, its tables, functions, policies, grants
 * and TypeORM's migrations table included. A copy needs the template to have no session open, hence
 * `allow_connections false`. The roles the migrations create are cluster-wide, so they are there already.
 */
export async function createTemplateDatabase(
  serverUrl: string,
  migrations: Migrations,
): Promise<TemplateDatabase> {
  const began = Date.now();
  const name = `outbox_template_${randomBytes(6).toString('hex')}`;
  await runSql(serverUrl, [`create database ${name}`]);
  const drop = async (): Promise<void> => {
    await runSql(serverUrl, [
      `alter database ${name} with is_template false allow_connections true`,
      `drop database if exists ${name} with (force)`,
    ]);
  };
  const partitioned = partitionedTemplate();
  try {
    await migrate(withDatabase(serverUrl, name), migrations);
    if (partitioned)
      await runSql(
        withDatabase(serverUrl, name),
        partitionedLayoutStatements(new Date(Date.now() - 86_400_000)),
      );
    await runSql(serverUrl, [`alter database ${name} with is_template true allow_connections false`]);
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, tookMs: Date.now() - began, partitioned, drop };
}
