import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  type OutboxEvent,
  type OutboxEventInput,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, TENANT, truncateOutbox } from '../support/outbox-fixture';
import { enqueueIn, makeRetriesDue } from '../support/outbox-fixture';

interface Step {
  n: number;
}

/** Records, per aggregate, the order in which its events arrive; fails some first attempts on purpose. */
@Injectable()
class OrderedConsumer {
  failOnce = new Set<number>();
  alwaysFail = new Set<number>();

  @OnOutboxEvent('test.step.v1', {
    consumer: 'ordered',
    ordered: true,
    maxAttempts: 3,
    backoff: { baseMs: 1, capMs: 5, jitter: 0 },
  })
  async handle(event: OutboxEvent<Step>, context: OutboxHandlerContext): Promise<void> {
    if (this.alwaysFail.has(event.data.n) || (this.failOnce.has(event.data.n) && context.attempt === 1)) {
      throw new Error(`refusing step ${event.data.n}`);
    }
    await context.manager.query('insert into arrivals (aggregate_id, n) values ($1, $2)', [
      event.aggregateId,
      event.data.n,
    ]);
  }
}

describe('ordering per aggregate', () => {
  let db: TestDatabase;
  let relays: TestApp[] = [];
  beforeAll(async () => {
    db = await createTestDatabase([
      'create table arrivals (id bigint generated always as identity primary key, aggregate_id text, n int)',
    ]);
    relays = await Promise.all(
      [0, 1, 2].map(() =>
        buildApp({ url: db.url, providers: [OrderedConsumer], outbox: { relay: { batchSize: 20 } } }),
      ),
    );
  });
  afterAll(async () => {
    for (const relay of relays) await relay.close();
    await db?.drop();
  });
  beforeEach(() => truncateOutbox(db, 'arrivals'));

  /** Runs all relays side by side until none finds work three times in a row. */
  const drainTogether = async (): Promise<void> => {
    await Promise.all(
      relays.map(async (t) => {
        for (let idle = 0; idle < 3;) {
          const round = await t.relay.runOnce();
          idle = round.deliveriesClaimed === 0 && round.eventsClaimed === 0 ? idle + 1 : 0;
          if (idle > 0) await new Promise((resolve) => setTimeout(resolve, 10));
        }
      }),
    );
  };
  const enqueueInterleaved = async (aggregates: number, perAggregate: number): Promise<void> => {
    const events: OutboxEventInput<{ n: number }>[] = [];
    for (let n = 0; n < perAggregate; n++) {
      for (let a = 0; a < aggregates; a++) {
        events.push({
          tenantId: TENANT,
          eventName: 'test.step.v1',
          aggregateType: 'order',
          aggregateId: `agg-${a}`,
          payload: { n },
        });
      }
    }
    // Several transactions, so the relays see the aggregates grow while they work.
    for (let i = 0; i < events.length; i += 50) {
      await enqueueManyIn(relays[0]!, events.slice(i, i + 50));
    }
  };
  /** Every relay's consumer refuses these steps on every attempt (and no other step ever). */
  const failEveryAttempt = (steps: number[]): void => {
    for (const t of relays) {
      const consumer = t.app.get(OrderedConsumer);
      consumer.failOnce = new Set();
      consumer.alwaysFail = new Set(steps);
    }
  };
  /** Drains, making retries due at once, until refused deliveries have spent their 3 attempts. */
  const drainUntilDead = async (): Promise<void> => {
    for (let pass = 0; pass < 4; pass++) {
      await drainTogether();
      await makeRetriesDue(db);
    }
  };
  const arrivals = async (): Promise<Map<string, number[]>> => {
    const rows = await db.sql<{ aggregate_id: string; n: number }>(
      'select aggregate_id, n from arrivals order by id',
    );
    const byAggregate = new Map<string, number[]>();
    for (const row of rows)
      byAggregate.set(row.aggregate_id, [...(byAggregate.get(row.aggregate_id) ?? []), row.n]);
    return byAggregate;
  };

  it('delivers each aggregate in enqueue order with three relays, through retries', async () => {
    for (const t of relays) {
      const consumer = t.app.get(OrderedConsumer);
      consumer.failOnce = new Set([3, 7, 11]);
      consumer.alwaysFail = new Set();
    }
    await enqueueInterleaved(8, 15);
    for (let pass = 0; pass < 5; pass++) {
      await drainTogether();
      const pending = await db.sql(`select 1 from outbox_deliveries where status <> 'delivered' limit 1`);
      if (pending.length === 0) break;
      await makeRetriesDue(db);
    }
    const byAggregate = await arrivals();
    expect(byAggregate.size).toBe(8);
    for (const [, steps] of byAggregate) expect(steps).toEqual(Array.from({ length: 15 }, (_, n) => n));
  });

  it('blocks an aggregate behind a dead delivery until it is replayed, without holding up other aggregates', async () => {
    failEveryAttempt([2]);
    await enqueueInterleaved(1, 5);
    await enqueueIn(relays[0]!, {
      eventName: 'test.step.v1',
      aggregateType: 'order',
      aggregateId: 'other',
      payload: { n: 0 },
    });
    await drainUntilDead();
    let byAggregate = await arrivals();
    expect(byAggregate.get('agg-0')).toEqual([0, 1]);
    expect(byAggregate.get('other')).toEqual([0]);
    expect(await db.sql(`select count(*)::int n from outbox_deliveries where status = 'dead'`)).toEqual([
      { n: 1 },
    ]);
    const [dead] = await db.sql<{ id: string }>(`select id from event_outbox where payload->>'n' = '2'`);
    const stats = await relays[0]!.app.get(OutboxAdminService).stats(TENANT);
    expect(stats.blockedAggregates).toEqual([
      {
        consumer: 'ordered',
        aggregateType: 'order',
        aggregateId: 'agg-0',
        deadEventId: dead!.id,
        waitingDeliveries: 2,
      },
    ]);
    expect(stats.blockedAggregateCount).toBe(1);

    for (const t of relays) t.app.get(OrderedConsumer).alwaysFail = new Set();
    // Replay the dead delivery (what OutboxAdminService.replayEvent does).
    await db.sql(
      `with r as (update outbox_deliveries set status = 'pending', attempt_count = 0, next_attempt_at = now() where status = 'dead' returning event_id)
       update event_outbox e set deliveries_dead = deliveries_dead - 1, status = 'processing' from r where e.id = r.event_id`,
    );
    await drainTogether();
    byAggregate = await arrivals();
    expect(byAggregate.get('agg-0')).toEqual([0, 1, 2, 3, 4]);
    expect((await relays[0]!.app.get(OutboxAdminService).stats(TENANT)).blockedAggregates).toEqual([]);
  });

  it('keeps apart aggregates whose type and id join to the same text, (a:b, c) and (a, b:c)', async () => {
    failEveryAttempt([1]);
    const step = (aggregateType: string, aggregateId: string, n: number): OutboxEventInput<Step> => ({
      tenantId: TENANT,
      eventName: 'test.step.v1',
      aggregateType,
      aggregateId,
      payload: { n },
    });
    await enqueueManyIn(relays[0]!, [step('a:b', 'c', 1), step('a', 'b:c', 2), step('a:b', 'c', 3)]);
    await drainUntilDead();
    const byAggregate = await arrivals();
    expect(byAggregate.get('b:c')).toEqual([2]);
    expect(byAggregate.get('c')).toBeUndefined();
    const stats = await relays[0]!.app.get(OutboxAdminService).stats(TENANT);
    expect(stats.blockedAggregates).toMatchObject([
      { consumer: 'ordered', aggregateType: 'a:b', aggregateId: 'c', waitingDeliveries: 1 },
    ]);
  });

  it('lets a blocked aggregate move on when its dead event is purged (skipped)', async () => {
    failEveryAttempt([1]);
    await enqueueInterleaved(2, 3);
    await drainUntilDead();
    expect(await arrivals()).toEqual(
      new Map([
        ['agg-0', [0]],
        ['agg-1', [0]],
      ]),
    );
    const admin = relays[0]!.app.get(OutboxAdminService);
    const stats = await admin.stats(TENANT);
    expect(stats.blockedAggregateCount).toBe(2);
    expect(stats.blockedAggregates.map((b) => [b.aggregateId, b.waitingDeliveries])).toEqual([
      ['agg-0', 1],
      ['agg-1', 1],
    ]);

    // Skip agg-0's dead step; agg-1 stays blocked.
    expect(await admin.purgeEvent(TENANT, stats.blockedAggregates[0]!.deadEventId)).toBe(true);
    await drainTogether();
    expect(await arrivals()).toEqual(
      new Map([
        ['agg-0', [0, 2]],
        ['agg-1', [0]],
      ]),
    );
    expect((await admin.stats(TENANT)).blockedAggregates.map((b) => b.aggregateId)).toEqual(['agg-1']);
  });
});
