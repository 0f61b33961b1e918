import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from '../support/build-app';
import { drainSideBySide } from '../support/drain-side-by-side';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueIn,
  enqueueManyIn,
  recordEffect,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';
import { startChildRelay } from '../support/child-relay';
import { expireLeases } from '../support/expire-leases';
import { waitFor } from '../support/wait-for';

/** The relay's default batch size. */
const BATCH_SIZE = 100;

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

/** A handler that runs until the test lets it go, and says when it started and when it finished. */
@Injectable()
class GatedConsumer {
  readonly steps: string[] = [];
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.open = resolve));

  @OnOutboxEvent('test.slow.v1', { consumer: 'slow' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.steps.push('handler started');
    await this.gate;
    await recordEffect(event, context);
    this.steps.push('handler finished');
  }

  release(): void {
    this.open();
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
        tenantId: TENANTS[i % 2],
        eventName: 'test.load.v1',
        payload: { i },
      }));
      for (let i = 0; i < events.length; i += 1000) {
        await enqueueManyIn(a, events.slice(i, i + 1000));
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
      await truncateOutbox(db, EFFECTS_TABLE);
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
          tenantId: TENANTS[0],
          eventName: 'test.load.v1',
          payload: { i },
        }));
        await enqueueManyIn(a, events);
        // Checked as each drain returns: at most the other relay's claim in flight (one batch, not committed yet,
        // so not leased as far as this query sees) can be left.
        const left = await Promise.all([a, b].map((t) => t.relay.drain().then(unclaimed)));
        for (const n of left) expect(n).toBeLessThanOrEqual(BATCH_SIZE);
      }
      expect(await db.sql(`select count(*)::int as n from test_effects`)).toEqual([{ n: 18_000 }]);
    } finally {
      await a.close();
      await b.close();
      await truncateOutbox(db, EFFECTS_TABLE);
    }
  });

  it('app.close() stops claiming and waits for the handlers in flight', async () => {
    const t = await buildApp({
      url: db.url,
      providers: [GatedConsumer],
      outbox: { relay: { enabled: true, pollIntervalMs: 20 } },
    });
    const gated = t.app.get(GatedConsumer);
    const id = await enqueueIn(t, { tenantId: TENANTS[0], eventName: 'test.slow.v1' });
    await waitFor(() => gated.steps.includes('handler started'), { message: 'the handler to start' });
    const closing = t.close().then(() => gated.steps.push('app closed'));
    // the handler is let go only once the relay is stopping: close() must wait for it
    await waitFor(() => !t.relay.isRunning, { message: 'the relay to stop claiming' });
    gated.release();
    await closing;
    expect(gated.steps).toEqual(['handler started', 'handler finished', 'app closed']);
    expect(await db.sql(`select status from outbox_deliveries where event_id = $1`, [id])).toEqual([
      { status: 'delivered' },
    ]);
    // A second stop is harmless.
    await t.relay.stop();
    await truncateOutbox(db, EFFECTS_TABLE);
  });

  it('takes over a delivery whose relay process was killed mid-handler, after its lease, with one effect', async () => {
    const child = await startChildRelay({ DATABASE_URL: db.url, LEASE_MS: '60000' });
    const t = await buildApp({
      url: db.url,
      providers: [VictimConsumer],
      outbox: { handlerTimeoutMs: 1000, relay: { leaseMs: 60_000 } },
    });
    try {
      const id = await enqueueIn(t, {
        tenantId: TENANTS[1],
        eventName: 'test.crash.v1',
        payload: { mode: 'hang' },
      });
      expect(await child.line('HANDLER_STARTED')).toBe(`HANDLER_STARTED ${id}`);
      await child.kill('SIGKILL');
      // Before the lease expires, nobody may take the delivery.
      expect((await t.relay.runOnce()).deliveriesClaimed).toBe(0);
      // the lease runs out (made so by SQL, not waited for): the delivery is retaken
      expect(await expireLeases(db, [id])).toBe(1);
      expect(await t.relay.runOnce()).toMatchObject({ succeeded: 1 });
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
