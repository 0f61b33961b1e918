import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  deliveryOf,
  EFFECTS_TABLE_SQL,
  effects,
  enqueueIn,
  enqueueManyIn,
  eventOf,
  recordEffect,
  truncateOutbox,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import { PolicySwitches } from '../support/policy-switches';

/** One handler call: the event, the attempt it was told, and the database's clock when it ran. */
interface Call {
  eventId: string;
  attempt: number;
  at: Date;
}

/**
 * Consumers that write an effect, then snooze while `plan` says so for the event's `payload.key` (set before the
 * event is enqueued, so a running relay never sees it without): `times` more snoozes of `ms`.
 * Each reads the database's clock first, so the specs measure the delay as the database sees it.
 */
@Injectable()
class SnoozeConsumers {
  readonly plan = new Map<string, { times: number; ms: number }>();
  readonly calls = new Map<string, Call[]>();

  @OnOutboxEvent('test.snooze.plain.v1', {
    consumer: 'snoozer',
    maxSnoozes: 2,
    maxAttempts: 2,
    backoff: { baseMs: 1, capMs: 10, jitter: 0 },
  })
  snoozer(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.handle(event, context);
  }

  @OnOutboxEvent('test.snooze.ordered.v1', { consumer: 'ordered', ordered: true })
  ordered(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.handle(event, context);
  }

  private async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    const [{ at }] = (await context.manager.query('select clock_timestamp() as at')) as { at: Date }[];
    const calls = this.calls.get(context.consumer) ?? [];
    calls.push({ eventId: event.eventId, attempt: context.attempt, at });
    this.calls.set(context.consumer, calls);
    await recordEffect(event, context);
    const plan = this.plan.get((event.data as { key?: string }).key ?? '');
    if (plan && plan.times > 0) {
      plan.times--;
      return context.retryAfter(plan.ms);
    }
  }
}

let db: TestDatabase;
let t: TestApp | undefined;
let consumers: SnoozeConsumers;

async function start(relay: boolean, savepoints = false): Promise<TestApp> {
  t = await buildApp({
    url: db.url,
    providers: [SnoozeConsumers],
    imports: savepoints ? [PolicySwitches.of({ optimisticBatches: false })] : [],
    outbox: relay ? { relay: { enabled: true, pollIntervalMs: 50 } } : undefined,
  });
  consumers = t.app.get(SnoozeConsumers);
  await t.relay.heartbeat();
  return t;
}

const callsOf = (consumer: string): Call[] => consumers.calls.get(consumer) ?? [];

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
});
afterAll(async () => {
  await db?.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, 'test_effects');
});
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('a handler that snoozes (context.retryAfter)', () => {
  it('is called again no sooner than the delay later by the database clock, with no attempt charged and its writes rolled back', async () => {
    const app = await start(true);
    consumers.plan.set('once', { times: 1, ms: 1500 });
    const id = await enqueueIn(app, { eventName: 'test.snooze.plain.v1', payload: { key: 'once' } });

    await waitFor(() => callsOf('snoozer').length === 1, { message: 'the first call' });
    const waiting = await waitFor(
      async () => {
        const row = await deliveryOf(db, id, 'snoozer');
        return row?.status === 'pending' ? row : null;
      },
      { message: 'the snoozed delivery row' },
    );
    // given back: no attempt charged, one snooze counted, due after the delay
    expect(waiting).toMatchObject({ attempt_count: 0, snoozes: 1, error_code: 'snoozed' });
    const first = callsOf('snoozer')[0]!;
    expect((waiting.next_attempt_at as Date).getTime() - first.at.getTime()).toBeGreaterThanOrEqual(1500);

    const done = await waitFor(
      async () => {
        const row = await deliveryOf(db, id, 'snoozer');
        return row?.status === 'delivered' ? row : null;
      },
      { message: 'the delivery after the snooze' },
    );
    const calls = callsOf('snoozer');
    expect(calls.map((c) => c.attempt)).toEqual([1, 1]);
    expect(calls[1]!.at.getTime() - calls[0]!.at.getTime()).toBeGreaterThanOrEqual(1500);
    expect(done).toMatchObject({ attempt_count: 1, snoozes: 1 });
    // the snoozing call's effect was rolled back; the second call's committed
    expect(await effects(db, 'snoozer')).toEqual([{ event_id: id, consumer: 'snoozer', attempt: 1 }]);
    expect((await eventOf(db, id))!.status).toBe('published');
  });

  it.each([
    ['sharing the batch transaction (optimistic)', false],
    ['with a savepoint per handler', true],
  ])('rolls back only the snoozing handler in a batch %s: the others commit once', async (_, savepoints) => {
    const app = await start(false, savepoints);
    consumers.plan.set('later', { times: 1, ms: 60_000 });
    const [snoozing, plain] = await enqueueManyIn(app, [
      { eventName: 'test.snooze.plain.v1', payload: { key: 'later' } },
      { eventName: 'test.snooze.plain.v1', payload: { key: 'now' } },
    ]);
    await app.relay.drain();
    expect(await effects(db, 'snoozer')).toEqual([{ event_id: plain, consumer: 'snoozer', attempt: 1 }]);
    expect(await deliveryOf(db, snoozing!, 'snoozer')).toMatchObject({
      status: 'pending',
      attempt_count: 0,
      snoozes: 1,
    });
    expect(await deliveryOf(db, plain!, 'snoozer')).toMatchObject({ status: 'delivered', attempt_count: 1 });
    // called once: the snooze is kept when the batch runs again
    expect(callsOf('snoozer').filter((c) => c.eventId === snoozing)).toHaveLength(1);
  });

  it('charges a snooze past maxSnoozes as a failed attempt, so a handler that snoozes for ever ends dead', async () => {
    const app = await start(false);
    consumers.plan.set('always', { times: Number.POSITIVE_INFINITY, ms: 0 });
    const id = await enqueueIn(app, { eventName: 'test.snooze.plain.v1', payload: { key: 'always' } });

    await waitFor(
      async () => {
        await app.relay.drain();
        return (await deliveryOf(db, id, 'snoozer'))?.status === 'dead';
      },
      { message: 'the delivery to go dead' },
    );
    // maxSnoozes 2 uncharged, then each snooze charged: attempts 1 and 2 (maxAttempts 2)
    expect(callsOf('snoozer').map((c) => c.attempt)).toEqual([1, 1, 1, 2]);
    expect(await deliveryOf(db, id, 'snoozer')).toMatchObject({
      attempt_count: 2,
      snoozes: 2,
      error_code: 'snoozeLimit',
    });
    expect((await eventOf(db, id))!.status).toBe('failed');
    expect(await effects(db, 'snoozer')).toEqual([]);
  });

  it('fails the attempt, naming the consumer and the value, when the delay is not a number of ms from 0 to a day', async () => {
    const app = await start(false);
    consumers.plan.set('bad', { times: 1, ms: -5 });
    const id = await enqueueIn(app, { eventName: 'test.snooze.plain.v1', payload: { key: 'bad' } });
    await app.relay.drain();
    // charged (the retry that followed is attempt 2), and the row keeps the error seen
    expect(callsOf('snoozer').map((c) => c.attempt)).toEqual([1, 2]);
    const row = (await deliveryOf(db, id, 'snoozer'))!;
    expect(row).toMatchObject({
      status: 'delivered',
      attempt_count: 2,
      snoozes: 0,
      error_code: 'handlerError',
    });
    expect(row.last_error).toMatch(/snoozer.*retryAfter\(-5\)/);
  });

  it('holds back the later events of its aggregate for an ordered consumer, as a retry does', async () => {
    const app = await start(true);
    consumers.plan.set('first', { times: 1, ms: 1000 });
    const [first, second] = await enqueueManyIn(app, [
      {
        eventName: 'test.snooze.ordered.v1',
        aggregateType: 'order',
        aggregateId: 'A',
        payload: { key: 'first' },
      },
      {
        eventName: 'test.snooze.ordered.v1',
        aggregateType: 'order',
        aggregateId: 'A',
        payload: { key: 'second' },
      },
    ]);

    await waitFor(
      async () =>
        (await deliveryOf(db, first!, 'ordered'))?.status === 'delivered' &&
        (await deliveryOf(db, second!, 'ordered'))?.status === 'delivered',
      { message: 'both events delivered' },
    );
    const calls = callsOf('ordered');
    expect(calls.map((c) => c.eventId)).toEqual([first, first, second]);
    // the second event waited for the first one's snooze
    expect(calls[2]!.at.getTime() - calls[0]!.at.getTime()).toBeGreaterThanOrEqual(1000);
    expect((await effects(db, 'ordered')).map((e) => e.event_id)).toEqual([first, second]);
    expect((await deliveryOf(db, second!, 'ordered'))!.snoozes).toBe(0);
  });
});
