import type { OutboxWebhookOptions } from 'nestjs-pg-outbox/webhooks';
import { buildApp } from '../support/build-app';
import { drainSideBySide } from '../support/drain-side-by-side';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { expireLeases } from '../support/expire-leases';
import { startWebhookChildRelay } from '../support/webhook-child-relay';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait-for';
import { enqueueIn, enqueueManyIn, TENANTS, truncateOutbox } from '../support/outbox-fixture';

describe('webhooks across relays and crashes', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });

  it('recovers the lease of a relay killed mid-request and delivers once more, with the same event id', async () => {
    receiver.requests.length = 0;
    receiver.reply = (request) =>
      request.attempt === 1 ? { hang: true } : { body: { ok: true, runId: 'second' } };
    const webhook: OutboxWebhookOptions = {
      name: 'crash',
      url: `${receiver.baseUrl}/crash`,
      events: ['test.crash.*'],
      timeoutMs: 2500,
    };
    const child = await startWebhookChildRelay({
      DATABASE_URL: db.url,
      WEBHOOK_URL: webhook.url,
      LEASE_MS: '60000',
      TIMEOUT_MS: '2500',
    });
    const t = await buildApp({
      url: db.url,
      outbox: { handlerTimeoutMs: 1000, relay: { leaseMs: 60_000 } },
      webhooks: { webhooks: [webhook] },
    });
    try {
      const id = await enqueueIn(t, { eventName: 'test.crash.v1' });
      await waitFor(() => receiver.requests.length === 1, { message: 'the child relay to send the request' });
      await child.kill('SIGKILL');
      await waitFor(() => receiver.requests[0]!.outcome === 'aborted', {
        message: 'the receiver to see the sender die',
      });
      // Until the lease expires nobody may send it again.
      expect((await t.relay.runOnce()).deliveriesClaimed).toBe(0);
      // the lease runs out (made so by SQL, not waited for): the delivery is sent again
      expect(await expireLeases(db, [id])).toBe(1);
      expect(await t.relay.runOnce()).toMatchObject({ succeeded: 1 });
      expect(receiver.requests.map((r) => [r.id, r.attempt, r.outcome])).toEqual([
        [id, 1, 'aborted'],
        [id, 2, 'answered'],
      ]);
      const [row] = await db.sql(
        'select status, attempt_count, error_code, external_run_id from outbox_deliveries where event_id = $1',
        [id],
      );
      expect(row).toEqual({
        status: 'delivered',
        attempt_count: 2,
        error_code: 'staleLeaseRecovered',
        external_run_id: 'second',
      });
    } finally {
      await child.kill('SIGKILL');
      await t.close();
    }
  }, 30_000);

  it('never has two relays send the same delivery at the same time', async () => {
    await truncateOutbox(db);
    receiver.requests.length = 0;
    // Slow enough to overlap, and a first attempt that fails now and then so retries are claimed too.
    receiver.reply = (request, index) => ({
      delayMs: index % 7,
      status: request.attempt === 1 && index % 5 === 0 ? 503 : 200,
    });
    const webhook: OutboxWebhookOptions = {
      name: 'pair',
      url: `${receiver.baseUrl}/pair`,
      events: ['test.pair.*'],
      timeoutMs: 5000,
      maxAttempts: 10,
      backoff: { baseMs: 0, capMs: 0, jitter: 0 },
      circuitBreaker: false,
    };
    const a = await buildApp({
      url: db.url,
      outbox: { relay: { batchSize: 40 } },
      webhooks: { webhooks: [webhook] },
    });
    const b = await buildApp({
      url: db.url,
      outbox: { relay: { batchSize: 40 } },
      webhooks: { webhooks: [webhook] },
    });
    try {
      const events = Array.from({ length: 400 }, (_, i) => ({
        tenantId: TENANTS[i % 2],
        eventName: 'test.pair.v1',
        payload: { i },
      }));
      await enqueueManyIn(a, events);
      const [byA, byB] = await drainSideBySide([a, b]);
      expect(byA + byB).toBe(400);
      expect(byA).toBeGreaterThan(0);
      expect(byB).toBeGreaterThan(0);
      expect(receiver.maxConcurrentPerId()).toBe(1);
      const requests = receiver.to('/pair');
      expect(requests.every((r) => r.outcome === 'answered')).toBe(true);
      const successes = new Map<string, number>();
      for (const r of requests.filter((r) => r.status === 200))
        successes.set(r.id, (successes.get(r.id) ?? 0) + 1);
      expect(successes.size).toBe(400);
      expect([...successes.values()].every((n) => n === 1)).toBe(true);
      expect(requests.filter((r) => r.status === 503).length).toBeGreaterThan(0);
      const left = await db.sql(`select status, count(*)::int n from outbox_deliveries group by status`);
      expect(left).toEqual([{ status: 'delivered', n: 400 }]);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);
});
