import { Injectable, type LoggerService } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  deliveryOf,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  effectIds,
  enqueueIn,
  eventOf,
  makeRetriesDue,
  recordEffect,
  TENANT,
  truncateOutbox,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';

/** Consumers whose behaviour each test sets through `plan`. */
@Injectable()
class PlannedConsumers {
  /** Per consumer: how many of the next calls throw. */
  readonly failNext = new Map<string, number>();
  readonly calls: { consumer: string; eventId: string; attempt: number; event: OutboxEvent }[] = [];
  hang = false;
  release: (() => void) | null = null;

  private async run(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.calls.push({ consumer: context.consumer, eventId: event.eventId, attempt: context.attempt, event });
    await recordEffect(event, context);
    const failures = this.failNext.get(context.consumer) ?? 0;
    if (failures > 0) {
      this.failNext.set(context.consumer, failures - 1);
      throw new Error(`planned failure of ${context.consumer}`);
    }
  }

  @OnOutboxEvent('test.order.placed.v1', {
    consumer: 'billing',
    maxAttempts: 3,
    backoff: { baseMs: 1, capMs: 1, jitter: 0 },
  })
  billing(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.run(event, context);
  }

  @OnOutboxEvent('test.order.*', {
    consumer: 'shipping',
    maxAttempts: 3,
    backoff: { baseMs: 1, capMs: 1, jitter: 0 },
  })
  shipping(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.run(event, context);
  }

  @OnOutboxEvent('test.slow.v1', {
    consumer: 'slow',
    timeoutMs: 200,
    maxAttempts: 2,
    backoff: { baseMs: 1, capMs: 1, jitter: 0 },
  })
  async slow(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.calls.push({ consumer: context.consumer, eventId: event.eventId, attempt: context.attempt, event });
    if (this.hang) await new Promise<void>((resolve) => (this.release = resolve));
  }
}

describe('relay', () => {
  let db: TestDatabase;
  let t: TestApp;
  let consumers: PlannedConsumers;

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({ url: db.url, providers: [PlannedConsumers] });
    consumers = t.app.get(PlannedConsumers);
  });
  afterAll(async () => {
    consumers.release?.();
    await t?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, EFFECTS_TABLE);
    consumers.failNext.clear();
    consumers.calls.length = 0;
    consumers.hang = false;
  });

  const enqueue = (eventName: string, payload: Record<string, unknown> = {}) =>
    enqueueIn(t, { eventName, payload, aggregateType: 'order', aggregateId: 'o-1' });

  it('delivers every committed event to each consumer registered for it, with the envelope', async () => {
    const id = await enqueue('test.order.placed.v1', { total: 12 });
    const round = await t.relay.drain();
    expect(round).toMatchObject({ eventsClaimed: 1, succeeded: 2, failed: 0, dead: 0 });
    expect(await effectIds(db, 'billing')).toEqual([id]);
    expect(await effectIds(db, 'shipping')).toEqual([id]);
    expect(consumers.calls[0]!.event).toMatchObject({
      eventId: id,
      eventName: 'test.order.placed.v1',
      tenantId: TENANT,
      aggregateType: 'order',
      aggregateId: 'o-1',
      schemaVersion: 1,
      correlationId: null,
      data: { total: 12 },
    });
    const inbox = await db.sql(
      'select consumer_name from consumer_inbox where event_id = $1 order by consumer_name',
      [id],
    );
    expect(inbox).toEqual([{ consumer_name: 'billing' }, { consumer_name: 'shipping' }]);
    expect(await eventOf(db, id)).toMatchObject({ status: 'published', deliveries_open: 0 });
  });

  it('returns every connection to the pool with no transaction open, after rounds with and without work', async () => {
    await enqueue('test.order.placed.v1', { total: 1 });
    await t.relay.drain();
    for (let i = 0; i < 15; i++) await t.relay.runOnce(); // more empty rounds than the pool has connections
    const driver = t.dataSource.driver as unknown as { master: { totalCount: number; idleCount: number } };
    const pool = driver.master;
    expect(pool.totalCount - pool.idleCount).toBe(0);
    const idleInTransaction = `select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state like 'idle in transaction%'`;
    expect(await db.sql(idleInTransaction)).toEqual([{ n: 0 }]);
  });

  it('rolls back a failing handler’s writes with its inbox row, records the failure, and never re-runs the consumer that succeeded', async () => {
    consumers.failNext.set('billing', 1);
    const id = await enqueue('test.order.placed.v1');
    const first = await t.relay.runOnce();
    expect(first).toMatchObject({ succeeded: 1, failed: 1 });
    expect(await effectIds(db, 'billing')).toEqual([]);
    expect(await effectIds(db, 'shipping')).toEqual([id]);
    expect(await db.sql('select consumer_name from consumer_inbox where event_id = $1', [id])).toEqual([
      { consumer_name: 'shipping' },
    ]);
    const failed = await deliveryOf(db, id, 'billing');
    expect(failed).toMatchObject({ status: 'failed', attempt_count: 1, error_code: 'handlerError' });
    expect(failed!.last_error).toContain('planned failure of billing');
    expect((failed!.next_attempt_at as Date).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await eventOf(db, id)).toMatchObject({ status: 'processing', deliveries_open: 1 });

    await makeRetriesDue(db);
    const second = await t.relay.drain();
    expect(second).toMatchObject({ succeeded: 1, failed: 0 });
    expect(await effectIds(db, 'billing')).toEqual([id]);
    expect(await effectIds(db, 'shipping')).toEqual([id]);
    expect(consumers.calls.filter((c) => c.consumer === 'shipping')).toHaveLength(1);
    expect(consumers.calls.filter((c) => c.consumer === 'billing').map((c) => c.attempt)).toEqual([1, 2]);
    expect(await eventOf(db, id)).toMatchObject({ status: 'published' });
  });

  it('dead-letters a consumer after maxAttempts, marks the event failed, and leaves the other consumer delivered', async () => {
    consumers.failNext.set('billing', 10);
    const id = await enqueue('test.order.placed.v1');
    for (let round = 0; round < 3; round++) {
      await t.relay.drain();
      await makeRetriesDue(db);
    }
    expect(await deliveryOf(db, id, 'billing')).toMatchObject({ status: 'dead', attempt_count: 3 });
    expect(await deliveryOf(db, id, 'shipping')).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const row = await eventOf(db, id);
    expect(row).toMatchObject({ status: 'failed', attempts: 3 });
    expect(row!.error_message).toContain('billing');
    expect(row!.failed_at).toBeInstanceOf(Date);
    expect(await effectIds(db, 'shipping')).toEqual([id]);
    expect((await t.relay.drain()).deliveriesClaimed).toBe(0);
  });

  it('retries with exponential backoff per consumer', async () => {
    consumers.failNext.set('shipping', 1);
    const id = await enqueue('test.order.shipped.v1');
    await t.relay.runOnce();
    const row = await deliveryOf(db, id, 'shipping');
    expect(row!.status).toBe('failed');
    // billing does not listen to this event at all: exact names do not match other events.
    expect(
      await db.sql('select * from outbox_deliveries where consumer_name = $1', ['billing']),
    ).toHaveLength(0);
  });

  it('marks an event nobody listens to as no_handlers', async () => {
    const id = await enqueue('test.nobody.listens.v1');
    const round = await t.relay.drain();
    expect(round.eventsClaimed).toBe(1);
    expect(await eventOf(db, id)).toMatchObject({ status: 'no_handlers' });
    expect(await db.sql('select * from outbox_deliveries where event_id = $1', [id])).toHaveLength(0);
  });

  it('cuts off a hanging handler after its timeout and counts a failed attempt', async () => {
    consumers.hang = true;
    const id = await enqueue('test.slow.v1');
    const round = await t.relay.runOnce();
    expect(round.failed).toBe(1);
    expect(await deliveryOf(db, id, 'slow')).toMatchObject({
      status: 'failed',
      error_code: 'timeout',
      attempt_count: 1,
    });
    consumers.release?.();
  });

  it('never runs two rounds at once', async () => {
    consumers.hang = true;
    await enqueue('test.slow.v1');
    const first = t.relay.runOnce();
    await waitFor(() => consumers.calls.length === 1, { message: 'the slow handler to start' });
    const second = t.relay.runOnce();
    // While the first round hangs, the second waits for it instead of claiming alongside.
    expect(consumers.calls).toHaveLength(1);
    consumers.release?.();
    await first;
    await second;
    expect(consumers.calls).toHaveLength(1);
  });

  it('runs on its own schedule when enabled, and a failing round does not stop it', async () => {
    const FORMS = [
      'integer, uuid',
      'integer, uuid, uuid[], bigint[], text, timestamptz',
      'integer, uuid, uuid[], bigint[], text, timestamptz, uuid',
    ];
    const failedRounds: string[] = [];
    const logger: LoggerService = {
      log: () => undefined,
      warn: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
      error: (message: unknown) => void failedRounds.push(String(message)),
    };
    const scheduled = await buildApp({
      url: db.url,
      providers: [PlannedConsumers],
      outbox: { relay: { enabled: true, pollIntervalMs: 50 } },
      logger,
    });
    try {
      expect(scheduled.relay.isRunning).toBe(true);
      const id = await enqueue('test.order.placed.v1');
      await waitFor(async () => (await effectIds(db, 'billing')).includes(id), {
        message: 'the scheduled relay to deliver',
      });
      expect(failedRounds).toEqual([]);
      // Break the store until rounds have failed twice: the schedule survived a failed round.
      // every form: the one a relay with claim positions calls, the one without, and the one with the floor
      for (const form of FORMS)
        await db.sql(`alter function outbox_due_tenants(${form}) rename to outbox_due_tenants_off`);
      await waitFor(() => failedRounds.filter((m) => m.includes('relay round failed')).length >= 2, {
        message: 'two failed rounds, logged',
      });
      expect(scheduled.relay.isRunning).toBe(true);
      for (const form of FORMS)
        await db.sql(`alter function outbox_due_tenants_off(${form}) rename to outbox_due_tenants`);
      const later = await enqueue('test.order.placed.v1');
      await waitFor(async () => (await effectIds(db, 'billing')).includes(later), {
        message: 'delivery after failed rounds',
      });
    } finally {
      await scheduled.close();
    }
    expect(scheduled.relay.isRunning).toBe(false);
  });
});
