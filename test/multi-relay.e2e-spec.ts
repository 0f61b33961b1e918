import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from './support/build-app';
import { drainSideBySide } from './support/drain-side-by-side';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { EFFECTS_TABLE_SQL, recordEffect } from './support/effects';
import { startChildRelay } from './support/child-relay';
import { waitFor } from './support/wait-for';

/** The relay's default batch size. */
const BATCH_SIZE = 100;

const TENANTS = ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222'];

@Injectable()
class CountingConsumers {
  @OnOutboxEvent('test.load.v1', { consumer: 'writer' })
  write(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent('test.load.v1', { consumer: 'second-writer' })
  writeToo(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

@Injectable()
class SlowConsumer {
  finished = 0;
  @OnOutboxEvent('test.slow.v1', { consumer: 'slow' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 300));
    await recordEffect(event, context);
    this.finished++;
  }
}

@Injectable()
class VictimConsumer {
  @OnOutboxEvent('test.crash.v1', { consumer: 'victim' })
  handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

describe('several relays, shutdown and crashes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('two relays drain 5,000 events with each consumer called exactly once per event', async () => {
    const a = await buildApp({ url: db.url, providers: [CountingConsumers] });
    const b = await buildApp({ url: db.url, providers: [CountingConsumers] });
    try {
      const events = Array.from({ length: 5000 }, (_, i) => ({
        tenantId: TENANTS[i % 2]!,
        eventName: 'test.load.v1',
        payload: { i },
      }));
      for (let i = 0; i < events.length; i += 1000) {
        await a.dataSource.transaction((m) => a.outbox.enqueueMany(m, events.slice(i, i + 1000)));
      }
      const [byA, byB] = await drainSideBySide([a, b]);
      expect(byA + byB).toBe(10_000);
      expect(byA).toBeGreaterThan(0);
      expect(byB).toBeGreaterThan(0);
      const [effects] = await db.sql<{ total: string; distinct_pairs: string }>(
        `select count(*) total, count(distinct (event_id, consumer)) distinct_pairs from test_effects`,
      );
      expect(Number(effects!.total)).toBe(10_000);
      expect(Number(effects!.distinct_pairs)).toBe(10_000);
      const left = await db.sql(
        `select status, count(*)::int n from event_outbox where status <> 'published' group by status`,
      );
      expect(left).toEqual([]);
    } finally {
      await a.close();
      await b.close();
      await db.sql('truncate event_outbox, outbox_deliveries, consumer_inbox, test_effects');
    }
  });

  it('a relay’s drain() returns only once nothing is left for it, while another relay drains the same tenant', async () => {
    const a = await buildApp({ url: db.url, providers: [CountingConsumers] });
    const b = await buildApp({ url: db.url, providers: [CountingConsumers] });
    // Events nobody has claimed (as far as a query can see): pending, with no live lease.
    const unclaimed = async () =>
      (
        await db.sql<{ n: number }>(
          `select count(*)::int as n from event_outbox e where e.status = 'pending' and not exists
             (select 1 from outbox_event_leases l where l.event_id = e.id and l.lease_expires_at > now())`,
        )
      )[0]!.n;
    try {
      for (let run = 0; run < 3; run++) {
        const events = Array.from({ length: 3000 }, (_, i) => ({
          tenantId: TENANTS[0]!,
          eventName: 'test.load.v1',
          payload: { i },
        }));
        await a.dataSource.transaction((m) => a.outbox.enqueueMany(m, events));
        // Checked as each drain returns: at most the other relay's claim in flight (one batch, not committed yet,
        // so not leased as far as this query sees) can be left.
        const left = await Promise.all([a, b].map((t) => t.relay.drain().then(unclaimed)));
        for (const n of left) expect(n).toBeLessThanOrEqual(BATCH_SIZE);
      }
      expect(await db.sql(`select count(*)::int as n from test_effects`)).toEqual([{ n: 18_000 }]);
    } finally {
      await a.close();
      await b.close();
      await db.sql('truncate event_outbox, outbox_deliveries, consumer_inbox, test_effects');
    }
  });

  it('app.close() stops claiming and waits for the handlers in flight', async () => {
    const t = await buildApp({
      url: db.url,
      providers: [SlowConsumer],
      outbox: { relay: { enabled: true, pollIntervalMs: 20 } },
    });
    const slow = t.app.get(SlowConsumer);
    const id = await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANTS[0]!, eventName: 'test.slow.v1', payload: {} }),
    );
    await waitFor(async () => (await db.sql(`select 1 from outbox_event_leases`)).length > 0, {
      message: 'the slow delivery to be claimed',
    });
    await t.close();
    expect(slow.finished).toBe(1);
    expect(await db.sql(`select status from outbox_deliveries where event_id = $1`, [id])).toEqual([
      { status: 'delivered' },
    ]);
    expect(t.relay.isRunning).toBe(false);
    // A second stop is harmless.
    await t.relay.stop();
    await db.sql('truncate event_outbox, outbox_deliveries, consumer_inbox, test_effects');
  });

  it('takes over a delivery whose relay process was killed mid-handler, after its lease, with one effect', async () => {
    const child = await startChildRelay({ DATABASE_URL: db.url, LEASE_MS: '1500' });
    const t = await buildApp({
      url: db.url,
      providers: [VictimConsumer],
      outbox: { handlerTimeoutMs: 1000, relay: { leaseMs: 1500 } },
    });
    try {
      const id = await t.dataSource.transaction((m) =>
        t.outbox.enqueue(m, { tenantId: TENANTS[1]!, eventName: 'test.crash.v1', payload: { mode: 'hang' } }),
      );
      expect(await child.line('HANDLER_STARTED')).toBe(`HANDLER_STARTED ${id}`);
      await child.kill('SIGKILL');
      // Before the lease expires, nobody may take the delivery.
      expect((await t.relay.runOnce()).deliveriesClaimed).toBe(0);
      await waitFor(async () => (await t.relay.runOnce()).succeeded === 1, {
        timeoutMs: 10_000,
        message: 'the lease to expire and the delivery to be retaken',
      });
      const effects = await db.sql('select event_id, attempt from test_effects');
      expect(effects).toEqual([{ event_id: id, attempt: 2 }]);
      const [row] = await db.sql(
        'select status, attempt_count, error_code from outbox_deliveries where event_id = $1',
        [id],
      );
      expect(row).toEqual({ status: 'delivered', attempt_count: 2, error_code: 'staleLeaseRecovered' });
    } finally {
      await child.kill('SIGKILL');
      await t.close();
    }
  });
});
