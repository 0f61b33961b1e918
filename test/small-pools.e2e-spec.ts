import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { EFFECTS_TABLE_SQL, recordEffect } from './support/effects';

const TENANTS = [
  '51000000-0000-4000-8000-000000000001',
  '52000000-0000-4000-8000-000000000002',
  '53000000-0000-4000-8000-000000000003',
];

/** A stand-in for another relay: takes the lease of the event being handled away, so the fenced commit fails (OB001). */
@Injectable()
class LeaseThief {
  constructor(private readonly db: { sql: TestDatabase['sql'] }) {}

  @OnOutboxEvent('test.pool.v1', { consumer: 'robbed' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if (context.attempt === 1) {
      await this.db.sql(
        'update outbox_event_leases set lease_token = gen_random_uuid() where event_id = $1',
        [event.eventId],
      );
    }
  }
}

/** Rejects when `work` has not settled within `ms`: a hang fails the test instead of timing it out. */
function within<T>(ms: number, work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not return within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A relay DataSource with a pool of one or two connections: a failed fenced commit is recorded on the
 * connection the batch already holds, never on a second one the pool cannot give.
 */
describe.each([1, 2])('a relay whose pool holds %i connection(s)', (poolSize) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({
      url: db.url,
      poolSize,
      providers: [{ provide: LeaseThief, useFactory: () => new LeaseThief(db) }],
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await db.sql(
      'truncate event_outbox, outbox_deliveries, outbox_event_leases, consumer_inbox, test_effects',
    );
  });

  const enqueue = (tenantId: string) =>
    t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId, eventName: 'test.pool.v1', payload: {} }),
    );

  it('returns from runOnce() when a batch’s fenced commit fails (lease lost)', async () => {
    await enqueue(TENANTS[0]!);
    const round = await within(10_000, t.relay.runOnce(), 'runOnce()');
    expect(round).toMatchObject({ succeeded: 0, leaseLost: 1 });
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 0 }]);
  });

  it('returns from drain() over several tenants when their fenced commits fail', async () => {
    for (const tenant of TENANTS) await enqueue(tenant);
    const drained = await within(10_000, t.relay.drain(), 'drain()');
    expect(drained).toMatchObject({ succeeded: 0, leaseLost: 3 });
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 0 }]);
  });
});
