import { randomBytes } from 'node:crypto';
import { OutboxValidationError } from 'nestjs-pg-outbox';
import { OutboxWebhookSubscriptions, type OutboxWebhookSubscriptionInput } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import * as limited from '../support/limited-webhook-spec';
import { waitFor } from '../support/wait-for';
import { enqueueManyIn, TENANT, TENANTS, type TestEvent } from '../support/outbox-fixture';
import { deliveredCount, deliveryCounts } from '../support/forwarding';

/** The receiver listens on loopback, which tenant subscriptions may reach only when the operator allows it. */
const SUBSCRIPTIONS = {
  cacheTtlMs: 200,
  allowPrivateTargets: ['127.0.0.1/32'],
  secretKeys: [{ id: 'test', key: randomBytes(32).toString('base64') }],
};
const CONSUMER = 'subscription:partner';
/** Another tenant than TENANT. */
const OTHER = TENANTS.find((t) => t !== TENANT)!;

/** `count` events of one tenant for the subscription. */
function events(count: number, tenantId = TENANT): TestEvent[] {
  return Array.from({ length: count }, (_, n) => ({
    eventName: 'test.sub.created.v1',
    tenantId,
    payload: { n },
  }));
}

describe('concurrency and rate limits of tenants’ webhook subscriptions', () => {
  const spec = limited.useLimitedWebhookSpec('outbox_webhook_subscriptions');
  const { apps, arrivals } = spec;

  /** An app that delivers to the subscriptions table; its relay runs on its own unless `relay` says otherwise. */
  const start = async (relay: Record<string, unknown> = limited.RUNNING): Promise<TestApp> => {
    const app = await buildApp({
      url: spec.db.url,
      outbox: { relay, backoff: { baseMs: 1, capMs: 60_000, jitter: 0 } },
      webhooks: { subscriptions: SUBSCRIPTIONS },
    });
    apps.push(app);
    return app;
  };

  /** Adds the subscription `partner` of `tenantId` through `app`, with `more` (its limits). */
  const subscribe = (
    app: TestApp,
    more: Partial<OutboxWebhookSubscriptionInput>,
    tenantId = TENANT,
  ): ReturnType<OutboxWebhookSubscriptions['add']> =>
    app.app.get(OutboxWebhookSubscriptions).add(tenantId, {
      name: 'partner',
      url: `${spec.receiver.baseUrl}/partner`,
      events: ['test.sub.*'],
      ...more,
    });

  it('a rate limit holds the requests a loopback server counts to the limit per window, across two relays', async () => {
    const limit = { limit: 20, intervalMs: 1000 };
    await start();
    await start();
    await subscribe(apps[0]!, { rateLimit: limit });
    await limited.warmUp(spec, CONSUMER, () => enqueueManyIn(apps[0]!, events(6)), limit.intervalMs);

    const ids = await enqueueManyIn(apps[0]!, events(100));
    await limited.deliveredOnce(spec, CONSUMER, ids);
    // the bound of the docs: the limit, and a claim per relay lane (two here)
    limited.expectRateHeld(arrivals, limit, { claims: 2, batch: limited.BATCH });
  }, 60_000);

  it('a concurrency cap holds the requests in flight at the server, across two relays; another tenant’s subscription of the same name is not held', async () => {
    // requests in flight at the server, per tenant: answered after 150 ms; the count drops just before the answer
    // goes (the relay settles after it)
    const open = new Map<string, number>();
    const most = new Map<string, number>();
    spec.receiver.reply = (request) => {
      const tenant = JSON.parse(request.body).tenantId as string;
      open.set(tenant, (open.get(tenant) ?? 0) + 1);
      most.set(tenant, Math.max(most.get(tenant) ?? 0, open.get(tenant)!));
      return new Promise((resolve) =>
        setTimeout(() => {
          open.set(tenant, open.get(tenant)! - 1);
          resolve({});
        }, 150),
      );
    };
    await start();
    await start();
    await subscribe(apps[0]!, { concurrency: { global: 2 } });
    await subscribe(apps[0]!, {}, OTHER);
    const ids = await enqueueManyIn(apps[0]!, events(20));
    const others = await enqueueManyIn(apps[0]!, events(20, OTHER));

    await waitFor(async () => (await deliveredCount(spec.db, CONSUMER)) === ids.length + others.length, {
      timeoutMs: 30_000,
      message: '40 subscription deliveries',
    });
    process.stdout.write(`most in flight: ${JSON.stringify(Object.fromEntries(most))}\n`);
    expect(most.get(TENANT)).toBeLessThanOrEqual(2);
    // the other tenant's subscription is another consumer: a claim's requests go out side by side
    expect(most.get(OTHER)).toBeGreaterThan(2);
    expect(await deliveryCounts(spec.db, CONSUMER)).toEqual([
      expect.objectContaining({ status: 'delivered', n: 40, attempts: 1 }),
    ]);
  }, 60_000);

  it('a capped subscription goes on as its requests settle, without waiting for a poll', async () => {
    let open = 0;
    let most = 0;
    spec.receiver.reply = () => {
      most = Math.max(most, ++open);
      return new Promise((resolve) =>
        setTimeout(() => {
          open--;
          resolve({});
        }, 50),
      );
    };
    // a poll a minute: only the wake-up of the enqueue, and the relay's own looks after its commits, can deliver
    const app = await start({ ...limited.RUNNING, pollIntervalMs: 60_000 });
    await subscribe(app, { concurrency: { global: 2 } });
    const ids = await enqueueManyIn(app, events(12));

    await limited.deliveredOnce(spec, CONSUMER, ids, 15_000);
    expect(most).toBeLessThanOrEqual(2);
  }, 30_000);

  it('add() refuses a malformed limit naming the field and how to fix it, writing nothing; list() shows the limits', async () => {
    const app = await start({});
    const subscriptions = app.app.get(OutboxWebhookSubscriptions);
    const refused = async (more: Partial<OutboxWebhookSubscriptionInput>) =>
      subscribe(app, more).then(
        () => {
          throw new Error('add() resolved');
        },
        (e: unknown) => e as OutboxValidationError,
      );
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { rateLimit: { limit: 0, intervalMs: 1000 } },
        'rateLimit',
        'rateLimit.limit of subscription must be a positive integer',
      ],
      [{ rateLimit: { limit: 5 } }, 'rateLimit', 'rateLimit.intervalMs of subscription must be'],
      [
        { rateLimit: { limit: 5, intervalMs: 1000, perKey: 'aggregate' } },
        'rateLimit',
        'rateLimit.perKey of subscription must be left out',
      ],
      [
        { concurrency: { global: 1.5 } },
        'concurrency',
        'concurrency.global of subscription must be a positive integer',
      ],
      [
        { concurrency: { perTenant: 2 } },
        'concurrency',
        'concurrency.perTenant of subscription must be left out: a subscription serves one tenant',
      ],
    ];
    for (const [more, field, message] of cases) {
      const error = await refused(more as Partial<OutboxWebhookSubscriptionInput>);
      expect(error).toBeInstanceOf(OutboxValidationError);
      expect({ more, field: error.field, message: error.message }).toEqual({
        more,
        field,
        message: expect.stringContaining(message),
      });
    }
    expect(await subscriptions.list(TENANT)).toEqual([]);

    const added = await subscribe(app, {
      concurrency: { global: 3 },
      rateLimit: { limit: 50, intervalMs: 1000 },
    });
    expect(added).toMatchObject({ concurrency: { global: 3 }, rateLimit: { limit: 50, intervalMs: 1000 } });
    expect(await subscriptions.list(TENANT)).toEqual([
      expect.objectContaining({ concurrency: { global: 3 }, rateLimit: { limit: 50, intervalMs: 1000 } }),
    ]);
  });
});
