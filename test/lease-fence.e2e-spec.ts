import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect } from './support/outbox-fixture';
import { waitFor } from './support/wait-for';

const LEASE_MS = 1500;

/**
 * On its first attempt, the first event's handler keeps its database session busy for most of a lease, and the
 * second one's waits until another relay has taken its event over: together they outlive the batch's lease,
 * while each stays under its own timeout and the session never sits idle (PostgreSQL would end an idle one).
 */
@Injectable()
class SlowFirstAttempt {
  @OnOutboxEvent('test.fence.v1', { consumer: 'fenced' })
  async handle(event: OutboxEvent<{ order: number }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if (context.attempt > 1) return;
    if (event.data.order === 1) {
      await context.manager.query('select pg_sleep(0.9)');
      return;
    }
    const deadline = Date.now() + LEASE_MS - 600;
    while (Date.now() < deadline) {
      const [lease] = await context.manager.query(
        'select claim_count from outbox_event_leases where event_id = $1',
        [event.eventId],
      );
      if (!lease || lease.claim_count > 1) return;
      await context.manager.query('select pg_sleep(0.02)');
    }
  }
}

/**
 * Relays do not lock what they claimed while its handlers run: the statement that records the outcomes is
 * fenced by the lease, and a lease taken over meanwhile rolls the whole batch back.
 */
describe('a batch that outlives its lease', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    const outbox = { handlerTimeoutMs: LEASE_MS - 100, relay: { leaseMs: LEASE_MS } };
    a = await buildApp({ url: db.url, providers: [SlowFirstAttempt], outbox });
    b = await buildApp({ url: db.url, providers: [SlowFirstAttempt], outbox });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('is rolled back when another relay took it over: each effect lands once, from the relay that recorded it', async () => {
    const ids = await enqueueManyIn(
      a,
      [1, 2].map((order) => ({ eventName: 'test.fence.v1', payload: { order } })),
    );
    const slowRound = a.relay.runOnce();
    await waitFor(
      async () =>
        (
          await db.sql<{ n: number }>(
            'select count(*)::int as n from outbox_event_leases where lease_expires_at < now()',
          )
        )[0]!.n === 2,
      { message: 'the slow batch’s leases to expire' },
    );
    const takeover = await b.relay.drain();
    expect(takeover).toMatchObject({ succeeded: 2, failed: 0, dead: 0 });

    const slow = await slowRound;
    expect(slow).toMatchObject({ succeeded: 0, leaseLost: 2 });
    expect(await db.sql('select event_id, attempt from test_effects order by attempt, event_id')).toEqual(
      ids.sort().map((id) => ({ event_id: id, attempt: 2 })),
    );
    expect(
      await db.sql(
        `select e.status, d.status as delivery, d.attempt_count
           from event_outbox e join outbox_deliveries d on d.event_id = e.id order by e.id`,
      ),
    ).toEqual([
      { status: 'published', delivery: 'delivered', attempt_count: 2 },
      { status: 'published', delivery: 'delivered', attempt_count: 2 },
    ]);
    expect(await db.sql('select count(*)::int as n from consumer_inbox')).toEqual([{ n: 2 }]);
  });
});
