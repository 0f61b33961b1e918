import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect } from '../support/outbox-fixture';

const EVENT = 'test.txctl.v1';

/** What `b-hostile` does through `context.manager` after writing its effect. */
const HOSTILE: Record<string, (context: OutboxHandlerContext) => Promise<unknown>> = {
  'raw commit': (c) => c.manager.query('commit'),
  'raw rollback': (c) => c.manager.query('rollback'),
  'raw begin': (c) => c.manager.query('begin'),
  'commit after a write': (c) => c.manager.query(`select 1; commit`),
  'end, swallowed': (c) => c.manager.query('end').catch(() => undefined),
  'queryRunner.commitTransaction()': (c) => c.manager.queryRunner!.commitTransaction(),
  'queryRunner.rollbackTransaction()': (c) => c.manager.queryRunner!.rollbackTransaction(),
  'queryRunner.startTransaction() left open': (c) => c.manager.queryRunner!.startTransaction(),
  'queryRunner.release()': (c) => c.manager.queryRunner!.release(),
  'release of the relay’s savepoint': (c) => c.manager.query('release savepoint outbox_h1'),
  // it would check (and spend) the relay's seal before the commit
  'set constraints all immediate': (c) => c.manager.query('set constraints all immediate'),
  // past the relay's guard of `context.manager`: the pg client under its query runner
  'commit through the driver': (c) => driverClient(c).query('commit'),
  'rollback through the driver': (c) => driverClient(c).query('rollback'),
};

/** The pg client of the batch's connection, as a handler can reach it under its `context.manager`. */
function driverClient(context: OutboxHandlerContext): { query(text: string): Promise<unknown> } {
  const runner = context.manager.queryRunner as unknown as {
    databaseConnection: { query(text: string): Promise<unknown> };
  };
  return runner.databaseConnection;
}

/** Per event, in name order: a healthy consumer, the hostile one, and another healthy one after it. */
@Injectable()
class ControlFreaks {
  @OnOutboxEvent(EVENT, { consumer: 'a-healthy' })
  before(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'b-hostile', maxAttempts: 1 })
  async hostile(event: OutboxEvent<{ kind: string }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    const act = HOSTILE[event.data.kind];
    if (act) await act(context);
    else if (event.data.kind === 'nested transaction') {
      // allowed: a savepoint of its own
      await context.manager.transaction((inner) =>
        inner.query(`insert into test_effects (event_id, consumer, attempt) values ($1, 'b-nested', 1)`, [
          event.eventId,
        ]),
      );
    } else if (event.data.kind === 'nested transaction rolled back') {
      await context.manager
        .transaction(async (inner) => {
          await inner.query(
            `insert into test_effects (event_id, consumer, attempt) values ($1, 'b-undone', 1)`,
            [event.eventId],
          );
          throw new Error('undo the nested transaction');
        })
        .catch(() => undefined);
    } else if (event.data.kind === 'do block') {
      await context.manager.query(`do $$ begin perform 1; end $$`);
    }
  }

  @OnOutboxEvent(EVENT, { consumer: 'c-after' })
  after(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/**
 * The batch transaction is the relay's: a handler that commits, rolls back, begins or releases it through
 * `context.manager` is refused, alone, with an error naming it; the other handlers' effects land once, and
 * outcomes are recorded only with them. Connected as the owner of the tables (the single-tenant set-up), for
 * which row-level security does not hide a rolled-back batch's rows.
 */
describe('a handler that tries to control the batch transaction', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({ url: db.url, providers: [ControlFreaks] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('is refused with an error naming it; every other effect lands exactly once, and only with its outcome', async () => {
    const kinds = [
      ...Object.keys(HOSTILE),
      'nested transaction',
      'nested transaction rolled back',
      'do block',
    ];
    const ids = await enqueueManyIn(
      t,
      kinds.map((kind) => ({ eventName: EVENT, payload: { kind } })),
    );
    await t.relay.drain();
    const effects = await db.sql<{ event_id: string; consumer: string; n: number }>(
      'select event_id, consumer, count(*)::int as n from test_effects group by 1, 2',
    );
    const effect = (id: string, consumer: string): number =>
      effects.find((e) => e.event_id === id && e.consumer === consumer)?.n ?? 0;
    const rows = await db.sql<{
      event_id: string;
      consumer_name: string;
      status: string;
      last_error: string;
    }>('select event_id, consumer_name, status, last_error from outbox_deliveries');
    const row = (id: string, consumer: string) =>
      rows.find((r) => r.event_id === id && r.consumer_name === consumer);
    const inbox = await db.sql<{ event_id: string; consumer_name: string }>(
      'select event_id, consumer_name from consumer_inbox',
    );
    kinds.forEach((kind, i) => {
      const id = ids[i]!;
      const refused = kind in HOSTILE;
      const seen = {
        kind,
        healthy: [
          effect(id, 'a-healthy'),
          effect(id, 'c-after'),
          row(id, 'a-healthy')?.status,
          row(id, 'c-after')?.status,
        ],
        hostile: [effect(id, 'b-hostile'), row(id, 'b-hostile')?.status],
      };
      expect(seen).toEqual({
        kind,
        healthy: [1, 1, 'delivered', 'delivered'],
        hostile: refused ? [0, 'dead'] : [1, 'delivered'],
      });
      if (refused) {
        expect(row(id, 'b-hostile')!.last_error).toMatch(/b-hostile/);
        expect(row(id, 'b-hostile')!.last_error).toMatch(/transaction|release/);
        expect(row(id, 'b-hostile')!.last_error).not.toMatch(/can only be used in transaction blocks/);
      }
    });
    // every delivered row has its inbox row, and every effect its delivered row
    const delivered = rows.filter((r) => r.status === 'delivered');
    expect(inbox.length).toBe(delivered.length);
    expect(effect(ids[kinds.indexOf('nested transaction')]!, 'b-nested')).toBe(1);
    expect(effects.filter((e) => e.consumer === 'b-undone')).toEqual([]);
  });
});
