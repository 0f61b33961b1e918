import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxWebhooksModule, type OutboxWebhookOptions } from 'nestjs-pg-outbox/webhooks';
import { OutboxBrokersModule, type OutboxTransportBatch } from 'nestjs-pg-outbox/brokers';
import { buildApp, type TestApp } from '../support/build-app';
import { useDatabaseAndReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait-for';
import { enqueueManyIn, TENANT, TENANTS, truncateOutbox } from '../support/outbox-fixture';
import { deliveredCount, deliveryCounts } from '../support/forwarding';

/** How long one call of the slow handler takes: three in one batch outlast the lease below. */
const HANDLER_MS = 600;
/** Short leases, so that a batch of three slow handlers outlasts one. */
const LEASE_MS = 1500;

/** An in-process consumer of the same events as the webhook, slow enough that a batch of them adds up. */
@Injectable()
class SlowHandler {
  @OnOutboxEvent('test.lim.*', { consumer: 'slow' })
  async handle(_event: OutboxEvent): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  }
}

describe('limited external consumers beside in-process handlers', () => {
  const made = useDatabaseAndReceiver();
  let apps: TestApp[] = [];
  beforeEach(async () => {
    await truncateOutbox(made.db, 'outbox_consumer_pauses', 'outbox_consumer_limits');
    made.receiver.requests.length = 0;
    made.receiver.reply = () => ({});
  });
  afterEach(async () => {
    await Promise.all(apps.map((a) => a.close()));
    apps = [];
  });

  const hook = (): OutboxWebhookOptions => ({
    name: 'hook',
    url: `${made.receiver.baseUrl}/hook`,
    events: ['test.lim.*'],
    timeoutMs: 1000,
    concurrency: { global: 1 },
  });

  const start = async (withHandler: boolean): Promise<TestApp> => {
    const app = await buildApp({
      url: made.db.url,
      outbox: { relay: { leaseMs: LEASE_MS, batchSize: 5 }, handlerTimeoutMs: 1200 },
      webhooks: { webhooks: [hook()] },
      providers: withHandler ? [SlowHandler] : [],
    });
    apps.push(app);
    return app;
  };

  it('a limited webhook delivery claimed with a batch of slow handlers keeps its lease until sent: not taken over past the cap and sent twice', async () => {
    const { db, receiver } = made;
    receiver.requests.length = 0;
    const withHandler = await start(true);
    const webhookOnly = await start(false);
    // their first rounds register both consumers (and the webhook's cap) in the persisted registry
    await withHandler.relay.runOnce();
    await webhookOnly.relay.runOnce();
    await enqueueManyIn(
      withHandler,
      Array.from({ length: 3 }, (_, n) => ({
        eventName: 'test.lim.created.v1',
        tenantId: TENANT,
        payload: { n },
      })),
    );
    // the webhook-only relay fans the events out: the handler's and the limited webhook's rows wait as pending
    await webhookOnly.relay.runOnce();
    expect(receiver.requests).toHaveLength(0);
    expect(await deliveryCounts(db, 'webhook:hook')).toEqual([
      expect.objectContaining({ status: 'pending', n: 3 }),
    ]);

    // one due claim takes the three handler deliveries and one webhook delivery (the cap's room): the handlers run
    // first, 3 × 600 ms, and the webhook delivery waits behind them for its request
    const running = withHandler.relay.runOnce();
    let leasedUntil: Date | null = null;
    await waitFor(
      async () => {
        const [row] = await db.sql<{ until: Date }>(
          `select lease_expires_at as until from outbox_deliveries
            where consumer_name = 'webhook:hook' and status = 'processing'`,
        );
        leasedUntil = row?.until ?? null;
        return leasedUntil !== null;
      },
      { timeoutMs: 10_000, message: 'the webhook delivery claimed with the handlers' },
    );
    // meanwhile the other relay claims again, once the lease that claim gave has run out (by the database's clock)
    await waitFor(
      async () =>
        (await db.sql<{ past: boolean }>(`select now() > $1::timestamptz as past`, [leasedUntil]))[0]!.past,
      { timeoutMs: 10_000, message: 'the claim’s lease deadline passed' },
    );
    await webhookOnly.relay.runOnce();
    await running;

    // each event's request went out once: the delivery claimed with the batch was not taken over and sent twice
    const ids = receiver.requests.map((r) => r.id);
    expect(ids.length).toBeGreaterThan(0);
    expect(new Set(ids).size).toBe(ids.length);
    expect(receiver.requests.every((r) => r.attempt === 1)).toBe(true);
  }, 60_000);

  it('limits given through forRootAsync reach the persisted registry, as through forRoot', async () => {
    const { db, receiver } = made;
    const transport = {
      send: (batch: OutboxTransportBatch) =>
        Promise.resolve(batch.deliveries.map(() => ({ status: 'delivered' as const }))),
    };
    const app = await buildApp({
      url: db.url,
      imports: [
        OutboxWebhooksModule.forRootAsync({
          useFactory: () => ({
            webhooks: [
              { ...hook(), url: `${receiver.baseUrl}/async`, rateLimit: { limit: 7, intervalMs: 700 } },
            ],
          }),
        }),
        OutboxBrokersModule.forRootAsync({
          useFactory: () => ({
            transports: [
              { name: 't', events: ['test.lim.*'], transport, concurrency: { global: 4, perTenant: 2 } },
            ],
          }),
        }),
      ],
    });
    apps.push(app);
    await app.relay.runOnce(); // its first round registers the consumers
    const rows = await db.sql(
      `select name, concurrency, tenant_concurrency, rate_limit, rate_interval_ms, rate_per_tenant
         from outbox_consumers where name in ('webhook:hook', 'transport:t') order by name`,
    );
    expect(rows).toEqual([
      {
        name: 'transport:t',
        concurrency: 4,
        tenant_concurrency: 2,
        rate_limit: null,
        rate_interval_ms: null,
        rate_per_tenant: false,
      },
      {
        name: 'webhook:hook',
        concurrency: 1,
        tenant_concurrency: null,
        rate_limit: 7,
        rate_interval_ms: 700,
        rate_per_tenant: false,
      },
    ]);
  });

  it('429 holds of several tenants under a cap, two relays: every event answered 200 once, nothing charged, the cap held', async () => {
    const { db, receiver } = made;
    receiver.requests.length = 0;
    const asked = new Set<string>();
    let open = 0;
    let most = 0;
    receiver.reply = (request) => {
      const tenant = JSON.parse(request.body).tenantId as string;
      most = Math.max(most, ++open);
      const first = !asked.has(tenant);
      asked.add(tenant);
      return new Promise((resolve) =>
        setTimeout(() => {
          open--;
          resolve(first ? { status: 429, headers: { 'retry-after': '1' } } : {});
        }, 30),
      );
    };
    const relay = { enabled: true, pollIntervalMs: 50, batchSize: 5, concurrency: 2 };
    for (let i = 0; i < 2; i++) {
      const app = await buildApp({
        url: db.url,
        outbox: { relay, backoff: { baseMs: 1, capMs: 60_000, jitter: 0 } },
        webhooks: { webhooks: [{ ...hook(), concurrency: { global: 2 } }] },
      });
      apps.push(app);
    }
    const ids = await enqueueManyIn(
      apps[0]!,
      Array.from({ length: 30 }, (_, n) => ({
        eventName: 'test.lim.created.v1',
        tenantId: TENANTS[n % TENANTS.length],
        payload: { n },
      })),
    );
    await waitFor(async () => (await deliveredCount(db, 'webhook:hook')) === ids.length, {
      timeoutMs: 30_000,
      message: '30 webhook deliveries',
    });
    const answered = receiver.requests.filter((r) => r.status === 200).map((r) => r.id);
    expect([...answered].sort()).toEqual([...ids].sort());
    expect(receiver.requests.every((r) => r.attempt === 1)).toBe(true);
    expect(await deliveryCounts(db, 'webhook:hook')).toEqual([
      expect.objectContaining({ status: 'delivered', n: 30, attempts: 1 }),
    ]);
    expect(most).toBeLessThanOrEqual(2);
  }, 60_000);
});
