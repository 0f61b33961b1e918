import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  outboxMigrations,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { buildApp } from './support/build-app';
import { catalogSnapshot } from './support/catalog';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from './support/test-database';

const SQL_DIR = join(__dirname, '..', 'libs', 'outbox', 'sql');
const FIXTURE_0_1_0 = join(__dirname, 'fixtures', 'outbox-0.1.0');

function sqlFiles(direction: 'up' | 'down'): string[] {
  const names = readdirSync(SQL_DIR)
    .filter((name) => name.endsWith(`.${direction}.sql`))
    .sort();
  return (direction === 'up' ? names : names.reverse()).map((name) =>
    readFileSync(join(SQL_DIR, name), 'utf8'),
  );
}

async function withMigrator<T>(db: TestDatabase, work: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const dataSource = new DataSource({ type: 'postgres', url: db.url, migrations: outboxMigrations });
  await dataSource.initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

@Injectable()
class FixtureConsumer {
  readonly seen: string[] = [];

  @OnOutboxEvent('fixture.thing.happened.v1', { consumer: 'fixture-consumer', ordered: true })
  async record(event: OutboxEvent<{ n: number }>, context: OutboxHandlerContext): Promise<void> {
    this.seen.push(`${event.aggregateId}#${event.data.n}`);
    await context.manager.query('insert into fixture_effects (event_id) values ($1)', [event.eventId]);
  }
}

describe('migrations', () => {
  const databases: TestDatabase[] = [];
  const track = (db: TestDatabase): TestDatabase => (databases.push(db), db);
  afterAll(async () => {
    for (const db of databases) await db.drop();
  });

  it('build the same schema from the shipped SQL files as from the TypeORM classes', async () => {
    const byClasses = track(await createTestDatabase());
    const bySql = track(await createEmptyDatabase());
    for (const file of sqlFiles('up')) await bySql.sql(file);

    const expected = await catalogSnapshot(byClasses);
    expect(expected.tables.length).toBeGreaterThan(5);
    expect(expected.policies.length).toBeGreaterThan(3);
    expect(expected.functions.length).toBeGreaterThan(1);
    expect(await catalogSnapshot(bySql)).toEqual(expected);
  });

  it('take the schema away again, both the down SQL files and the classes', async () => {
    const empty = await catalogSnapshot(track(await createEmptyDatabase()));
    const bySql = track(await createTestDatabase());
    for (const file of sqlFiles('down')) await bySql.sql(file);
    expect(await catalogSnapshot(bySql)).toEqual(empty);

    const byClasses = track(await createTestDatabase());
    await withMigrator(byClasses, async (dataSource) => {
      for (let i = 0; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
    });
    expect(await catalogSnapshot(byClasses)).toEqual(empty);
  });

  it('upgrade a 0.1.0 database with rows in it, and the relay then delivers its pending events once', async () => {
    const fresh = await catalogSnapshot(track(await createTestDatabase()));
    const old = track(await createEmptyDatabase());
    for (const file of ['schema.sql', 'typeorm-migrations.sql', 'rows.sql']) {
      await old.sql(readFileSync(join(FIXTURE_0_1_0, file), 'utf8'));
    }
    await withMigrator(old, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    expect(await catalogSnapshot(old)).toEqual(fresh);
    await old.sql('create table fixture_effects (event_id uuid primary key)');

    const app = await buildApp({ url: old.url, providers: [FixtureConsumer] });
    try {
      await app.relay.drain();
      expect(app.app.get(FixtureConsumer).seen).toEqual(['t-1#1', 't-1#2']);
      const effects = await old.sql<{ n: number }>('select count(*)::int as n from fixture_effects');
      expect(effects[0].n).toBe(2);
      const delivered = await old.sql<{ status: string; n: number }>(
        `select status, count(*)::int as n from outbox_deliveries group by status`,
      );
      expect(delivered).toEqual([{ status: 'delivered', n: 3 }]);
    } finally {
      await app.close();
    }
  });
});
