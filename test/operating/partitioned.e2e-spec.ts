import { v7 as uuidv7 } from 'uuid';
import { OutboxRetention } from 'nestjs-pg-outbox';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { partitionedLayoutStatements, runSql } from '../support/template-database';
import { buildApp, type TestApp } from '../support/build-app';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE_SQL,
  TENANT,
  ThingConsumers,
  effects,
  enqueueIn,
  enqueueManyIn,
} from '../support/outbox-fixture';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';

const CONSUMER = 'ThingConsumers.writeRow';
const DAY = 86_400_000;
const EVENT = 'test.thing.created.v1';

/** UTC midnight `days` days from today (negative: before). */
function midnight(days: number): number {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) + days * DAY;
}

/** `yyyymmdd` of a UTC time: the suffix of its range's partitions (`_p<yyyymmdd>t0000`). */
function day(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
}

/** Each `writeRow` effect's event id, and how many times it was handled. */
async function handledTimes(db: TestDatabase): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const e of await effects(db, CONSUMER)) counts.set(e.event_id, (counts.get(e.event_id) ?? 0) + 1);
  return counts;
}

/** The ranges of `table`, as the day each starts. */
async function rangeDays(db: TestDatabase, table: string): Promise<string[]> {
  const rows = await db.sql<{ part: string }>(
    `select part::text from outbox_partition_ranges($1::regclass) order by lo`,
    [table],
  );
  return rows.map((r) => r.part.replace(`${table}_p`, '').slice(0, 8));
}

describe('the partitioned layout (docs/partitioning.md)', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let t: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    // migrated here, not copied from the template: unpartitioned whatever OUTBOX_TEST_PARTITIONED says
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { runMigrations: true });
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
  });
  afterAll(async () => {
    await t?.close();
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });

  it('converts a live database: enqueues go on during the conversion, every event is delivered once, seq keeps its order', async () => {
    t = await buildApp({
      url: relayRole.url,
      providers: [ThingConsumers],
      outbox: { retention: { publishedDays: 1 } },
    });
    // the app's side (the superuser's connection stands in for an app role that sets its tenant)
    producer = await buildApp({ url: db.url, providers: [ThingConsumers] });
    const delivered = await enqueueManyIn(
      producer,
      Array.from({ length: 20 }, () => ({ eventName: EVENT })),
    );
    await t.relay.drain();
    const pending = await enqueueManyIn(
      producer,
      Array.from({ length: 20 }, () => ({ eventName: EVENT })),
    );
    await db.sql(
      `insert into consumer_inbox (event_id, consumer_name, tenant_id, first_seen_at) values ($1, 'rmq:in', $2, now())`,
      [uuidv7(), TENANT],
    );

    // enqueues in a loop while the conversion runs, statement by statement, as psql would run the CLI's output
    let converting = true;
    const during: string[] = [];
    const enqueuing = (async () => {
      while (converting) during.push(await enqueueIn(producer, { eventName: EVENT }));
    })();
    const statements = partitionedLayoutSql('public')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('--'));
    try {
      await runSql(db.url, statements);
    } finally {
      converting = false;
      await enqueuing;
    }
    const after = await enqueueIn(producer, { eventName: EVENT });

    const kinds = await db.sql<{ relname: string; relkind: string }>(
      `select relname, relkind::text from pg_class
        where relname in ('event_outbox', 'outbox_deliveries', 'consumer_inbox', 'event_outbox_default') order by relname`,
    );
    expect(kinds).toEqual([
      { relname: 'consumer_inbox', relkind: 'p' },
      { relname: 'event_outbox', relkind: 'p' },
      { relname: 'event_outbox_default', relkind: 'r' },
      { relname: 'outbox_deliveries', relkind: 'p' },
    ]);
    // by default the first range starts at the first boundary a day ahead: today's rows are in the default partition
    const [first] = await rangeDays(db, 'event_outbox');
    expect(first).toBe(day(midnight(2)));

    await t.relay.drain();
    const all = [...delivered, ...pending, ...during, after];
    const handled = await handledTimes(db);
    expect([...handled.keys()].sort()).toEqual([...all].sort());
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    // seq: unique, and in enqueue order across the conversion (the parent's identity starts after the old one):
    // the events enqueued one at a time during and after it follow each other and the ones before
    const seqs = await db.sql<{ id: string; seq_text: string }>(
      `select id, seq::text as seq_text from event_outbox where id = any($1::uuid[]) order by event_outbox.seq`,
      [all],
    );
    expect(new Set(seqs.map((r) => r.seq_text)).size).toBe(all.length);
    expect(seqs.slice(delivered.length + pending.length).map((r) => r.id)).toEqual([...during, after]);
    expect(during.length).toBeGreaterThan(0);
    expect(
      await db.sql(`select count(*)::int as n from consumer_inbox where consumer_name = 'rmq:in'`),
    ).toEqual([{ n: 1 }]);

    // an event of a range (its id made at a time in the first range) goes there, its deliveries in theirs
    const ranged = uuidv7({ msecs: midnight(2) + 3_600_000 });
    await db.sql(`insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}')`, [
      ranged,
      TENANT,
      EVENT,
    ]);
    await t.relay.drain();
    expect((await handledTimes(db)).get(ranged)).toBe(1);
    const [where] = await db.sql<{ event: string; delivery: string }>(
      `select e.tableoid::regclass::text as event, d.tableoid::regclass::text as delivery
         from event_outbox e join outbox_deliveries d on d.event_id = e.id and d.consumer_name = $2 where e.id = $1`,
      [ranged, CONSUMER],
    );
    expect(where).toEqual({
      event: `event_outbox_p${day(midnight(2))}t0000`,
      delivery: `outbox_deliveries_p${day(midnight(2))}t0000`,
    });
  }, 60_000);
});

describe('ranges of the partitioned layout: delivery, retention by drop, maintenance', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let t: TestApp;
  let producer: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { runMigrations: true });
    // empty tables: the ranges may start in the past, 4 days ago
    await runSql(db.url, partitionedLayoutStatements(new Date(midnight(-4))));
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    t = await buildApp({
      url: relayRole.url,
      providers: [ThingConsumers],
      outbox: { retention: { publishedDays: 1 } },
    });
    producer = await buildApp({ url: db.url, providers: [ThingConsumers] });
  });
  afterAll(async () => {
    await t?.close();
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });

  it('delivers events of several ranges once each, drops a settled past range, keeps one with a pending delivery, makes the next ones', async () => {
    expect(await rangeDays(db, 'event_outbox')).toEqual(
      [-4, -3, -2, -1, 0, 1, 2, 3].map((d) => day(midnight(d))),
    );

    // four events in each of the ranges of 3, 2 and 1 days ago (as if enqueued then), four enqueued now
    const past = (days: number) =>
      Array.from({ length: 4 }, () => uuidv7({ msecs: midnight(-days) + 3_600_000 }));
    const [d3, d2, d1] = [past(3), past(2), past(1)];
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload) select id, $2, $3, '{}' from unnest($1::uuid[]) id`,
      [[...d3, ...d2, ...d1], TENANT, EVENT],
    );
    const today = await enqueueManyIn(
      producer,
      Array.from({ length: 4 }, () => ({ eventName: EVENT })),
    );
    await t.relay.drain();

    const handled = await handledTimes(db);
    expect([...handled.keys()].sort()).toEqual([...d3, ...d2, ...d1, ...today].sort());
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    const spread = await db.sql<{ part: string; n: number }>(
      `select tableoid::regclass::text as part, count(*)::int as n from outbox_deliveries group by 1 order by 1`,
    );
    expect(spread.map((r) => r.part)).toEqual(
      [-3, -2, -1, 0].map((d) => `outbox_deliveries_p${day(midnight(d))}t0000`),
    );

    // published a minute after they were enqueued; then one more event 2 days ago whose delivery is not done
    await db.sql(
      `update event_outbox set published_at = outbox_uuid_time(id) + interval '1 minute' where id <> all($1::uuid[])`,
      [today],
    );
    const [stuck] = past(2);
    await db.sql(
      `with e as (insert into event_outbox (id, tenant_id, event_name, payload, deliveries_open) values ($1, $2, $3, '{}', 1)
                  returning id, seq, tenant_id)
       insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, next_attempt_at)
       select id, seq, tenant_id, $4, 'failed', now() + interval '1 day' from e`,
      [stuck, TENANT, EVENT, CONSUMER],
    );

    const result = await t.app.get(OutboxRetention).purgeNow();
    // past the cut-off (a day ago): the ranges of 4 days ago (empty) and 3 days ago are dropped whole; the one of
    // 2 days ago keeps its unsettled event, and loses its settled ones by row deletes
    expect(result).toMatchObject({ partitionsDropped: 2, deletedEvents: 4 });
    expect(await rangeDays(db, 'event_outbox')).toEqual([-2, -1, 0, 1, 2, 3].map((d) => day(midnight(d))));
    expect(await rangeDays(db, 'outbox_deliveries')).toEqual(await rangeDays(db, 'event_outbox'));
    expect(await rangeDays(db, 'consumer_inbox')).toEqual(await rangeDays(db, 'event_outbox'));
    const left = await db.sql<{ id: string }>(`select id from event_outbox order by id`);
    expect(left.map((r) => r.id)).toEqual([stuck, ...d1, ...today].sort());
    const orphans = await db.sql<{ n: number }>(
      `select ((select count(*) from outbox_deliveries d where not exists (select 1 from event_outbox e where e.id = d.event_id))
             + (select count(*) from consumer_inbox i where not exists (select 1 from event_outbox e where e.id = i.event_id)))::int as n`,
    );
    expect(orphans).toEqual([{ n: 0 }]);

    // once its delivery is done and past the cut-off, the range goes too
    await db.sql(
      `update outbox_deliveries set status = 'delivered', processed_at = now() where event_id = $1`,
      [stuck],
    );
    await db.sql(
      `update event_outbox set status = 'published', deliveries_open = 0, published_at = outbox_uuid_time(id) where id = $1`,
      [stuck],
    );
    expect(await t.app.get(OutboxRetention).purgeNow()).toMatchObject({
      partitionsDropped: 1,
      deletedEvents: 0,
    });
    expect(await rangeDays(db, 'event_outbox')).toEqual([-1, 0, 1, 2, 3].map((d) => day(midnight(d))));

    // the maintenance makes ranges `ahead` of now (widening the default partitions' window first)
    await db.sql(`update outbox_partitioning set ahead = 6`);
    const made = await t.app.get(OutboxRetention).purgeNow();
    expect(made.partitionsMade).toBeGreaterThanOrEqual(4);
    const days = await rangeDays(db, 'event_outbox');
    expect(days.slice(0, 8)).toEqual([-1, 0, 1, 2, 3, 4, 5, 6].map((d) => day(midnight(d))));
    expect(await rangeDays(db, 'consumer_inbox')).toEqual(days);
    // and an event enqueued now still lands in today's range
    const [now] = await enqueueManyIn(producer, [{ eventName: EVENT }]);
    expect(
      await db.sql(`select tableoid::regclass::text as part from event_outbox where id = $1`, [now]),
    ).toEqual([{ part: `event_outbox_p${day(midnight(0))}t0000` }]);
  }, 60_000);
});
