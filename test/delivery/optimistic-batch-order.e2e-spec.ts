import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect } from '../support/outbox-fixture';

/*
 * A handler's queries through `context.manager` reach the batch's connection in the order the handler sent them
 * (ADR 1202): one sent before the handler's first query was answered is not overtaken by one sent after it.
 */

const EVENT = 'test.optimistic-order.v1';
const ORDER_TABLE_SQL = `create table test_order (
  id bigint generated always as identity primary key,
  event_id uuid not null,
  label text not null
)`;

@Injectable()
class Ordered {
  @OnOutboxEvent(EVENT, { consumer: 'first' })
  async first(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  /** Sends `a` and `b` together, waits for `a` and `ticks` turns of the microtask queue, then sends `c`. */
  @OnOutboxEvent(EVENT, { consumer: 'ordered' })
  async ordered(
    event: OutboxEvent<{ ticks: number; raw: boolean }>,
    context: OutboxHandlerContext,
  ): Promise<void> {
    const sql = `insert into test_order (event_id, label) values ($1, $2)`;
    // through the manager, or its query runner (what TypeORM's query builders call)
    const insert = (label: string): Promise<unknown> =>
      event.data.raw
        ? context.manager.queryRunner!.query(sql, [event.eventId, label])
        : context.manager.query(sql, [event.eventId, label]);
    const a = insert('a');
    const b = insert('b');
    await a;
    for (let i = 0; i < event.data.ticks; i++) await Promise.resolve();
    await insert('c');
    await b;
  }
}

describe.each([
  ['without a savepoint per handler (optimistic, the default)', true],
  ['with a savepoint per handler', false],
])(
  'a handler that sends a query while another of its queries waits for the opening, %s',
  (_, optimisticBatches) => {
    let db: TestDatabase;
    let t: TestApp;
    beforeAll(async () => {
      db = await createTestDatabase([EFFECTS_TABLE_SQL, ORDER_TABLE_SQL]);
      t = await buildApp({
        url: db.url,
        providers: [Ordered],
        imports: [PolicySwitches.of({ optimisticBatches })],
      });
    });
    afterAll(async () => {
      await t?.close();
      await db?.drop();
    });

    it('has its queries run in the order it sent them', async () => {
      const ticks = Array.from({ length: 12 }, (_, i) => i % 6);
      const ids = await enqueueManyIn(
        t,
        ticks.map((n, i) => ({ eventName: EVENT, payload: { ticks: n, raw: i >= 6 } })),
      );
      expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: ticks.length, failed: 0 });
      const rows = await db.sql<{ event_id: string; labels: string }>(
        `select event_id, string_agg(label, '' order by id) as labels from test_order group by 1`,
      );
      const order = ids.map((id, i) => `${i}:${rows.find((r) => r.event_id === id)?.labels ?? ''}`);
      expect(order).toEqual(ticks.map((_, i) => `${i}:abc`));
    });
  },
);
