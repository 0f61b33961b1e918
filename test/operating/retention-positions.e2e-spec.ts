import { Client } from 'pg';
import { OutboxRetention } from 'nestjs-pg-outbox';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import { purgeSettledBatch, type PurgePositions } from '../../libs/outbox/src/store/sql/retention';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { buildApp } from '../support/build-app';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  ThingConsumers,
  truncateOutbox,
} from '../support/outbox-fixture';

const A = '1a1a1a1a-0000-4000-8000-00000000001a';
const CONSUMER = 'ThingConsumers.writeRow';
const START: PurgePositions = { ranges: [], ats: [] };

/**
 * Retention's batches start where the last one ended (ADR 1206, addendum "Retention's purge"): while a snapshot is
 * held, the settled index keeps an entry for every event deleted since, and a batch from the oldest reads them all.
 */
describe('retention positions', () => {
  let db: TestDatabase;
  let relayRole: TestRole;

  const app = () =>
    buildApp({
      url: relayRole.url,
      providers: [ThingConsumers],
      outbox: { retention: { publishedDays: 7, batchSize: 100 } },
    });

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
  });
  afterAll(async () => {
    await db?.drop();
    await relayRole?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, EFFECTS_TABLE);
  });

  /**
   * Writes `count` published events with a delivered delivery and an inbox row each, settled one millisecond
   * apart from `daysAgo` days ago on, in an order that is not the rows' (a settled row's version goes where the
   * table has room, so the index of `published_at` does not follow the heap): each entry's row is on a page of its
   * own, as in the soak (`(g × 7919) mod count` is a permutation of the events).
   */
  const seed = (count: number, daysAgo: number) =>
    db.sql(
      `with ev as (
         insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, created_at, updated_at)
         select gen_random_uuid(), $1::uuid, 'test.thing.created.v1', '{}'::jsonb, 'published',
                now() - $2::int * interval '1 day' + (g * 7919 % $3::int) * interval '1 millisecond',
                now() - $2::int * interval '1 day', now() - $2::int * interval '1 day'
           from generate_series(1, $3::int) g
         returning id, seq, tenant_id
       ), deliveries as (
         insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, attempt_count, processed_at)
         select id, seq, tenant_id, $4, 'delivered', 1, now() from ev
       )
       insert into consumer_inbox (event_id, consumer_name, tenant_id)
       select id, $4, tenant_id from ev`,
      [A, daysAgo, count, CONSUMER],
    );
  const count = async (): Promise<number> =>
    (await db.sql<{ n: number }>(`select count(*)::int as n from event_outbox`))[0].n;

  it('reads a bounded number of buffers per batch while a snapshot is held, where a batch from the oldest reads every event deleted since', async () => {
    await seed(50_000, 30);
    const holder = new Client({ connectionString: db.url });
    const relay = new Client({ connectionString: relayRole.url });
    await holder.connect();
    await relay.connect();
    try {
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
      // retention's batches, from their positions: 50 of 1,000
      let positions = START;
      let deleted = 0;
      for (let batch = 0; batch < 50; batch++) {
        const s = purgeSettledBatch(outboxNames(), 7, 1000, positions);
        const [row] = (await relay.query(s.text, [...s.values])).rows;
        deleted += row.deleted;
        positions = { ranges: row.ranges, ats: row.ats };
      }
      expect(deleted).toBe(50_000);
      await seed(1000, 29);
      /** Shared buffers (hit and read) of one batch, its deletes rolled back. */
      const buffers = async (from: PurgePositions): Promise<number> => {
        const s = purgeSettledBatch(outboxNames(), 7, 1000, from);
        await relay.query('begin');
        try {
          const [
            {
              'QUERY PLAN': [plan],
            },
          ] = (await relay.query(`explain (analyze, buffers, format json) ${s.text}`, [...s.values])).rows;
          return plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'];
        } finally {
          await relay.query('rollback');
        }
      };
      const fromOldest = await buffers(START);
      const fromPosition = await buffers(positions);
      // the hold is in force: a batch from the oldest reads the 50,000 index entries of the events deleted, and
      // their rows (67,152 buffers on PostgreSQL 15); from the position, what deleting 1,000 events with their
      // deliveries and inbox rows reads (17,007)
      expect(fromOldest).toBeGreaterThan(50_000);
      expect(fromPosition).toBeLessThan(25_000);
    } finally {
      await holder.end();
      await relay.end();
    }
  }, 120_000);

  it("takes retention's lock before it deletes: a batch while another instance holds it deletes nothing", async () => {
    await seed(10, 30);
    const holder = new Client({ connectionString: db.url });
    const relay = new Client({ connectionString: relayRole.url });
    await holder.connect();
    await relay.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [
        outboxNames().retentionLock,
      ]);
      const s = purgeSettledBatch(outboxNames(), 7, 1000, START);
      const [row] = (await relay.query(s.text, [...s.values])).rows;
      expect(row.deleted).toBeNull();
      expect(await count()).toBe(10);
      await holder.query('rollback');
      const [after] = (await relay.query(s.text, [...s.values])).rows;
      expect(after.deleted).toBe(10);
    } finally {
      await holder.end();
      await relay.end();
    }
  });

  it('does not lose an event settled below its position: the next run that starts from the oldest deletes it', async () => {
    const t = await app();
    const late = await app();
    try {
      const retention = t.app.get(OutboxRetention);
      await seed(250, 30);
      expect(await retention.purgeNow()).toEqual({ deletedEvents: 250, deletedKeys: 0, batches: 4 });
      await seed(120, 29);
      // settled before the position (its transaction committed after the batches passed it)
      await seed(1, 31);
      expect((await retention.purgeNow()).deletedEvents).toBe(120);
      expect(await count()).toBe(1);
      // an instance's first run starts from the oldest event, as a run does once an hour
      expect((await late.app.get(OutboxRetention).purgeNow()).deletedEvents).toBe(1);
      expect(await count()).toBe(0);
    } finally {
      await t.close();
      await late.close();
    }
  });
});
