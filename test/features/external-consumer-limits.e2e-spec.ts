import { Injectable } from '@nestjs/common';
import { OutboxConfigurationError } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import type { OutboxTransport, OutboxTransportBatch, OutboxTransportOutcome } from 'nestjs-pg-outbox/brokers';
import type { OutboxWebhookOptions } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import {
  BATCH,
  deliveredOnce,
  expectRateHeld,
  RUNNING,
  useLimitedWebhookSpec,
  warmUp,
} from '../support/limited-webhook-spec';
import { waitFor } from '../support/wait-for';
import { enqueueManyIn, TENANT, TENANTS, type TestEvent } from '../support/outbox-fixture';
import { deliveredCount, deliveryCounts } from '../support/forwarding';
import { busiestWindow } from '../support/rate-windows';

/** `count` webhook events spread over the three tenants. */
function spread(count: number): TestEvent[] {
  return Array.from({ length: count }, (_, n) => ({
    eventName: 'test.lim.created.v1',
    tenantId: TENANTS[n % TENANTS.length],
    payload: { n },
  }));
}

/** Holds each batch a while and counts the deliveries it holds at once. */
@Injectable()
class CountingTransport implements OutboxTransport {
  holding = 0;
  most = 0;
  readonly received: string[] = [];
  async send(batch: OutboxTransportBatch): Promise<OutboxTransportOutcome[]> {
    this.holding += batch.deliveries.length;
    this.most = Math.max(this.most, this.holding);
    this.received.push(...batch.deliveries.map((d) => d.event.eventId));
    await new Promise((resolve) => setTimeout(resolve, 40));
    this.holding -= batch.deliveries.length;
    return batch.deliveries.map(() => ({ status: 'delivered' as const }));
  }
}

describe('concurrency and rate limits of webhooks and transports', () => {
  const spec = useLimitedWebhookSpec('outbox_consumer_pauses');
  const { apps, arrivals } = spec;

  /** The static webhook of these tests, with `limits`. */
  const hook = (limits: Pick<OutboxWebhookOptions, 'concurrency' | 'rateLimit'>): OutboxWebhookOptions => ({
    name: 'hook',
    url: `${spec.receiver.baseUrl}/hook`,
    events: ['test.lim.*'],
    timeoutMs: 2000,
    ...limits,
  });

  /** An app whose static webhook `hook` has `limits`; its relay runs on its own unless `relay` says otherwise. */
  const start = async (
    limits: Pick<OutboxWebhookOptions, 'concurrency' | 'rateLimit'>,
    relay: Record<string, unknown> = RUNNING,
  ): Promise<TestApp> => {
    const app = await buildApp({
      url: spec.db.url,
      outbox: { relay, backoff: { baseMs: 1, capMs: 60_000, jitter: 0 } },
      webhooks: { webhooks: [hook(limits)] },
    });
    apps.push(app);
    return app;
  };

  /** Waits until every one of `ids` is delivered to the webhook, once each, on its first attempt. */
  const delivered = (ids: readonly string[]): Promise<void> => deliveredOnce(spec, 'webhook:hook', ids);

  it('a rate limit holds the requests a loopback server counts to the limit per window, across two relays', async () => {
    const limit = { limit: 20, intervalMs: 1000 };
    await start({ rateLimit: limit });
    await start({ rateLimit: limit });
    await warmUp(spec, 'webhook:hook', () => enqueueManyIn(apps[0]!, spread(6)), limit.intervalMs);
    const ids = await enqueueManyIn(apps[0]!, spread(100));

    await delivered(ids);
    // The limit holds on claims; the server sees each request its send time later. A window the server opens
    // with a request that took longer to send than the next window's can also hold those: at most the claims
    // taken in that instant, one per relay (two here) — never a second window's worth.
    expectRateHeld(arrivals, limit, { claims: 2, batch: BATCH });
  }, 60_000);

  it('a per-key rate limit holds each key to it at the server, and the keys go side by side', async () => {
    const limit = { limit: 4, intervalMs: 1000, perKey: { payload: 'k' } } as const;
    const byKey = new Map<string, number[]>();
    spec.receiver.reply = (request) => {
      const key = (JSON.parse(request.body) as { data: { k: string } }).data.k;
      byKey.set(key, [...(byKey.get(key) ?? []), Date.now()]);
      return {};
    };
    await start({ rateLimit: limit });
    const ids = await enqueueManyIn(
      apps[0]!,
      Array.from({ length: 24 }, (_, n) => ({
        eventName: 'test.lim.created.v1',
        tenantId: TENANT,
        payload: { n, k: n % 2 === 0 ? 'even' : 'odd' },
      })),
    );

    await delivered(ids);
    for (const key of ['even', 'odd']) {
      const arrived = byKey.get(key) ?? [];
      expect(arrived).toHaveLength(12);
      // a window the server opens with a request slow to send (a relay's first ones wait for their connection)
      // can also hold the next window's: at most one more window's worth, never the 12 of an unlimited key
      expect(busiestWindow(arrived, limit.intervalMs)).toBeLessThanOrEqual(2 * limit.limit);
    }
    // side by side: each key had requests in the first interval, neither waited for the other's 12
    const first = Math.min(...[...byKey.values()].flat());
    for (const key of ['even', 'odd'])
      expect((byKey.get(key) ?? []).filter((at) => at < first + limit.intervalMs).length).toBeGreaterThan(0);
  }, 60_000);

  it('a concurrency cap holds the requests in flight at the server, across two relays', async () => {
    let inFlight = 0;
    let most = 0;
    spec.receiver.reply = () => {
      most = Math.max(most, ++inFlight);
      // answered after 150 ms; the count drops just before the answer goes (the relay settles after it)
      return new Promise((resolve) =>
        setTimeout(() => {
          inFlight--;
          resolve({});
        }, 150),
      );
    };
    await start({ concurrency: { global: 3 } });
    await start({ concurrency: { global: 3 } });
    const ids = await enqueueManyIn(apps[0]!, spread(30));

    await delivered(ids);
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('a per-tenant cap holds each tenant to it, and the tenants go side by side', async () => {
    const open = new Map<string, number>();
    const most = new Map<string, number>();
    let inFlight = 0;
    let mostAll = 0;
    spec.receiver.reply = (request) => {
      const tenant = JSON.parse(request.body).tenantId as string;
      open.set(tenant, (open.get(tenant) ?? 0) + 1);
      most.set(tenant, Math.max(most.get(tenant) ?? 0, open.get(tenant)!));
      mostAll = Math.max(mostAll, ++inFlight);
      return new Promise((resolve) =>
        setTimeout(() => {
          open.set(tenant, open.get(tenant)! - 1);
          inFlight--;
          resolve({});
        }, 150),
      );
    };
    // three lanes: one tenant's batch at a time each, so the tenants can go side by side
    await start({ concurrency: { perTenant: 1 } }, { ...RUNNING, concurrency: 3 });
    const ids = await enqueueManyIn(apps[0]!, spread(24));

    await delivered(ids);
    expect([...most.values()].every((n) => n === 1)).toBe(true);
    expect(mostAll).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('pause and resume hold a limited webhook: nothing sent or charged while paused, everything once after', async () => {
    const app = await start({ rateLimit: { limit: 50, intervalMs: 1000 } }, {});
    const admin = app.app.get(OutboxAdminService);
    await app.relay.drain(); // its first round registers the consumer: only registered ones can be paused
    expect(await admin.pauseConsumer('webhook:hook', { reason: 'partner down' })).toBe(true);
    const ids = await enqueueManyIn(app, spread(12));
    await app.relay.drain();

    expect(spec.receiver.requests).toHaveLength(0);
    expect(await deliveryCounts(spec.db, 'webhook:hook')).toEqual([
      expect.objectContaining({ status: 'pending', n: 12, attempts: 0 }),
    ]);
    expect(await admin.resumeConsumer('webhook:hook')).toBe(true);
    await waitFor(
      async () => {
        await app.relay.drain();
        return (await deliveredCount(spec.db, 'webhook:hook')) === ids.length;
      },
      { timeoutMs: 15_000, message: 'the paused deliveries delivered' },
    );
    await delivered(ids);
  }, 30_000);

  it('a 429 with Retry-After under a rate limit holds the tenant, charges nothing, and the limit still holds', async () => {
    const limit = { limit: 10, intervalMs: 1000 };
    spec.receiver.reply = (_request, index) => {
      arrivals.push(Date.now());
      return index === 0 ? { status: 429, headers: { 'retry-after': '1' } } : {};
    };
    const app = await start({ rateLimit: limit });
    const ids = await enqueueManyIn(
      app,
      Array.from({ length: 30 }, (_, n) => ({
        eventName: 'test.lim.created.v1',
        tenantId: TENANT,
        payload: { n },
      })),
    );

    await waitFor(async () => (await deliveredCount(spec.db, 'webhook:hook')) === ids.length, {
      timeoutMs: 30_000,
      message: 'every event delivered after the hold',
    });
    const answered = spec.receiver.requests.filter((r) => r.status === 200).map((r) => r.id);
    expect([...answered].sort()).toEqual([...ids].sort());
    // the held one was given back uncharged and sent again on its first attempt; no other attempt charged
    expect(spec.receiver.requests.every((r) => r.attempt === 1)).toBe(true);
    expect(await deliveryCounts(spec.db, 'webhook:hook')).toEqual([
      expect.objectContaining({ status: 'delivered', n: 30, attempts: 1 }),
    ]);
    expect(busiestWindow(arrivals, limit.intervalMs)).toBeLessThanOrEqual(limit.limit + BATCH);
  }, 60_000);

  it('a transport with a concurrency cap is handed at most that many deliveries at once', async () => {
    const transport = new CountingTransport();
    const app = await buildApp({
      url: spec.db.url,
      outbox: { relay: { ...RUNNING, concurrency: 4 } },
      brokers: { transports: [{ name: 't', events: ['test.lim.*'], transport, concurrency: { global: 3 } }] },
    });
    apps.push(app);
    const ids = await enqueueManyIn(app, spread(40));

    await waitFor(async () => (await deliveredCount(spec.db, 'transport:t')) === ids.length, {
      timeoutMs: 30_000,
      message: '40 transport deliveries',
    });
    expect([...transport.received].sort()).toEqual([...ids].sort());
    expect(transport.most).toBeLessThanOrEqual(3);
    expect(await deliveryCounts(spec.db, 'transport:t')).toEqual([
      expect.objectContaining({ status: 'delivered', n: 40, attempts: 1 }),
    ]);
  }, 60_000);

  it('a malformed limit of a webhook, a broker or a transport makes app.init() reject, naming each', async () => {
    const failure = buildApp({
      url: spec.db.url,
      webhooks: { webhooks: [hook({ concurrency: {} })] },
      brokers: {
        brokers: [
          {
            name: 'rabbit',
            type: 'rabbitmq',
            url: 'amqp://127.0.0.1',
            exchange: 'x',
            events: ['*'],
            rateLimit: { limit: 0, intervalMs: 1000 },
          },
        ],
        transports: [
          {
            name: 't',
            events: ['*'],
            transport: new CountingTransport(),
            concurrency: { global: 2, perTenant: 3 },
          },
        ],
      },
    });
    const error = await failure.then(
      (app) => {
        apps.push(app);
        throw new Error('app.init() resolved');
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    const { problems } = error as OutboxConfigurationError;
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringContaining('concurrency of webhooks[0] ("hook") must be { global?, perTenant? }'),
        expect.stringContaining('rateLimit.limit of brokers[0] ("rabbit") must be a positive integer'),
        expect.stringContaining(
          'concurrency.perTenant of transports[0] ("t") must be at most concurrency.global',
        ),
      ]),
    );
    expect(problems).toHaveLength(3);
  });
});
