import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect } from '../support/outbox-fixture';
import { expireLeases } from '../support/expire-leases';
import { waitFor } from '../support/wait-for';

/** Long: the leases below run out because the test ends them (by SQL), never because time passed. */
const LEASE_MS = 60_000;

/**
 * On its first attempt, each handler keeps its database session busy (an idle one would be ended) until another
 * relay has taken its event over, or for a few seconds at most: the batch outlives its lease, which the test
 * ends meanwhile.
 */
@Injectable()
class SlowFirstAttempt {
  /** Events whose first attempt has begun. */
  readonly started: string[] = [];

  @OnOutboxEvent('test.fence.v1', { consumer: 'fenced' })
  async handle(event: OutboxEvent<{ order: number }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if (context.attempt > 1) return;
    this.started.push(event.eventId);
    const deadline = Date.now() + 5000;
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
    await waitFor(() => a.app.get(SlowFirstAttempt).started.length > 0, {
      message: 'the slow batch to begin',
    });
    // the slow batch's leases run out while its handlers run
    expect(await expireLeases(db, ids)).toBe(2);
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

/** Long: the first run's leases run out because the test ends them (by SQL), never because time passed. */
const NARROWED_LEASE_MS = 60_000;
const NARROWED = 'test.narrowed.v1';

/**
 * Per event, in name order: `a-steady` writes its effect — and on the first event, keeps its session busy on its
 * first run until the test has ended that run's leases (`leasesEnded`), then, when the batch runs again in
 * parts, until the test releases it — and `b-poisoner`, which leaves a deferred foreign key dangling on the
 * second event (the commit fails, and the batch is narrowed). On the other relay (`takeOver`) both only count.
 */
@Injectable()
class NarrowedSlowly {
  takeOver = false;
  readonly takenOver: string[] = [];
  private firstRun = true;
  /** The first run is under way, holding its leases. */
  holding = false;
  leasesEnded = false;
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
    if (this.firstRun) {
      this.firstRun = false;
      this.holding = true;
      // the session busy meanwhile: an idle one would be ended
      while (!this.leasesEnded) await context.manager.query('select pg_sleep(0.02)');
      return;
    }
    // run again in parts, after the first run's leases ended
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
    if (a) Object.assign(a.app.get(NarrowedSlowly), { leasesEnded: true, released: true });
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
    await waitFor(() => narrowing.holding, { message: 'the first run to begin' });
    // the first run's leases are over: another relay would claim the events now, were they not extended
    expect(await expireLeases(db, [first!, second!])).toBe(2);
    narrowing.leasesEnded = true;
    await waitFor(() => narrowing.waiting, { message: 'the narrowed batch to run again in parts' });
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
