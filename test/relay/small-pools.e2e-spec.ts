import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  effects,
  enqueueIn,
  recordEffect,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';
import { within } from '../support/wait-for';

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
    await truncateOutbox(db, EFFECTS_TABLE);
  });

  const enqueue = (tenantId: string) => enqueueIn(t, { tenantId, eventName: 'test.pool.v1' });

  it('returns from runOnce() when a batch’s fenced commit fails (lease lost)', async () => {
    await enqueue(TENANTS[0]);
    const round = await within(10_000, t.relay.runOnce(), 'runOnce()');
    expect(round).toMatchObject({ succeeded: 0, leaseLost: 1 });
    expect(await effects(db)).toEqual([]);
  });

  it('returns from drain() over several tenants when their fenced commits fail', async () => {
    for (const tenant of TENANTS) await enqueue(tenant);
    const drained = await within(10_000, t.relay.drain(), 'drain()');
    expect(drained).toMatchObject({ succeeded: 0, leaseLost: 3 });
    expect(await effects(db)).toEqual([]);
  });
});
