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

const NARROWED_LEASE_MS = 4000;
const NARROWED = 'test.narrowed.v1';

/**
 * Per event, in name order: `a-steady` writes its effect — and on the first event, keeps its session busy for
 * half a lease on its first run, then, when the batch runs again in parts, waits past the lease that first run
 * began with until the test releases it — and `b-poisoner`, which leaves a deferred foreign key dangling on the
 * second event (the commit fails, and the batch is narrowed). On the other relay (`takeOver`) both only count.
 */
@Injectable()
class NarrowedSlowly {
  takeOver = false;
  readonly takenOver: string[] = [];
  /** The first run's lease on the first event (its deadline, as the database wrote it). */
  private firstLease: string | null = null;
  waiting = false;
  released = false;

  @OnOutboxEvent(NARROWED, { consumer: 'a-steady', timeoutMs: NARROWED_LEASE_MS - 100 })
  async steady(event: OutboxEvent<{ order: number }>, context: OutboxHandlerContext): Promise<void> {
    if (this.takeOver) {
      this.takenOver.push(event.eventId);
      return;
    }
    await recordEffect(event, context);
    if (event.data.order !== 1) return;
    if (this.firstLease === null) {
      const [lease] = await context.manager.query(
        `select lease_expires_at::text as deadline from outbox_event_leases where event_id = $1`,
        [event.eventId],
      );
      this.firstLease = (lease as { deadline: string }).deadline;
      await context.manager.query(`select pg_sleep($1::float8 / 1000)`, [NARROWED_LEASE_MS / 2]);
      return;
    }
    // run again in parts: past the first run's lease (the session busy meanwhile: an idle one would be ended)
    for (;;) {
      const [row] = await context.manager.query(
        `select clock_timestamp() > $1::timestamptz + interval '300 milliseconds' as past, pg_sleep(0.02)`,
        [this.firstLease],
      );
      if ((row as { past: boolean }).past) break;
    }
    this.waiting = true;
    while (!this.released) await context.manager.query('select pg_sleep(0.02)');
  }

  @OnOutboxEvent(NARROWED, { consumer: 'b-poisoner', maxAttempts: 3 })
  async poisoner(event: OutboxEvent<{ order: number }>, context: OutboxHandlerContext): Promise<void> {
    if (this.takeOver) {
      this.takenOver.push(event.eventId);
      return;
    }
    if (event.data.order === 2)
      await context.manager.query('insert into fk_child (parent_id) values (gen_random_uuid())');
  }
}

/**
 * A batch whose commit failed runs again, in parts, to find the delivery that failed it (docs/adr/0101): each
 * part starts with its leases extended to a full lease, so the narrowing, longer than the lease the batch was
 * claimed with, keeps its events — another relay claims none of them meanwhile — and records every healthy
 * outcome on its first attempt.
 */
describe('a batch narrowed for longer than its lease', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      'create table fk_parent (id uuid primary key)',
      'create table fk_child (parent_id uuid not null references fk_parent (id) deferrable initially deferred)',
    ]);
    const outbox = { handlerTimeoutMs: NARROWED_LEASE_MS - 100, relay: { leaseMs: NARROWED_LEASE_MS } };
    a = await buildApp({ url: db.url, providers: [NarrowedSlowly], outbox });
    b = await buildApp({ url: db.url, providers: [NarrowedSlowly], outbox });
    b.app.get(NarrowedSlowly).takeOver = true;
  });
  afterAll(async () => {
    if (a) a.app.get(NarrowedSlowly).released = true;
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('keeps its events: no other relay claims them while it runs again in parts', async () => {
    const [first, second] = await enqueueManyIn(
      a,
      [1, 2].map((order) => ({ eventName: NARROWED, payload: { order } })),
    );
    const narrowing = a.app.get(NarrowedSlowly);
    const round = a.relay.runOnce();
    await waitFor(() => narrowing.waiting, {
      timeoutMs: 3 * NARROWED_LEASE_MS,
      message: 'the narrowed batch to run past its first lease',
    });
    // the first run's lease is over: another relay would claim the events now, were they not extended
    const other = await b.relay.drain();
    narrowing.released = true;
    expect(await round).toMatchObject({ succeeded: 3, failed: 1, leaseLost: 0 });
    expect(other).toMatchObject({ succeeded: 0, failed: 0, dead: 0 });
    expect(b.app.get(NarrowedSlowly).takenOver).toEqual([]);
    expect(
      await db.sql(`select event_id, consumer, attempt from test_effects order by event_id = $1 desc`, [
        first,
      ]),
    ).toEqual([
      { event_id: first, consumer: 'a-steady', attempt: 1 },
      { event_id: second, consumer: 'a-steady', attempt: 1 },
    ]);
    expect(
      await db.sql(
        `select event_id, consumer_name, status, attempt_count from outbox_deliveries
          order by event_id = $1 desc, consumer_name`,
        [first],
      ),
    ).toEqual([
      { event_id: first, consumer_name: 'a-steady', status: 'delivered', attempt_count: 1 },
      { event_id: first, consumer_name: 'b-poisoner', status: 'delivered', attempt_count: 1 },
      { event_id: second, consumer_name: 'a-steady', status: 'delivered', attempt_count: 1 },
      { event_id: second, consumer_name: 'b-poisoner', status: 'failed', attempt_count: 1 },
    ]);
  });
});
