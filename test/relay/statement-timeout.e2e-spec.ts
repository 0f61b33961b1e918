import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  truncateOutbox,
} from '../support/outbox-fixture';

const EVENT = 'test.bounded.v1';

@Injectable()
class Recorder {
  @OnOutboxEvent(EVENT, { consumer: 'recorder' })
  handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/**
 * Claims made slow on purpose: a trigger sleeps 20 ms per event lease a claim inserts, so a claim's time grows
 * with its batch.
 */
const SLOW_CLAIMS_SQL = [
  EFFECTS_TABLE_SQL,
  `create function test_slow_lease() returns trigger language plpgsql as $$
     begin perform pg_sleep(0.02); return new; end $$`,
  `create trigger test_slow_lease before insert on public.outbox_event_leases
     for each row execute function test_slow_lease()`,
];

describe('a statement_timeout shorter than a claim', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let producer: TestApp;
  let worker: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(SLOW_CLAIMS_SQL);
    relayRole = await createLoginRole(db, 'outbox_relay', [
      EFFECTS_GRANT,
      // the database's own bound for this role's statements, shorter than a claim of the batches below
      `alter role $ROLE in database ${db.name} set statement_timeout = '200ms'`,
    ]);
    producer = await buildApp({ url: db.url });
  });
  afterEach(async () => {
    await worker?.close();
    worker = undefined;
    await truncateOutbox(db, EFFECTS_TABLE);
  });
  afterAll(async () => {
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });

  const enqueue = (count: number): Promise<string[]> =>
    enqueueManyIn(
      producer,
      Array.from({ length: count }, (_, i) => ({ eventName: EVENT, payload: { i } })),
    );

  const delivered = async (): Promise<number> =>
    (
      await db.sql<{ n: number }>(
        `select count(*)::int as n from outbox_deliveries where status = 'delivered'`,
      )
    )[0]!.n;

  it('does not stop the relay: its own transactions carry their own bound (relay.leaseMs)', async () => {
    worker = await buildApp({
      url: relayRole.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 10_000, relay: { leaseMs: 20_000 } },
    });
    const [row] = await worker.dataSource.query(`select current_setting('statement_timeout') as timeout`);
    expect(row.timeout).toBe('200ms');
    await enqueue(30);
    await worker.relay.drain();
    expect(await delivered()).toBe(30);
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 30 }]);
  });

  it('shrinks a claim that outlives its own bound, and delivers every event', async () => {
    // a claim of 100 events takes about 2 s here: over the bound of 1 s, which one of 25 stays under
    worker = await buildApp({
      url: relayRole.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 500, relay: { leaseMs: 1000 } },
    });
    await enqueue(100);
    for (let round = 0; round < 20 && (await delivered()) < 100; round++) await worker.relay.drain();
    expect(await delivered()).toBe(100);
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 100 }]);
  });
});
