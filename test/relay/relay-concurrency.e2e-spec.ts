import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type BuildAppOptions, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { within } from '../support/wait-for';
import {
  effects,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';

const EVENT = 'test.lanes.v1';
const BATCH = 5;
/** Far longer than a batch takes: reached only when the batches do not run side by side. */
const MEET_WITHIN_MS = 5_000;

/**
 * A writing handler (its batch transaction stays open while it runs) that counts the handlers running at once
 * (from its start, so its wait for its write counts).
 * While `waitFor` is above one, the first handler waits until that many run — they can only meet when batches
 * run side by side — or until MEET_WITHIN_MS; once they met, no handler waits again.
 */
@Injectable()
class MeetingHandlers {
  waitFor = 1;
  running = 0;
  mostAtOnce = 0;
  met = false;
  private readonly waiting: (() => void)[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'lanes' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.running++;
    this.mostAtOnce = Math.max(this.mostAtOnce, this.running);
    try {
      await recordEffect(event, context);
      if (this.met || this.running >= this.waitFor) {
        this.met = this.waitFor > 1;
        for (const wake of this.waiting.splice(0)) wake();
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, MEET_WITHIN_MS);
        this.waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    } finally {
      this.running--;
    }
  }
}

/**
 * `relay.concurrency`: a relay runs that many batches at once, each in its own transaction — several tenants side
 * by side, and a tenant with a backlog in several batches — and every event still reaches its consumer once.
 */
describe('batches side by side (relay.concurrency)', () => {
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

  async function start(options: Partial<BuildAppOptions> = {}): Promise<MeetingHandlers> {
    t = await buildApp({
      url: db.url,
      providers: [MeetingHandlers],
      ...options,
      // claims stay at BATCH (no growth, which a quick writing batch gets too): a backlog needs several batches
      outbox: {
        ...options.outbox,
        relay: { batchSize: BATCH, maxBatchSize: BATCH, ...options.outbox?.relay },
      },
    });
    return t.app.get(MeetingHandlers);
  }

  async function enqueue(tenantId: string, count: number): Promise<string[]> {
    const events = Array.from({ length: count }, (_, i) => ({ tenantId, eventName: EVENT, payload: { i } }));
    return enqueueManyIn(t!, events);
  }

  /** Every event has exactly one effect, and none is left unsettled. */
  async function expectEachOnce(ids: readonly string[]): Promise<void> {
    expect((await effects(db)).map((e) => e.event_id).sort()).toEqual([...ids].sort());
    const [open] = await db.sql<{ n: number }>(
      `select count(*)::int as n from event_outbox where status <> 'published'`,
    );
    expect(open!.n).toBe(0);
  }

  it("runs a backlogged tenant's batches side by side, by default, each event once", async () => {
    const handlers = await start();
    const ids = await enqueue(TENANTS[0], 3 * BATCH);
    // the first batch comes back full: the next round knows the tenant has a backlog
    await expect(t!.relay.runOnce()).resolves.toMatchObject({ eventsClaimed: BATCH });
    handlers.waitFor = 2;
    const round = await within(3 * MEET_WITHIN_MS, t!.relay.drain(), 'drain()');
    expect(round).toMatchObject({ eventsClaimed: 2 * BATCH, succeeded: 2 * BATCH, dead: 0, leaseLost: 0 });
    expect(handlers.met).toBe(true);
    expect(handlers.mostAtOnce).toBe(2);
    await expectEachOnce(ids);
  });

  it('visits two tenants side by side', async () => {
    const handlers = await start({ outbox: { relay: { concurrency: 2 } } });
    handlers.waitFor = 2;
    const ids = [...(await enqueue(TENANTS[1], 2)), ...(await enqueue(TENANTS[2], 2))];
    const round = await within(3 * MEET_WITHIN_MS, t!.relay.drain(), 'drain()');
    expect(round).toMatchObject({ succeeded: 4, dead: 0 });
    expect(handlers.met).toBe(true);
    await expectEachOnce(ids);
  });

  it('runs one batch at a time with concurrency 1', async () => {
    const handlers = await start({ outbox: { relay: { concurrency: 1 } } });
    const ids = [...(await enqueue(TENANTS[0], 4 * BATCH)), ...(await enqueue(TENANTS[1], 2))];
    await t!.relay.runOnce();
    await t!.relay.drain();
    expect(handlers.mostAtOnce).toBe(1);
    await expectEachOnce(ids);
  });

  it("runs one batch at a time by default when the DataSource's pool has fewer than 8 connections", async () => {
    const handlers = await start({ poolSize: 7 });
    const ids = [...(await enqueue(TENANTS[0], 4 * BATCH)), ...(await enqueue(TENANTS[1], 2))];
    await t!.relay.runOnce();
    await t!.relay.drain();
    expect(handlers.mostAtOnce).toBe(1);
    await expectEachOnce(ids);
  });
});
