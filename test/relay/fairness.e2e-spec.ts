import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';
import { enqueueIn, enqueueManyIn, truncateOutbox } from '../support/outbox-fixture';

const BUSY = '44444444-4444-4444-8444-444444444444';
const QUIET = '55555555-5555-4555-8555-555555555555';

@Injectable()
class TenantCounter {
  readonly seen = new Map<string, number>();
  @OnOutboxEvent('test.tick.v1', { consumer: 'counter' })
  count(event: OutboxEvent): void {
    this.seen.set(event.tenantId, (this.seen.get(event.tenantId) ?? 0) + 1);
  }
}

/** Counts each tenant's events, and the busy tenant's count when each quiet tenant's event was handled. */
@Injectable()
class ShareCounter {
  readonly seen = new Map<string, number>();
  /** Event id of each quiet tenant's event → the busy tenant's events handled before it. */
  readonly busyBefore = new Map<string, number>();
  @OnOutboxEvent('test.tick.v1', { consumer: 'share-counter' })
  count(event: OutboxEvent): void {
    this.seen.set(event.tenantId, (this.seen.get(event.tenantId) ?? 0) + 1);
    if (event.tenantId === QUIET) this.busyBefore.set(event.eventId, this.seen.get(BUSY) ?? 0);
  }
}

/** Inserts `count` pending events of `tenantId` behind the library's back (no wake-up names it). */
async function backlog(db: TestDatabase, tenantId: string, count: number): Promise<void> {
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload)
     select gen_random_uuid(), $1, 'test.tick.v1', jsonb_build_object('n', n) from generate_series(1, $2::int) n`,
    [tenantId, count],
  );
}

describe('fairness between tenants', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    // claims of 100 that do not grow (relay.maxBatchSize): the counts below are of batches
    t = await buildApp({
      url: db.url,
      providers: [TenantCounter],
      outbox: { relay: { batchSize: 100, maxBatchSize: 100 } },
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it("delivers a quiet tenant's single event within two rounds despite another tenant's 100,000-event backlog", async () => {
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, 'test.tick.v1', jsonb_build_object('n', n) from generate_series(1, 100000) n`,
      [BUSY],
    );
    const quietId = await enqueueIn(t, { tenantId: QUIET, eventName: 'test.tick.v1' });
    const counter = t.app.get(TenantCounter);
    const rounds = [await t.relay.runOnce()];
    if (!counter.seen.get(QUIET)) rounds.push(await t.relay.runOnce());
    expect(counter.seen.get(QUIET)).toBe(1);
    expect(await db.sql('select status from event_outbox where id = $1', [quietId])).toEqual([
      { status: 'published' },
    ]);
    // The busy tenant was served too, one batch per round.
    expect(counter.seen.get(BUSY)).toBe(100 * rounds.length);
    expect(rounds[0]!.tenants).toBe(2);
  });

  it('finds a tenant that gets its first event while the relay goes straight back to a busy tenant', async () => {
    // While a tenant's batches come back full, rounds return to it without scanning for due tenants; a scan
    // still runs at least every 100 ms, so the quiet tenant's event is delivered long before the backlog ends.
    await truncateOutbox(db);
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, 'test.tick.v1', jsonb_build_object('n', n) from generate_series(1, 30000) n`,
      [BUSY],
    );
    const counter = t.app.get(TenantCounter);
    counter.seen.clear();
    await t.relay.runOnce();
    // one batch, or one per lane (relay.concurrency) when the last round left the tenant with a backlog; a second
    // lane's claim may come back short (it skips the rows the first lane's claim holds), so not all of the backlog
    const busyAfterRound = counter.seen.get(BUSY)!;
    expect(busyAfterRound).toBeGreaterThanOrEqual(100);
    expect(busyAfterRound).toBeLessThanOrEqual(200);
    const draining = t.relay.drain();
    // Written behind the library's back: no wake-up names the quiet tenant, only a scan can find it.
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, 'test.tick.v1', '{}')`,
      [QUIET],
    );
    await waitFor(async () => counter.seen.get(QUIET) === 1, {
      timeoutMs: 60_000,
      message: "the quiet tenant's event to be delivered",
    });
    const busyWhenQuietDelivered = counter.seen.get(BUSY)!;
    await draining;
    expect(counter.seen.get(BUSY)).toBe(30000);
    expect(busyWhenQuietDelivered).toBeLessThan(30000 / 2);
  });

  it('visits only the tenants the app supplies when relay.tenants is set', async () => {
    await truncateOutbox(db);
    const supplied = await buildApp({
      url: db.url,
      providers: [TenantCounter],
      outbox: { relay: { tenants: async () => [QUIET, 'not-a-uuid'] } },
    });
    try {
      await enqueueManyIn(
        supplied,
        [BUSY, QUIET].map((tenantId) => ({ tenantId, eventName: 'test.tick.v1' })),
      );
      const round = await supplied.relay.drain();
      expect(round.tenants).toBeGreaterThanOrEqual(1);
      expect(supplied.app.get(TenantCounter).seen).toEqual(new Map([[QUIET, 1]]));
      expect(await db.sql(`select tenant_id from event_outbox where status = 'pending'`)).toEqual([
        { tenant_id: BUSY },
      ]);
    } finally {
      await supplied.close();
    }
  });

  it('serves the tenants wake-ups named before it scans for other due tenants', async () => {
    // One tenant per scan makes every scan incomplete, so each round scans again; the tenant whose batch came
    // back full (a hint, as a wake-up naming it would be) is claimed before that scan, not after it.
    const named = await buildApp({
      url: db.url,
      providers: [TenantCounter],
      // one batch at a time, of 2: the counts below are of one visit per tenant and round
      outbox: { relay: { batchSize: 2, maxBatchSize: 2, maxTenantsPerRound: 1, concurrency: 1 } },
    });
    const [first, second] = ['88888881-8888-4888-8888-888888888888', '88888882-8888-4888-8888-888888888888'];
    try {
      await truncateOutbox(db);
      await enqueueManyIn(named, [
        ...Array.from({ length: 5 }, () => ({ tenantId: first, eventName: 'test.tick.v1' })),
        { tenantId: second, eventName: 'test.tick.v1' },
      ]);
      const counter = named.app.get(TenantCounter);
      counter.seen.clear();
      expect((await named.relay.runOnce()).tenants).toBe(1); // the scan lists the first tenant only
      // the first tenant, hinted, and the second, from the scan (relay-statements pins that the claim does not wait for it)
      expect((await named.relay.runOnce()).tenants).toBe(2);
      expect(counter.seen).toEqual(
        new Map([
          [first, 4],
          [second, 1],
        ]),
      );
    } finally {
      await named.close();
    }
  });

  it('visits every due tenant in turn when there are more than a round allows', async () => {
    const small = await buildApp({
      url: db.url,
      providers: [TenantCounter],
      outbox: { relay: { batchSize: 10, maxTenantsPerRound: 2 } },
    });
    try {
      await truncateOutbox(db);
      const tenants = Array.from({ length: 5 }, (_, i) => `6666666${i}-6666-4666-8666-666666666666`);
      await enqueueManyIn(
        small,
        tenants.flatMap((tenantId) =>
          Array.from({ length: 30 }, () => ({ tenantId, eventName: 'test.tick.v1' })),
        ),
      );
      const counter = small.app.get(TenantCounter);
      for (let round = 0; round < 3; round++) await small.relay.runOnce();
      // 3 rounds × 2 tenants = 6 visits over 5 tenants: everyone had a batch.
      for (const tenant of tenants) expect(counter.seen.get(tenant)).toBeGreaterThanOrEqual(10);
    } finally {
      await small.close();
    }
  });

  it("handles another tenant's new events within one batch per lane while a backlog drains", async () => {
    await truncateOutbox(db);
    const maxBatchSize = 200;
    const running = await buildApp({
      url: db.url,
      providers: [ShareCounter],
      // two lanes; the busy tenant's claims grow from 50 to 200 while it has the relay to itself
      outbox: { relay: { enabled: true, batchSize: 50, maxBatchSize, concurrency: 2 } },
    });
    try {
      const counter = running.app.get(ShareCounter);
      await backlog(db, BUSY, 20_000);
      running.relay.wake();
      await waitFor(async () => (counter.seen.get(BUSY) ?? 0) >= 2000, {
        timeoutMs: 60_000,
        message: 'the backlog to be draining',
      });
      const waited: number[] = [];
      for (let i = 0; i < 10; i++) {
        const id = await enqueueIn(running, { tenantId: QUIET, eventName: 'test.tick.v1' });
        const busyAtCommit = counter.seen.get(BUSY)!;
        await waitFor(async () => counter.busyBefore.has(id), {
          timeoutMs: 30_000,
          message: "the quiet tenant's event to be handled",
        });
        waited.push(counter.busyBefore.get(id)! - busyAtCommit);
      }
      // each waited for the busy tenant's batches in flight when it committed at most: one per lane
      // The first waited for the busy tenant's batches in flight when it committed at most, one per lane; then
      // the busy tenant leaves a lane free, and each waits for one batch at most (two lanes, fair shares off:
      // 400 to 600 each, measured)
      expect(waited[0]).toBeLessThanOrEqual(2 * maxBatchSize);
      expect(Math.max(...waited.slice(1))).toBeLessThanOrEqual(maxBatchSize);
      expect(counter.seen.get(BUSY)).toBeLessThan(20_000);
    } finally {
      await running.close();
    }
    expect(running.relay.isRunning).toBe(false);
  });

  it('drains two backlogged tenants in the ratio of their weights', async () => {
    await truncateOutbox(db);
    const [heavy, light] = ['77777773-7777-4777-8777-777777777777', '77777771-7777-4777-8777-777777777777'];
    const weighted = await buildApp({
      url: db.url,
      providers: [TenantCounter],
      // claims of 30 that do not grow; weights from a map (upper case: ids are compared in lower case)
      outbox: {
        relay: {
          batchSize: 30,
          maxBatchSize: 30,
          concurrency: 2,
          tenantWeights: { [heavy.toUpperCase()]: 3 },
        },
      },
    });
    try {
      await backlog(db, heavy, 1000);
      await backlog(db, light, 1000);
      const counter = weighted.app.get(TenantCounter);
      counter.seen.clear();
      // every round visits both, the heavier claiming 30, the other 30 × 1/3: from the first (found by a scan)
      // on, and while both are backlogged (a claim right after the previous round's commit may find a few of its
      // events still leased: 170 and 60 seen, not 180)
      for (let round = 0; round < 6; round++) await weighted.relay.runOnce();
      const ratio = counter.seen.get(heavy)! / counter.seen.get(light)!;
      expect(ratio).toBeGreaterThanOrEqual(3 * 0.9);
      expect(ratio).toBeLessThanOrEqual(3 * 1.1);
      expect(counter.seen.get(light)).toBeGreaterThanOrEqual(6 * 10);
    } finally {
      await weighted.close();
    }
  });

  it('rejects tenant weights that are not positive numbers keyed by tenant ids, naming each', async () => {
    await expect(
      buildApp({
        url: db.url,
        outbox: { relay: { tenantWeights: { [QUIET]: 0, 'tenant-7': 2, [BUSY]: Number.NaN } } },
      }),
    ).rejects.toThrow(
      expect.objectContaining({
        message: expect.stringMatching(
          /relay\.tenantWeights\["5{8}-.*"\] must be a number above 0[\s\S]*tenant-7[\s\S]*relay\.tenantWeights\["4{8}-/,
        ),
      }),
    );
  });
});
