import { Client } from 'pg';
import { OutboxRetention } from 'nestjs-pg-outbox';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { buildApp, type TestApp } from '../support/build-app';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  ThingConsumers,
  truncateOutbox,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';

const A = '1a1a1a1a-0000-4000-8000-00000000001a';
const B = '2b2b2b2b-0000-4000-8000-00000000002b';
const CONSUMER = 'ThingConsumers.writeRow';

describe('retention', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let t: TestApp;

  /** An app on the relay role (the retention function is granted to it), relay driven by hand. */
  const app = (
    retention: { publishedDays?: number; batchSize?: number; intervalMs?: number } = {},
    relay: { enabled?: boolean } = {},
  ) =>
    buildApp({
      url: relayRole.url,
      providers: [ThingConsumers],
      outbox: {
        retention: { publishedDays: 7, batchSize: 100, ...retention },
        relay: { pollIntervalMs: 50, ...relay },
      },
    });

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    t = await app();
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
    await relayRole?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, EFFECTS_TABLE);
  });

  /**
   * Writes `count` settled events straight into the tables, `daysAgo` old, alternating tenants A and B: with a
   * delivered (or, for failed events, dead) delivery row, and an inbox row for each delivered one.
   */
  const seed = (
    count: number,
    status: 'published' | 'no_handlers' | 'failed' | 'pending' | 'processing',
    daysAgo = 30,
  ) =>
    db.sql(
      `with ev as (
         insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, failed_at, deliveries_open, deliveries_dead, created_at, updated_at)
         select gen_random_uuid(), (array[$1::uuid, $2::uuid])[1 + g % 2], 'test.thing.created.v1', '{}'::jsonb, $3::text,
                case when $3::text in ('published', 'no_handlers') then now() - $4::int * interval '1 day' end,
                case when $3::text = 'failed' then now() - $4::int * interval '1 day' end,
                case when $3::text = 'processing' then 1 else 0 end,
                case when $3::text = 'failed' then 1 else 0 end,
                now() - $4::int * interval '1 day', now() - $4::int * interval '1 day'
           from generate_series(1, $5::int) g
         returning id, seq, tenant_id, status
       ), deliveries as (
         insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, attempt_count, processed_at)
         select id, seq, tenant_id, $6,
                case status when 'failed' then 'dead' when 'processing' then 'failed' else 'delivered' end, 1, now()
           from ev where status not in ('no_handlers', 'pending')
       )
       insert into consumer_inbox (event_id, consumer_name, tenant_id)
       select id, $6, tenant_id from ev where status = 'published'`,
      [A, B, status, daysAgo, count, CONSUMER],
    );
  const count = async (table: string): Promise<number> =>
    (await db.sql<{ n: number }>(`select count(*)::int as n from ${table}`))[0].n;
  const countsByStatus = async () =>
    Object.fromEntries(
      (
        await db.sql<{ status: string; n: number }>(
          'select status, count(*)::int as n from event_outbox group by status',
        )
      ).map((r) => [r.status, r.n]),
    );
  const orphanRows = async () =>
    (
      await db.sql<{ n: number }>(
        `select (select count(*) from outbox_deliveries d where not exists (select 1 from event_outbox e where e.id = d.event_id))
              + (select count(*) from consumer_inbox i where not exists (select 1 from event_outbox e where e.id = i.event_id)) as n`,
      )
    )[0].n;

  it('deletes old published events with their delivery and inbox rows in batches, and keeps failed, unsettled and recent ones', async () => {
    await seed(1050, 'published');
    await seed(20, 'no_handlers');
    await seed(3, 'failed');
    await seed(2, 'pending');
    await seed(2, 'processing');
    await seed(5, 'published', 1);

    const result = await t.app.get(OutboxRetention).purgeNow();
    expect(result).toEqual({ deletedEvents: 1070, deletedKeys: 0, batches: 12 });
    expect(await countsByStatus()).toEqual({ failed: 3, pending: 2, processing: 2, published: 5 });
    expect(await count('outbox_deliveries')).toBe(3 + 2 + 5);
    expect(await count('consumer_inbox')).toBe(5);
    expect(Number(await orphanRows())).toBe(0);
    expect(await t.app.get(OutboxRetention).purgeNow()).toEqual({
      deletedEvents: 0,
      deletedKeys: 0,
      batches: 2,
    });
  });

  it('refuses, in the database, a cut-off less than an hour old, so no caller purges every tenant at once', async () => {
    await seed(4, 'published', 0);
    const relay = new Client({ connectionString: relayRole.url });
    await relay.connect();
    try {
      for (const cutOff of ['now()', "now() - interval '59 minutes'", "'infinity'::timestamptz", 'null'])
        await expect(relay.query(`select public.outbox_purge_settled(${cutOff}, 1000)`)).rejects.toThrow(
          /outbox_purge_settled/,
        );
      await expect(
        relay.query(`select public.outbox_purge_settled(now() - interval '2 hours', 0)`),
      ).rejects.toThrow(/max_events/);
    } finally {
      await relay.end();
    }
    expect(await count('event_outbox')).toBe(4);
    await expect(app({ publishedDays: 0.01 })).rejects.toThrow(/retention\.publishedDays/);
  });

  it('keeps the relay delivering while it purges in batches', async () => {
    await seed(5000, 'published');
    const retention = t.app.get(OutboxRetention);
    const narrow = await app({ batchSize: 25 });
    let purging = true;
    let roundsWhilePurging = 0;
    const enqueued: string[] = [];
    const produceAndRelay = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) {
        for (const tenantId of [A, B]) {
          const ids = await t.dataSource.transaction(async (m) => {
            await m.query(`select set_config('app.current_tenant_id', $1, true)`, [tenantId]);
            return t.outbox.enqueueMany(
              m,
              Array.from({ length: 3 }, (_, n) => ({
                tenantId,
                eventName: 'test.thing.created.v1',
                payload: { i, n },
              })),
            );
          });
          enqueued.push(...ids);
        }
        await t.relay.runOnce();
        if (purging) roundsWhilePurging++;
      }
      await t.relay.drain();
    };
    try {
      const [result] = await Promise.all([
        narrow.app
          .get(OutboxRetention)
          .purgeNow()
          .finally(() => (purging = false)),
        produceAndRelay(),
      ]);
      expect(result).toEqual({ deletedEvents: 5000, deletedKeys: 0, batches: 202 });
    } finally {
      await narrow.close();
    }
    expect(roundsWhilePurging).toBeGreaterThan(0);
    expect(await countsByStatus()).toEqual({ published: 120 });
    const effects = await db.sql<{ event_id: string; n: number }>(
      `select event_id, count(*)::int as n from test_effects group by event_id`,
    );
    expect(effects.map((e) => e.event_id).sort()).toEqual([...enqueued].sort());
    expect(effects.every((e) => e.n === 1)).toBe(true);
    expect((await retention.purgeNow()).deletedEvents).toBe(0); // the new events are recent
  }, 30_000);

  it('runs on one instance at a time: skips while another holds the lock, and two instances never delete twice', async () => {
    await seed(250, 'published');
    const retention = t.app.get(OutboxRetention);
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [
        outboxNames().retentionLock,
      ]);
      expect(await retention.purgeNow()).toEqual({
        deletedEvents: 0,
        deletedKeys: 0,
        batches: 0,
        skipped: 'locked',
      });
      await holder.query('rollback');
    } finally {
      await holder.end();
    }
    expect((await retention.purgeNow()).deletedEvents).toBe(250);

    await seed(3000, 'published');
    const other = await app();
    try {
      const results = await Promise.all([retention.purgeNow(), other.app.get(OutboxRetention).purgeNow()]);
      expect(results[0].deletedEvents + results[1].deletedEvents).toBe(3000);
    } finally {
      await other.close();
    }
    expect(await count('event_outbox')).toBe(0);
  }, 30_000);

  it('runs on a schedule only where the relay is enabled, and not at all with publishedDays 0', async () => {
    expect(t.app.get(OutboxRetention).isScheduled).toBe(false); // relay disabled on this instance

    const off = await app({ publishedDays: 0, intervalMs: 50 }, { enabled: true });
    try {
      expect(off.app.get(OutboxRetention).isScheduled).toBe(false);
      expect(await off.app.get(OutboxRetention).purgeNow()).toEqual({
        deletedEvents: 0,
        deletedKeys: 0,
        batches: 0,
        skipped: 'disabled',
      });
    } finally {
      await off.close();
    }

    await seed(120, 'published');
    const scheduled = await app({ intervalMs: 50 }, { enabled: true });
    const retention = scheduled.app.get(OutboxRetention);
    try {
      expect(retention.isScheduled).toBe(true);
      await waitFor(async () => (await count('event_outbox')) === 0, { message: 'the scheduled purge' });
    } finally {
      await scheduled.close();
    }
    expect(retention.isScheduled).toBe(false);
  });
});
