import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  effectIds,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';
import { steppingClock, TestClock } from '../support/test-clock';

const IN_MEMORY = 'test.growth.memory.v1';
const WRITING = 'test.growth.writing.v1';
const BATCH = 4;
const MAX_BATCH = 16;

/** One consumer that keeps what it saw in memory, one that writes a row through `context.manager`. */
@Injectable()
class GrowthConsumers {
  readonly seen: string[] = [];

  @OnOutboxEvent(IN_MEMORY, { consumer: 'growth-memory' })
  remember(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }

  /** Writes a row, then throws for the events marked `fail`. */
  @OnOutboxEvent(WRITING, { consumer: 'growth-writing' })
  async write(event: OutboxEvent<{ fail?: boolean }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if (event.data.fail) throw new Error('fails after writing');
  }
}

/**
 * `relay.maxBatchSize`: while a tenant's backlog drains through quick batches — handlers that write nothing, or
 * write without a savepoint each (ADR 1001) — each claim takes twice the last, up to the bound; a batch that ran
 * again after a writing handler failed brings claims back to `relay.batchSize`. Each event once either way.
 * Batches are timed by a clock that moves a millisecond per reading: every batch here is quick however loaded the
 * machine (a slow batch's halving is the unit spec's, `claim-sizer.spec.ts`).
 */
describe('claims grow for quick batches (relay.maxBatchSize)', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await truncateOutbox(db, EFFECTS_TABLE);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function start(): Promise<GrowthConsumers> {
    t = await buildApp({
      url: db.url,
      providers: [GrowthConsumers],
      imports: [TestClock.of(steppingClock())],
      // one lane: each round is one claim of the tenant
      outbox: { relay: { batchSize: BATCH, maxBatchSize: MAX_BATCH, concurrency: 1 } },
    });
    return t.app.get(GrowthConsumers);
  }

  function enqueue(eventName: string, count: number, failing = -1): Promise<string[]> {
    const events = Array.from({ length: count }, (_, i) => ({
      tenantId: TENANTS[0],
      eventName,
      payload: { i, fail: i === failing },
    }));
    return enqueueManyIn(t!, events);
  }

  /** Events each round claimed, round after round, until one claims none. */
  async function claimsUntilDrained(): Promise<number[]> {
    const claims: number[] = [];
    for (;;) {
      const { eventsClaimed } = await t!.relay.runOnce();
      if (eventsClaimed === 0) return claims;
      claims.push(eventsClaimed);
    }
  }

  it('doubles the claims of handlers that write nothing, up to relay.maxBatchSize', async () => {
    const consumers = await start();
    const ids = await enqueue(IN_MEMORY, 60);
    expect(await claimsUntilDrained()).toEqual([4, 8, 16, 16, 16]);
    expect([...consumers.seen].sort()).toEqual([...ids].sort());
  });

  it('doubles the claims of a writing handler too (no savepoint per handler)', async () => {
    await start();
    const ids = await enqueue(WRITING, 12);
    expect(await claimsUntilDrained()).toEqual([4, 8]);
    expect((await effectIds(db, 'growth-writing')).sort()).toEqual([...ids].sort());
  });

  it('goes back to relay.batchSize once a batch runs again after a writing handler failed, and grows again after', async () => {
    const consumers = await start();
    const first = await enqueue(IN_MEMORY, 12);
    // claims of 4 and 8 take the first in-memory events, one of 16 the writing ones (one fails: the batch runs
    // again), then 4 and 8 the rest
    const writing = await enqueue(WRITING, 16, 5);
    const last = await enqueue(IN_MEMORY, 12);
    expect(await claimsUntilDrained()).toEqual([4, 8, 16, 4, 8]);
    expect([...consumers.seen].sort()).toEqual([...first, ...last].sort());
    expect((await effectIds(db, 'growth-writing')).sort()).toEqual(writing.filter((_, i) => i !== 5).sort());
  });
});
