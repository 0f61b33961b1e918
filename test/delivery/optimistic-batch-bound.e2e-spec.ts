import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, truncateOutbox } from '../support/outbox-fixture';

/*
 * ADR 1001: without a per-handler context, a handler's statements run under the bound in force unless it is more
 * than 50 ms away from the handler's time left, in either direction: a bound an earlier handler left near its own
 * deadline (or a consumer with a shorter timeout) must not cancel a later handler's query that has seconds left.
 */

const EVENT = 'test.optimistic.bound.v1';
const TIMEOUT_MS = 2_000;
const SHORT = 'test.optimistic.bound.short.v1';
const LONG = 'test.optimistic.bound.long.v1';

@Injectable()
class Handlers {
  @OnOutboxEvent(EVENT, { consumer: 'timed', timeoutMs: TIMEOUT_MS, maxAttempts: 3 })
  async timed(event: OutboxEvent<{ late: boolean }>, context: OutboxHandlerContext): Promise<void> {
    if (event.data.late) {
      // a handler that succeeds close to its deadline: its query is bounded by the ~200 ms it has left
      await new Promise((r) => setTimeout(r, TIMEOUT_MS - 200));
      await context.manager.query('select 1');
    } else {
      // 400 ms of a 2 s timeout: well within it
      await context.manager.query('select pg_sleep(0.4)');
    }
  }

  /** A quick consumer with a short timeout, then a slower one with a long timeout (on a later event). */
  @OnOutboxEvent(SHORT, { consumer: 'short', timeoutMs: 300, maxAttempts: 3 })
  async short(_: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select 1');
  }

  @OnOutboxEvent(LONG, { consumer: 'long', timeoutMs: 10_000, maxAttempts: 3 })
  async long(_: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select pg_sleep(1)');
  }
}

describe.each([
  ['optimistic (default)', true],
  ['with a savepoint per handler', false],
])('a handler after one that queried near its deadline, %s', (_, optimisticBatches) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([]);
    t = await buildApp({
      url: db.url,
      providers: [Handlers],
      imports: [PolicySwitches.of({ optimisticBatches })],
    });
  });
  afterEach(async () => {
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('is not cancelled by the bound the earlier handler left', async () => {
    await enqueueManyIn(t, [
      { eventName: EVENT, payload: { late: true } },
      { eventName: EVENT, payload: { late: false } },
    ]);
    const round = await t.relay.runOnce();
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2, failed: 0 });
    expect(await db.sql(`select distinct status from outbox_deliveries`)).toEqual([{ status: 'delivered' }]);
  });

  it('runs a 1 s query of a consumer with a 10 s timeout after one with a 300 ms timeout', async () => {
    await enqueueManyIn(t, [
      { eventName: SHORT, payload: {} },
      { eventName: LONG, payload: {} },
    ]);
    const round = await t.relay.runOnce();
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2, failed: 0 });
    expect(await db.sql(`select distinct status from outbox_deliveries`)).toEqual([{ status: 'delivered' }]);
  });
});
