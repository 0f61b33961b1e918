import { randomBytes } from 'node:crypto';
import { OutboxWebhookSubscriptions, type OutboxWebhookSubscriptionInput } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import * as limited from '../support/limited-webhook-spec';
import { waitFor } from '../support/wait-for';
import { enqueueManyIn, TENANT, type TestEvent, truncateTables } from '../support/outbox-fixture';
import { deliveredCount } from '../support/forwarding';

/** The default cache of the tenants' subscriptions (5 s): the docs' recipe to change a limit is remove + add. */
const SUBSCRIPTIONS = {
  allowPrivateTargets: ['127.0.0.1/32'],
  secretKeys: [{ id: 'test', key: randomBytes(32).toString('base64') }],
};
const CONSUMER = 'subscription:partner';

function events(count: number): TestEvent[] {
  return Array.from({ length: count }, (_, n) => ({
    eventName: 'test.sub.created.v1',
    tenantId: TENANT,
    payload: { n },
  }));
}

describe('limits of tenants’ subscriptions under review', () => {
  const spec = limited.useLimitedWebhookSpec('outbox_webhook_subscriptions', 'outbox_consumer_limits');
  const { apps } = spec;

  const start = async (relay: Record<string, unknown>): Promise<TestApp> => {
    const app = await buildApp({
      url: spec.db.url,
      outbox: { relay, backoff: { baseMs: 1, capMs: 60_000, jitter: 0 } },
      webhooks: { subscriptions: SUBSCRIPTIONS },
    });
    apps.push(app);
    return app;
  };
  const subscribe = (app: TestApp, more: Partial<OutboxWebhookSubscriptionInput>) =>
    app.app.get(OutboxWebhookSubscriptions).add(TENANT, {
      name: 'partner',
      url: `${spec.receiver.baseUrl}/partner`,
      events: ['test.sub.*'],
      ...more,
    });

  it('add() refuses a limit with a field it does not know (a typo), writing nothing', async () => {
    const admin = await start({});
    const subscriptions = admin.app.get(OutboxWebhookSubscriptions);
    // `perTenat`, `burst`: silently stored and ignored, the partner left without the limit the caller meant
    const cases = [
      { concurrency: { global: 5, perTenat: 1 } },
      { rateLimit: { limit: 5, intervalMs: 1000, burst: 1 } },
    ] as unknown as Partial<OutboxWebhookSubscriptionInput>[];
    for (const more of cases) {
      const outcome = await subscribe(admin, more).then(
        (s) => `added: ${JSON.stringify({ concurrency: s.concurrency, rateLimit: s.rateLimit })}`,
        (e: Error) => `refused: ${e.message}`,
      );
      expect({ more, outcome }).toEqual({
        more,
        outcome: expect.stringMatching(/^refused: .*(perTenat|burst)/),
      });
      await subscriptions.remove(TENANT, 'partner');
    }
    expect(await subscriptions.list(TENANT)).toEqual([]);
  });

  it('a capped subscription paused then resumed, three of its requests failing once, keeps its cap', async () => {
    let open = 0;
    let most = 0;
    const failed = new Set<string>();
    spec.receiver.reply = (request) => {
      most = Math.max(most, ++open);
      // the first attempt of three of them fails (fewer than the circuit breaker's 5 in a row)
      const first = !failed.has(request.id) && failed.size < 3;
      if (first) failed.add(request.id);
      return new Promise((resolve) =>
        setTimeout(() => {
          open--;
          resolve(first ? { status: 503 } : {});
        }, 50),
      );
    };
    const relay = await start(limited.RUNNING);
    const subscriptions = relay.app.get(OutboxWebhookSubscriptions);
    await subscribe(relay, { concurrency: { global: 1 }, backoff: { baseMs: 1, capMs: 10, jitter: 0 } });
    await subscriptions.pause(TENANT, 'partner');
    const ids = await enqueueManyIn(relay, events(8));
    // every delivery held back while paused (one given back after the resume would wait pausedRecheckMs)
    await waitFor(
      async () => {
        const [{ n }] = await spec.db.sql<{ n: number }>(
          `select count(*)::int as n from outbox_deliveries
            where consumer_name = $1 and status = 'pending' and error_code = 'subscriptionPaused'`,
          [CONSUMER],
        );
        return n === ids.length;
      },
      { timeoutMs: 10_000, message: 'the deliveries held back' },
    );
    await subscriptions.resume(TENANT, 'partner');
    await waitFor(async () => (await deliveredCount(spec.db, CONSUMER)) === ids.length, {
      timeoutMs: 40_000,
      message: '8 deliveries',
    });
    process.stdout.write(`most in flight under a cap of 1, paused, resumed, retried: ${most}\n`);
    expect(most).toBeLessThanOrEqual(1);
    expect(failed.size).toBe(3);
  }, 60_000);
  it('a claim takes the turn of the limited subscriptions with work only, not of every limited one of the tenant', async () => {
    const relay = await start(limited.RUNNING);
    const subscriptions = relay.app.get(OutboxWebhookSubscriptions);
    // 200 capped subscriptions of the tenant that get no event, and the partner, capped too
    for (let i = 0; i < 200; i++)
      await subscriptions.add(TENANT, {
        name: `idle-${i}`,
        url: `${spec.receiver.baseUrl}/idle`,
        events: ['test.other.*'],
        concurrency: { global: 1 },
      });
    await subscribe(relay, { concurrency: { global: 1 } });
    // the rows of outbox_consumer_limits written (inserted or updated) while the partner's events are delivered:
    // each row version is stamped with its transaction (xmin)
    const versions = async (): Promise<Map<string, string>> =>
      new Map(
        (
          await spec.db.sql<{ consumer_name: string; v: string }>(
            `select consumer_name, xmin::text as v from outbox_consumer_limits where tenant_id = $1`,
            [TENANT],
          )
        ).map((r) => [r.consumer_name, r.v]),
      );
    const truncateDeliveries = () =>
      truncateTables(spec.db, 'event_outbox, outbox_deliveries, outbox_event_leases');
    const deliver = async (count: number): Promise<string[]> => {
      const before = await versions();
      const ids = await enqueueManyIn(relay, events(count));
      await waitFor(async () => (await deliveredCount(spec.db, CONSUMER)) >= ids.length, {
        timeoutMs: 30_000,
        message: `${count} deliveries to the partner`,
      });
      await truncateDeliveries();
      const after = await versions();
      return [...after].filter(([name, v]) => before.get(name) !== v).map(([name]) => name);
    };
    // the first delivery creates the rows of the turns taken; the next five (five claims at least: a cap of 1)
    // rewrite those of the turns taken again
    const created = await deliver(1);
    const written = await deliver(5);
    process.stdout.write(
      `turn rows of a tenant with 201 limited subscriptions, work for one: ${created.length} created, ${written.length} written by 5 claims\n`,
    );
    expect(created).toEqual([CONSUMER]);
    expect(written).toEqual([CONSUMER]);
    expect(spec.receiver.to('/idle')).toEqual([]);
  }, 60_000);
});
