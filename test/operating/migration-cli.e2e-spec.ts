import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { demoMigrations } from '../../migrations';
import { createEmptyDatabase, type TestDatabase } from '../support/test-database';

const ROOT = join(__dirname, '..', '..');

interface Run {
  code: number;
  output: string;
}

/** `npm run <script>` at the repository's root with DATABASE_URL set to `url` (left out when null). */
function npmRun(script: string, url: string | null): Promise<Run> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  if (url !== null) env.DATABASE_URL = url;
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', script], { cwd: ROOT, env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` });
    });
  });
}

/** The names TypeORM records, in the order it runs them: by the timestamp that ends each class's name. */
const NAMES = demoMigrations
  .map((migration) => migration.name)
  .sort((a, b) => Number(/\d+$/.exec(a)?.[0]) - Number(/\d+$/.exec(b)?.[0]));

/**
 * `npm run migration:show|run|revert`: TypeORM's CLI with migrations/data-source.ts, the outbox's migrations and
 * the demo's, against a database of its own that nothing else migrated.
 */
describe('migrations with TypeORM CLI (npm run migration:*)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createEmptyDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  async function recorded(): Promise<Array<{ id: number; name: string }>> {
    return db.sql(`select id, name from public.migrations order by id`);
  }

  async function tablesThere(): Promise<Record<string, boolean>> {
    const names = ['event_outbox', 'outbox_deliveries', 'outbox_consumers', 'contacts', 'contact_activities'];
    const [row] = await db.sql<Record<string, boolean>>(
      `select ${names.map((name) => `to_regclass('public.${name}') is not null as ${name}`).join(', ')}`,
    );
    return row;
  }

  it('migration:show lists every migration, the outbox’s and the demo’s, as pending, and applies none', async () => {
    const show = await npmRun('migration:show', db.url);
    expect(show).toMatchObject({ code: 0 });
    expect(NAMES).toContain('DemoContacts1764428500000');
    expect(NAMES).toContain('OutboxCore1764428400000');
    for (const name of NAMES) expect(show.output).toContain(`[ ] ${name}`);
    expect(show.output).not.toContain('[X]');
    expect(Object.values(await tablesThere())).toEqual([false, false, false, false, false]);
  });

  it('migration:run applies them all: the tables are there and TypeORM’s migrations table lists each one', async () => {
    const run = await npmRun('migration:run', db.url);
    expect(run).toMatchObject({ code: 0 });
    expect(await tablesThere()).toEqual({
      event_outbox: true,
      outbox_deliveries: true,
      outbox_consumers: true,
      contacts: true,
      contact_activities: true,
    });
    expect((await recorded()).map((row) => row.name)).toEqual(NAMES);
  });

  it('then migration:show shows none pending, and running again is a no-op', async () => {
    const before = await recorded();
    const show = await npmRun('migration:show', db.url);
    expect(show).toMatchObject({ code: 0 });
    expect(show.output).not.toContain('[ ]');
    for (const { id, name } of before) expect(show.output).toContain(`[X] ${id} ${name}`);

    const again = await npmRun('migration:run', db.url);
    expect(again).toMatchObject({ code: 0 });
    expect(again.output).toContain('No migrations are pending');
    expect(again.output).not.toMatch(/has been executed successfully/);
    expect(await recorded()).toEqual(before);
  });

  it('migration:revert undoes the last one applied, and migration:run applies it again', async () => {
    const last = NAMES[NAMES.length - 1];
    const revert = await npmRun('migration:revert', db.url);
    expect(revert).toMatchObject({ code: 0 });
    expect((await recorded()).map((row) => row.name)).toEqual(NAMES.slice(0, -1));
    expect((await npmRun('migration:show', db.url)).output).toContain(`[ ] ${last}`);

    expect(await npmRun('migration:run', db.url)).toMatchObject({ code: 0 });
    expect((await recorded()).map((row) => row.name)).toEqual(NAMES);
  });

  it('refuses to run without DATABASE_URL, naming it', async () => {
    const run = await npmRun('migration:run', null);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('DATABASE_URL is not set');
  });
});
