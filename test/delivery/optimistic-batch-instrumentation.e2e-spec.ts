import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { OutboxInstrumentation } from '../../libs/outbox/src/extension/outbox-instrumentation';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect, truncateOutbox } from '../support/outbox-fixture';

/*
 * ADR 1001: a handler failing after a write reruns its batch; observers (metrics, the board's activity, traces)
 * still see each delivery's attempt end once — the handlers run again are not observed twice — and no batch is
 * reported rolled back for an ordinary handler failure.
 */

const EVENT = 'test.optimistic.instr.v1';

@Injectable()
class Writers {
  @OnOutboxEvent(EVENT, { consumer: 'steady' })
  async steady(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'picky', maxAttempts: 3 })
  async picky(event: OutboxEvent<{ fail: boolean }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if (event.data.fail) throw new Error(`picky refuses ${event.eventId}`);
  }
}

describe.each([
  ['optimistic (default)', true],
  ['with a savepoint per handler', false],
])('observers of a batch with one failing writer, %s', (_, optimisticBatches) => {
  let db: TestDatabase;
  let t: TestApp;
  const ended = new Map<string, number>();
  let rolledBack = 0;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({
      url: db.url,
      providers: [Writers],
      imports: [PolicySwitches.of({ optimisticBatches })],
    });
    t.app.get(OutboxInstrumentation).add({
      batchRolledBack: () => {
        rolledBack++;
      },
      attemptStarted: (delivery, consumer) => ({
        ended: () => {
          const key = `${consumer.name}:${delivery.eventId}`;
          ended.set(key, (ended.get(key) ?? 0) + 1);
        },
      }),
    });
  });
  afterAll(async () => {
    await truncateOutbox(db);
    await t?.close();
    await db?.drop();
  });

  it('sees each attempt end once, and no batch rolled back', async () => {
    await enqueueManyIn(t, [
      { eventName: EVENT, payload: { fail: false } },
      { eventName: EVENT, payload: { fail: true } },
      { eventName: EVENT, payload: { fail: false } },
    ]);
    expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 3, succeeded: 5, failed: 1 });
    const attempts = await db.sql<{ k: string; n: number }>(
      `select consumer_name || ':' || event_id as k, attempt_count as n from outbox_deliveries order by 1`,
    );
    expect(Object.fromEntries([...ended].sort())).toEqual(
      Object.fromEntries(attempts.map((a) => [a.k, a.n])),
    );
    expect(rolledBack).toBe(0);
  });
});
