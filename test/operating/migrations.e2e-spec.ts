import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  outboxMigrations,
  outboxMigrationsFor,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { buildApp } from '../support/build-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { catalogSnapshot } from '../support/catalog';
import { partitionedLayoutStatements, partitionedTemplate, runSql } from '../support/template-database';
import {
  createEmptyDatabase,
  createTestDatabase,
  migrateOutbox,
  type TestDatabase,
} from '../support/test-database';

const SQL_DIR = join(__dirname, '..', '..', 'libs', 'outbox', 'sql');
const FIXTURE_0_1_0 = join(__dirname, '..', 'fixtures', 'outbox-0.1.0');

function sqlFiles(direction: 'up' | 'down'): string[] {
  const names = readdirSync(SQL_DIR)
    .filter((name) => name.endsWith(`.${direction}.sql`))
    .sort();
  return (direction === 'up' ? names : names.reverse()).map((name) =>
    readFileSync(join(SQL_DIR, name), 'utf8'),
  );
}

/** A schema of its own for the outbox; its name appears nowhere else in the catalog. */
const SCHEMA = 'billing_outbox';

/** What `npx nestjs-pg-outbox sql` prints with `args`, run from the source like the packaged command. */
function cliSql(...args: string[]): string {
  const cli = join(__dirname, '..', '..', 'libs', 'outbox', 'src', 'cli', 'outbox-cli.ts');
  const run = spawnSync(process.execPath, [...TYPESCRIPT_NODE_ARGS, cli, 'sql', ...args], {
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`nestjs-pg-outbox sql ${args.join(' ')} failed: ${run.stderr}`);
  return run.stdout;
}

/**
 * A snapshot of `schema` read as if it were `public`: every spelling of the schema's name the catalog prints
 * (qualified names, quoted ones in function bodies, search paths) put back to `public`, and a foreign key's
 * table unqualified, as PostgreSQL prints it for a schema on the search path. The schema's own grants are left
 * out: `public` comes with PostgreSQL's, a new schema has its owner's only.
 */
async function asIfPublic(db: TestDatabase, schema: string): Promise<Record<string, string[]>> {
  const { schemaAcl: _, ...snapshot } = await catalogSnapshot(db, schema);
  const spellings = new RegExp(`"${schema}"|\\b${schema}\\b`, 'g');
  return Object.fromEntries(
    Object.entries(snapshot).map(([kind, lines]) => [
      kind,
      lines
        // a constraint's table and a trigger's function are qualified only off the search_path (public is on it)
        .map((line) =>
          line
            .replace(`REFERENCES ${schema}.`, 'REFERENCES ')
            .replace(`EXECUTE FUNCTION ${schema}.`, 'EXECUTE FUNCTION ')
            .replace(spellings, 'public'),
        )
        .sort(),
    ]),
  );
}

async function withMigrator<T>(
  db: TestDatabase,
  work: (dataSource: DataSource) => Promise<T>,
  schema?: string,
): Promise<T> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: db.url,
    migrations: outboxMigrationsFor({ schema }),
  });
  await dataSource.initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/** Runs the outbox migrations that come before `outboxMigrations[index]` on `db`. */
async function migrateBefore(db: TestDatabase, index: number): Promise<void> {
  const earlier = new DataSource({
    type: 'postgres',
    url: db.url,
    migrations: outboxMigrations.slice(0, index),
  });
  await earlier.initialize();
  try {
    await earlier.runMigrations();
  } finally {
    await earlier.destroy();
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

/** This spec tests the migrations: its databases run them, rather than copy the run's migrated template. */
const MIGRATED = { runMigrations: true };

describe('migrations', () => {
  const databases: TestDatabase[] = [];
  const track = (db: TestDatabase): TestDatabase => (databases.push(db), db);
  afterAll(async () => {
    for (const db of databases) await db.drop();
  });

  it('build the same schema from the shipped SQL files as from the TypeORM classes', async () => {
    const byClasses = track(await createTestDatabase([], MIGRATED));
    const bySql = track(await createEmptyDatabase());
    for (const file of sqlFiles('up')) await bySql.sql(file);

    const expected = await catalogSnapshot(byClasses);
    expect(expected.tables.length).toBeGreaterThan(5);
    expect(expected.policies.length).toBeGreaterThan(3);
    expect(expected.functions.length).toBeGreaterThan(1);
    expect(await catalogSnapshot(bySql)).toEqual(expected);
  });

  it('build the schema that each spec file gets as a copy of the run’s template database', async () => {
    const migratedDb = track(await createTestDatabase([], MIGRATED));
    // OUTBOX_TEST_PARTITIONED=1: the template was converted after its migrations, as global-setup does
    if (partitionedTemplate())
      await runSql(migratedDb.url, partitionedLayoutStatements(new Date(Date.now() - 86_400_000)));
    const migrated = await catalogSnapshot(migratedDb);
    expect(process.env.OUTBOX_TEST_TEMPLATE_DB).toMatch(/^outbox_template_/); // else it would migrate too
    const copied = track(await createTestDatabase());
    expect(await catalogSnapshot(copied)).toEqual(migrated);
  });

  it('take the schema away again, both the down SQL files and the classes', async () => {
    const empty = await catalogSnapshot(track(await createEmptyDatabase()));
    const bySql = track(await createTestDatabase([], MIGRATED));
    for (const file of sqlFiles('down')) await bySql.sql(file);
    expect(await catalogSnapshot(bySql)).toEqual(empty);

    const byClasses = track(await createTestDatabase([], MIGRATED));
    await withMigrator(byClasses, async (dataSource) => {
      for (let i = 0; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
    });
    expect(await catalogSnapshot(byClasses)).toEqual(empty);
  });

  it('build in a schema of its own from `sql --schema` what outboxMigrationsFor({ schema }) builds, and what public would hold', async () => {
    const byClasses = track(await createTestDatabase([], { schema: SCHEMA }));
    const bySql = track(await createEmptyDatabase());
    await bySql.sql(cliSql('--schema', SCHEMA));

    const expected = await catalogSnapshot(byClasses, SCHEMA);
    expect(expected.tables.length).toBeGreaterThan(5);
    expect(expected.functions.length).toBeGreaterThan(1);
    expect(expected.schemaAcl.join()).toMatch(/outbox_app=U\//);
    expect(expected.schemaAcl.join()).toMatch(/outbox_relay=U\//);
    expect(await catalogSnapshot(bySql, SCHEMA)).toEqual(expected);
    // nothing in the schema names public: no table, function body, search path or grant was left behind
    expect(JSON.stringify(expected)).not.toMatch(/\bpublic\b/);

    // migrated, not the template's copy (partitioned with OUTBOX_TEST_PARTITIONED=1)
    const inPublic = track(await createTestDatabase([], MIGRATED));
    const { schemaAcl: _, ...publicSnapshot } = await catalogSnapshot(inPublic);
    expect(await asIfPublic(byClasses, SCHEMA)).toEqual(publicSnapshot);
    // and nothing of the outbox in public
    const empty = await catalogSnapshot(track(await createEmptyDatabase()));
    expect(await catalogSnapshot(byClasses)).toEqual(empty);
  });

  it("migrate a second schema into a database through the same TypeORM migrations table, and take it away again without touching the first's", async () => {
    const db = track(await createTestDatabase());
    const publicBefore = await catalogSnapshot(db);
    await migrateOutbox(db, SCHEMA);
    const ran = await db.sql<{ name: string }>('select name from migrations order by id');
    expect(ran.map((r) => r.name)).toEqual([
      ...outboxMigrations.map((M) => new M().name),
      ...outboxMigrations.map((M) => new M().name!.replace(/(\d{13})$/, `_${SCHEMA}_$1`)),
    ]);

    await withMigrator(
      db,
      async (dataSource) => {
        for (let i = 0; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
      },
      SCHEMA,
    );
    const emptySchema = track(await createEmptyDatabase());
    await emptySchema.sql(`create schema ${SCHEMA}`);
    expect(await catalogSnapshot(db, SCHEMA)).toEqual(await catalogSnapshot(emptySchema, SCHEMA));
    // the roles are cluster-wide, the grants per schema: public keeps every grant, policy and function
    expect(await catalogSnapshot(db)).toEqual(publicBefore);

    const bySql = track(await createTestDatabase());
    await bySql.sql(cliSql('--schema', SCHEMA));
    await bySql.sql(cliSql('--schema', SCHEMA, '--down'));
    expect(await catalogSnapshot(bySql, SCHEMA)).toEqual(await catalogSnapshot(emptySchema, SCHEMA));
    expect(await catalogSnapshot(bySql)).toEqual(publicBefore);
  });

  it('upgrade a 0.1.0 database with rows in it, and the relay then delivers its pending events once', async () => {
    const fresh = await catalogSnapshot(track(await createTestDatabase([], MIGRATED)));
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

  it('upgrade 0.1.0 aggregate keys that collide (a:b, c) and (a, b:c): each aggregate keeps its order and its block', async () => {
    const old = track(await createEmptyDatabase());
    for (const file of ['schema.sql', 'typeorm-migrations.sql', 'rows.sql']) {
      await old.sql(readFileSync(join(FIXTURE_0_1_0, file), 'utf8'));
    }
    // Ordered deliveries as 0.1.0 wrote them: (a:b, c) #1 dead, so (a:b, c) #3 waits behind it, and so does
    // (a, b:c) #2, whose key 'a:b:c' 0.1.0 could not tell apart.
    await old.sql(`
      with ev as (
        insert into public.event_outbox (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, status,
                                         deliveries_open, deliveries_dead, attempts)
        values ('0190a3e0-0000-7000-8000-0000000000a1', 'f1f1f1f1-0000-4000-8000-000000000001',
                'fixture.thing.happened.v1', '{"n": 1}', 'a:b', 'c', 'failed', 0, 1, 3),
               ('0190a3e0-0000-7000-8000-0000000000a2', 'f1f1f1f1-0000-4000-8000-000000000001',
                'fixture.thing.happened.v1', '{"n": 2}', 'a', 'b:c', 'processing', 1, 0, 0),
               ('0190a3e0-0000-7000-8000-0000000000a3', 'f1f1f1f1-0000-4000-8000-000000000001',
                'fixture.thing.happened.v1', '{"n": 3}', 'a:b', 'c', 'processing', 1, 0, 0)
        returning id, tenant_id, seq, aggregate_type, aggregate_id, deliveries_dead
      )
      insert into public.outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, aggregate_key, status,
                                            attempt_count, last_error)
      select id, tenant_id, 'fixture-consumer', seq, aggregate_type || ':' || aggregate_id,
             case when deliveries_dead = 1 then 'dead' else 'pending' end,
             case when deliveries_dead = 1 then 3 else 0 end,
             case when deliveries_dead = 1 then 'refused' end
        from ev`);
    await withMigrator(old, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    expect(
      await old.sql(
        `select e.payload->>'n' as n, d.aggregate_key from outbox_deliveries d join event_outbox e on e.id = d.event_id
          where d.aggregate_key is not null order by e.seq`,
      ),
    ).toEqual([
      { n: '1', aggregate_key: '["a:b", "c"]' },
      { n: '2', aggregate_key: '["a", "b:c"]' },
      { n: '3', aggregate_key: '["a:b", "c"]' },
    ]);
    await old.sql('create table fixture_effects (event_id uuid primary key)');

    const app = await buildApp({ url: old.url, providers: [FixtureConsumer] });
    try {
      await app.relay.drain();
      expect(app.app.get(FixtureConsumer).seen.sort()).toEqual(['b:c#2', 't-1#1', 't-1#2']);
      const waiting = await old.sql<{ n: string; status: string }>(
        `select e.payload->>'n' as n, d.status from outbox_deliveries d join event_outbox e on e.id = d.event_id
          where e.aggregate_type = 'a:b' order by e.seq`,
      );
      expect(waiting).toEqual([
        { n: '1', status: 'dead' },
        { n: '3', status: 'pending' },
      ]);
    } finally {
      await app.close();
    }
  });

  it("key the inbox by tenant on a live table: its rows kept, another tenant's message with the same id then held beside them, and going down keeps the first", async () => {
    const tenantKey = outboxMigrations.findIndex((M) => new M().name === 'OutboxInboxTenantKey1764500400000');
    expect(tenantKey).toBeGreaterThan(0);
    const db = track(await createEmptyDatabase());
    await migrateBefore(db, tenantKey);
    const event = '0190a3e0-0000-7000-8000-0000000000c1';
    const message = '5a0e3b0c-9d7e-5f3a-8b1e-0000000000c2';
    const [a, b] = ['f1f1f1f1-0000-4000-8000-000000000001', 'f2f2f2f2-0000-4000-8000-000000000002'];
    // as the relay (an event's consumer) and the inbox (a broker message, processed and retrying) wrote them
    await db.sql(
      `insert into consumer_inbox (event_id, consumer_name, tenant_id, processed_at)
       values ($1, 'relay-consumer', $2, now() - interval '1 hour')`,
      [event, a],
    );
    await db.sql(
      `insert into consumer_inbox (event_id, consumer_name, tenant_id, message_id, status, attempts, first_seen_at,
                                   last_seen_at, processed_at)
       values ($1, 'inbox-consumer', $2, 'invoice-1001', 'processed', 1, now(), now(), now()),
              ($1, 'retrying-consumer', $2, 'invoice-1001', 'retrying', 2, now(), now(), null)`,
      [message, a],
    );
    const rows = () => db.sql('select * from consumer_inbox order by event_id, consumer_name, tenant_id');
    const kept = await rows();

    await withMigrator(db, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    expect(await rows()).toEqual(kept);
    const key = await db.sql<{ columns: string }>(
      `select pg_get_constraintdef(oid) as columns from pg_constraint where conname = 'consumer_inbox_pkey'`,
    );
    expect(key).toEqual([{ columns: 'PRIMARY KEY (event_id, consumer_name, tenant_id)' }]);
    // tenant B's message with tenant A's ids: a row of its own for each
    await db.sql(
      `insert into consumer_inbox (event_id, consumer_name, tenant_id, message_id, first_seen_at)
       values ($1, 'relay-consumer', $3, null, now()), ($2, 'inbox-consumer', $3, 'invoice-1001', now())`,
      [event, message, b],
    );
    expect(await rows()).toHaveLength(kept.length + 2);

    // down to the migration before it (those after it first)
    await withMigrator(db, async (dataSource) => {
      for (let i = tenantKey; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
    });
    expect(await rows()).toEqual(kept);
    await expect(
      db.sql(
        `insert into consumer_inbox (event_id, consumer_name, tenant_id) values ($1, 'inbox-consumer', $2)`,
        [message, b],
      ),
    ).rejects.toThrow(/consumer_inbox_pkey/);
  });

  it('make the pause pair key unique on a live table holding duplicate pauses, and going down drops only the holds', async () => {
    const snooze = outboxMigrations.findIndex((M) => new M().name === 'OutboxSnooze1764501400000');
    expect(snooze).toBeGreaterThan(0);
    const db = track(await createEmptyDatabase());
    await migrateBefore(db, snooze);
    const tenant = 'f1f1f1f1-0000-4000-8000-000000000001';
    // two pauses of a pair (written around the admin lock), two of every tenant, and one alone
    await db.sql(
      `insert into outbox_consumer_pauses (consumer_name, tenant_id, reason)
       values ('c', $1, 'first'), ('c', $1, 'second'), ('c', null, 'all'), ('c', null, 'all again'), ('d', $1, null)`,
      [tenant],
    );
    const pairs = () =>
      db.sql<{ consumer_name: string; tenant_id: string | null }>(
        `select consumer_name, tenant_id from outbox_consumer_pauses where tenant_id is not null
          order by consumer_name`,
      );

    await withMigrator(db, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    expect(await pairs()).toEqual([
      { consumer_name: 'c', tenant_id: tenant },
      { consumer_name: 'd', tenant_id: tenant },
    ]);
    // a hold beside them, as a webhook's Retry-After writes it
    await db.sql(
      `insert into outbox_consumer_pauses (consumer_name, tenant_id, paused_by, resumes_at)
       values ('e', $1, 'relay', now() + interval '1 minute')`,
      [tenant],
    );

    await withMigrator(db, async (dataSource) => {
      for (let i = snooze; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
    });
    expect(await pairs()).toEqual([
      { consumer_name: 'c', tenant_id: tenant },
      { consumer_name: 'd', tenant_id: tenant },
    ]);
  });

  it("narrow retention's inbox delete to the relay's rows of the event's tenant, and going down restores the function as it was", async () => {
    const narrowing = outboxMigrations.findIndex(
      (M) => new M().name === 'OutboxPurgeRelayInbox1764500800000',
    );
    expect(narrowing).toBeGreaterThan(0);
    const db = track(await createEmptyDatabase());
    await migrateBefore(db, narrowing);
    const purgeFunction = async () =>
      (
        await db.sql<{ definition: string; acl: string }>(
          `select pg_get_functiondef(p.oid) as definition, p.proacl::text as acl
             from pg_proc p where p.oid = 'public.outbox_purge_settled(timestamptz, integer)'::regprocedure`,
        )
      )[0];
    const before = await purgeFunction();

    await withMigrator(db, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    const narrowed = await purgeFunction();
    expect(narrowed.definition).toMatch(/i\.tenant_id = doomed\.tenant_id and i\.first_seen_at is null/);
    expect(narrowed.acl).toBe(before.acl);

    await withMigrator(db, async (dataSource) => {
      for (let i = narrowing; i < outboxMigrations.length; i++) await dataSource.undoLastMigration();
    });
    expect(await purgeFunction()).toEqual(before);
  });

  it('upgrade a 0.1.0 subscription secret without whsec_ to the Standard Webhooks form of the same key', async () => {
    const old = track(await createEmptyDatabase());
    for (const file of ['schema.sql', 'typeorm-migrations.sql', 'rows.sql']) {
      await old.sql(readFileSync(join(FIXTURE_0_1_0, file), 'utf8'));
    }
    const legacy = 'a 0.1.0 secret, used as its UTF-8 bytes: é';
    await old.sql(
      `insert into public.outbox_webhook_subscriptions (id, tenant_id, name, url, events, secret)
       values (gen_random_uuid(), 'f1f1f1f1-0000-4000-8000-000000000001', 'legacy', 'https://example.com/h', '{*}', $1),
              (gen_random_uuid(), 'f1f1f1f1-0000-4000-8000-000000000001', 'standard', 'https://example.com/h', '{*}', $2)`,
      [legacy, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    );
    await withMigrator(old, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
    expect(await old.sql('select name, secret from outbox_webhook_subscriptions order by name')).toEqual([
      { name: 'legacy', secret: `whsec_${Buffer.from(legacy, 'utf8').toString('base64')}` },
      { name: 'standard', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
    ]);
  });
});
