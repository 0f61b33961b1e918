import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect, truncateOutbox } from '../support/outbox-fixture';

/*
 * A batch's handlers run without a savepoint each (ADR 1001): a handler that fails after writing rolls the batch
 * back, and the batch runs again with a savepoint per handler, the failed delivery settled as it failed. The
 * effects are the same as with a savepoint per handler from the start (the policy switched off): each one once, the
 * failing handler's none, one attempt charged.
 */

const EVENT = 'test.optimistic.v1';

/** Two writers per event: `steady` always succeeds; `picky` writes, then throws for the events marked `fail`. */
@Injectable()
class Writers {
  /** Handler calls, by consumer and event. */
  readonly calls = new Map<string, number>();

  private called(consumer: string, eventId: string): void {
    const key = `${consumer}:${eventId}`;
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
  }

  @OnOutboxEvent(EVENT, { consumer: 'steady' })
  async steady(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.called('steady', event.eventId);
    await recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'picky', maxAttempts: 3 })
  async picky(event: OutboxEvent<{ fail: boolean }>, context: OutboxHandlerContext): Promise<void> {
    this.called('picky', event.eventId);
    await recordEffect(event, context);
    if (event.data.fail) throw new Error(`picky refuses ${event.eventId}`);
  }
}

describe.each([
  ['without a savepoint per handler (optimistic, the default)', true],
  ['with a savepoint per handler', false],
])('a batch of writing handlers, %s', (_, optimisticBatches) => {
  let db: TestDatabase;
  let t: TestApp;
  let writers: Writers;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({
      url: db.url,
      providers: [Writers],
      imports: [PolicySwitches.of({ optimisticBatches })],
    });
    writers = t.app.get(Writers);
  });
  afterEach(async () => {
    writers.calls.clear();
    await truncateOutbox(db);
    await db.sql('truncate test_effects');
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const effects = () =>
    db.sql<{ event_id: string; consumer: string; n: number }>(
      `select event_id, consumer, count(*)::int as n from test_effects group by 1, 2 order by 1, 2`,
    );

  it('keeps every succeeding handler’s write once and none of a failing one’s, charging it one attempt', async () => {
    const fail = [false, true, false, false, true, false];
    const ids = await enqueueManyIn(
      t,
      fail.map((f) => ({ eventName: EVENT, payload: { fail: f } })),
    );
    const round = await t.relay.runOnce();
    expect(round).toMatchObject({ eventsClaimed: 6, succeeded: 10, failed: 2 });
    const expected = ids.flatMap((id, i) => [
      ...(fail[i] ? [] : [{ event_id: id, consumer: 'picky', n: 1 }]),
      { event_id: id, consumer: 'steady', n: 1 },
    ]);
    expect(await effects()).toEqual(
      expected.sort((a, b) => (a.event_id + a.consumer).localeCompare(b.event_id + b.consumer)),
    );
    const failing = await db.sql<{ event_id: string; attempts: number; status: string; last_error: string }>(
      `select event_id, attempt_count as attempts, status, last_error from outbox_deliveries
        where consumer_name = 'picky' and status <> 'delivered' order by event_id`,
    );
    expect(failing).toEqual(
      [ids[1]!, ids[4]!].sort().map((id) => ({
        event_id: id,
        attempts: 1,
        status: 'failed',
        last_error: `Error: picky refuses ${id}`,
      })),
    );
    // a failing handler is called once per attempt, however the batch ran
    for (const i of [1, 4]) expect(writers.calls.get(`picky:${ids[i]}`)).toBe(1);
    // optimistic: the handlers before the first failing one (the batch runs event by event) ran again, with
    // savepoints (their first writes were rolled back with the batch); the second failure was rolled back alone
    const again = optimisticBatches ? 2 : 1;
    expect([writers.calls.get(`picky:${ids[0]}`), writers.calls.get(`steady:${ids[0]}`)]).toEqual([
      again,
      again,
    ]);
    expect([writers.calls.get(`steady:${ids[4]}`), writers.calls.get(`steady:${ids[5]}`)]).toEqual([1, 1]);
  });

  it('delivers a batch whose handlers all succeed, calling each once', async () => {
    const ids = await enqueueManyIn(
      t,
      Array.from({ length: 5 }, () => ({ eventName: EVENT, payload: { fail: false } })),
    );
    expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 5, succeeded: 10, failed: 0 });
    expect((await effects()).map((e) => e.n)).toEqual(Array.from({ length: 10 }, () => 1));
    for (const id of ids) {
      expect(writers.calls.get(`steady:${id}`)).toBe(1);
      expect(writers.calls.get(`picky:${id}`)).toBe(1);
    }
  });
});

/**
 * A handler's queries after its batch's first write go out without an await of the library's before them (ADR
 * 1202): two sent together, then one that reads them back, in the same transaction as the other handlers'.
 */
@Injectable()
class SeveralQueries {
  /** What each handler's read-back query returned, by event. */
  readonly seen = new Map<string, number>();

  @OnOutboxEvent(EVENT, { consumer: 'first' })
  async first(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'several' })
  async several(event: OutboxEvent<{ fail: boolean }>, context: OutboxHandlerContext): Promise<void> {
    await Promise.all([recordEffect(event, context), recordEffect(event, context)]);
    const [row] = (await context.manager.query(
      `select count(*)::int as n from test_effects where event_id = $1 and consumer = 'several'`,
      [event.eventId],
    )) as { n: number }[];
    this.seen.set(event.eventId, row!.n);
    if (event.data.fail) throw new Error(`several refuses ${event.eventId}`);
  }
}

describe('a handler that sends several queries in an optimistic batch', () => {
  let db: TestDatabase;
  let t: TestApp;
  let handlers: SeveralQueries;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({ url: db.url, providers: [SeveralQueries] });
    handlers = t.app.get(SeveralQueries);
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('writes each of its rows once, sees them in its transaction, and none of them when it fails', async () => {
    const fail = [false, false, true, false];
    const ids = await enqueueManyIn(
      t,
      fail.map((f) => ({ eventName: EVENT, payload: { fail: f } })),
    );
    expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 4, succeeded: 7, failed: 1 });
    const rows = await db.sql<{ event_id: string; consumer: string; n: number }>(
      `select event_id, consumer, count(*)::int as n from test_effects group by 1, 2`,
    );
    const count = (id: string, consumer: string): number =>
      rows.find((r) => r.event_id === id && r.consumer === consumer)?.n ?? 0;
    ids.forEach((id, i) => {
      expect(count(id, 'first')).toBe(1);
      expect(count(id, 'several')).toBe(fail[i] ? 0 : 2);
      expect(handlers.seen.get(id)).toBe(2);
    });
  });
});
