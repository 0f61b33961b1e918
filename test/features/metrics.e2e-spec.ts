import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { OnOutboxEvent, OutboxConfigurationError, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxMetricsModule } from 'nestjs-pg-outbox/observability';
import { OutboxWebhookSubscriptions } from 'nestjs-pg-outbox/webhooks';
import { AppModule } from '../../apps/demo/src/app.module';
import { buildApp } from '../support/build-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';
import { enqueueIn, makeRetriesDue, TENANTS } from '../support/outbox-fixture';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

const run = promisify(execFile);
const [TENANT_A, TENANT_B] = TENANTS;

/** The value of one sample of a Prometheus text exposition, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (
      Object.entries(labels).every(([k, v]) => found[k] === v) &&
      Object.keys(found).length === Object.keys(labels).length
    )
      return Number(match[4]);
  }
  return undefined;
}

/** Every value the `consumer` label takes in a Prometheus text exposition, over every metric. */
function consumerValues(text: string): Set<string> {
  return new Set([...text.matchAll(/[{,]consumer="([^"]*)"/g)].map((m) => m[1]));
}

/** The number of series (sample lines) in a Prometheus text exposition. */
function seriesCount(text: string): number {
  return text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length;
}

describe("the demo's /metrics", () => {
  let db: TestDatabase;
  let app: INestApplication;
  let baseUrl: string;

  beforeAll(async () => {
    db = await createEmptyDatabase();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(db.url)] })
      .setLogger(false as never)
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('counts the events enqueued and their deliveries, per consumer, after a scrape of the running demo', async () => {
    const before = await (await fetch(`${baseUrl}/metrics`)).text();
    expect(
      sample(before, 'outbox_events_enqueued_total', { event_name: 'crm.contact.created.v1' }),
    ).toBeUndefined();
    for (const name of ['Ada', 'Grace']) {
      const created = await fetch(`${baseUrl}/contacts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name, email: `${name.toLowerCase()}@example.com` }),
      });
      expect(created.status).toBe(201);
    }
    await waitFor(
      async () => (await db.sql(`select 1 from outbox_deliveries where status = 'delivered'`)).length === 8,
      { message: 'two events delivered to four consumers' },
    );
    // the round that recorded the deliveries is observed when it ends, after its commits (a scan for due
    // tenants may still follow them): scrape until it has
    await waitFor(
      async () =>
        (sample(
          await (await fetch(`${baseUrl}/metrics`)).text(),
          'outbox_relay_round_duration_seconds_count',
        ) ?? 0) >= 1,
      { message: 'a relay round observed' },
    );
    const response = await fetch(`${baseUrl}/metrics`);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(sample(text, 'outbox_events_enqueued_total', { event_name: 'crm.contact.created.v1' })).toBe(2);
    for (const consumer of ['welcome-email', 'contact-timeline', 'crm-audit', 'webhook:contacts-receiver']) {
      expect({
        consumer,
        delivered: sample(text, 'outbox_deliveries_total', { consumer, outcome: 'delivered' }),
      }).toEqual({
        consumer,
        delivered: 2,
      });
      expect(sample(text, 'outbox_delivery_duration_seconds_count', { consumer })).toBe(2);
    }
    expect(sample(text, 'outbox_relay_claimed_batch_size_count')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'outbox_relay_round_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(
      sample(text, 'outbox_webhook_circuits', { consumer: 'webhook:contacts-receiver', state: 'closed' }),
    ).toBe(1);
    expect(sample(text, 'outbox_oldest_pending_age_seconds')).toBe(0);
    expect(sample(text, 'outbox_lease_recoveries_total')).toBeUndefined();
  });
});

@Injectable()
class Consumers {
  fail = false;

  @OnOutboxEvent('test.metric.v1', {
    consumer: 'flaky',
    maxAttempts: 2,
    backoff: { baseMs: 1, capMs: 1, jitter: 0 },
  })
  flaky(_event: OutboxEvent): void {
    if (this.fail) throw new Error('planned');
  }
}

describe('OutboxMetricsModule', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db?.drop());

  it('labels the first maxTenants tenants and counts the rest as "other"; counts failures and dead letters', async () => {
    const registry = new Registry();
    const t = await buildApp({
      url: db.url,
      providers: [Consumers],
      imports: [OutboxMetricsModule.forRoot({ registry, tenantLabel: { maxTenants: 1 } })],
    });
    try {
      const enqueue = (tenantId: string) => enqueueIn(t, { tenantId, eventName: 'test.metric.v1' });
      await enqueue(TENANT_A);
      await t.relay.drain();
      t.app.get(Consumers).fail = true;
      await enqueue(TENANT_B);
      await enqueue(TENANT_B);
      await t.relay.drain();
      await makeRetriesDue(db);
      await t.relay.drain();
      const text = await registry.metrics();
      expect(
        sample(text, 'outbox_events_enqueued_total', { event_name: 'test.metric.v1', tenant: TENANT_A }),
      ).toBe(1);
      expect(
        sample(text, 'outbox_events_enqueued_total', { event_name: 'test.metric.v1', tenant: 'other' }),
      ).toBe(2);
      expect(
        sample(text, 'outbox_deliveries_total', {
          consumer: 'flaky',
          outcome: 'delivered',
          tenant: TENANT_A,
        }),
      ).toBe(1);
      expect(
        sample(text, 'outbox_deliveries_total', { consumer: 'flaky', outcome: 'failed', tenant: 'other' }),
      ).toBe(2);
      expect(
        sample(text, 'outbox_deliveries_total', { consumer: 'flaky', outcome: 'dead', tenant: 'other' }),
      ).toBe(2);
      expect(text).not.toContain(TENANT_B);
    } finally {
      await t.close();
    }
  });

  it('loads prom-client only in an app that imports it', async () => {
    const child = (modules: string) =>
      run(
        process.execPath,
        [...TYPESCRIPT_NODE_ARGS, join(__dirname, '..', 'support', 'observability-peers-child.ts')],
        {
          env: { ...process.env, DATABASE_URL: db.url, MODULES: modules },
          timeout: 60_000,
        },
      );
    const plain = await child('board');
    expect(plain.stdout).toContain('DELIVERED 1');
    expect(plain.stdout).toContain('LOADED []');
    const withMetrics = await child('metrics');
    expect(withMetrics.stdout).toContain('DELIVERED 1');
    // (prom-client itself loads @opentelemetry/api when it is installed, for exemplars)
    expect(withMetrics.stdout).toMatch(/LOADED \[[^\]]*"prom-client"/);
  }, 120_000);
});

describe('OutboxMetricsModule and tenant subscriptions', () => {
  /** Each tenant names its own subscription: a name the operator never chose. */
  const TENANT_COUNT = 60;
  const tenants = Array.from({ length: TENANT_COUNT }, () => randomUUID());
  const subscriptionOptions = {
    allowPrivateTargets: ['127.0.0.1/32'],
    secretKeys: [{ id: 'test', key: randomBytes(32).toString('base64') }],
  };
  let db: TestDatabase;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
    const t = await buildApp({ url: db.url, webhooks: { subscriptions: subscriptionOptions } });
    try {
      const subscriptions = t.app.get(OutboxWebhookSubscriptions);
      for (const [i, tenantId] of tenants.entries()) {
        await subscriptions.add(tenantId, {
          name: `tenant-${i}-hook`,
          url: `${receiver.baseUrl}/${i}`,
          events: ['crm.contact.created.v1'],
        });
      }
    } finally {
      await t.close();
    }
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });

  /** One event per tenant, delivered to its subscription by an app with these metrics; the scrape after it. */
  async function scrapeAfterOneEventPerTenant(
    metrics: Parameters<typeof OutboxMetricsModule.forRoot>[0],
    { recovered }: { recovered: boolean } = { recovered: false },
  ): Promise<string> {
    const registry = new Registry();
    const t = await buildApp({
      url: db.url,
      webhooks: { subscriptions: subscriptionOptions },
      imports: [OutboxMetricsModule.forRoot({ ...metrics, registry })],
    });
    try {
      const sent = receiver.requests.length;
      for (const tenantId of tenants) await enqueueIn(t, { tenantId, eventName: 'crm.contact.created.v1' });
      await t.relay.drain();
      expect(receiver.requests.length - sent).toBe(TENANT_COUNT);
      if (recovered) {
        // as if the relay that sent them had died mid-attempt: every delivery is taken over from its lease
        await db.sql(
          `update outbox_deliveries set status = 'processing', lease_expires_at = now() - interval '1 second'`,
        );
        await t.relay.drain();
        expect(receiver.requests.length - sent).toBe(2 * TENANT_COUNT);
      }
      return await registry.metrics();
    } finally {
      await t.close();
    }
  }

  it('labels every subscription consumer "webhook-subscription" by default, whatever tenants name them', async () => {
    const text = await scrapeAfterOneEventPerTenant({}, { recovered: true });
    expect([...consumerValues(text)]).toEqual(['webhook-subscription']);
    expect(
      sample(text, 'outbox_deliveries_total', { consumer: 'webhook-subscription', outcome: 'delivered' }),
    ).toBe(2 * TENANT_COUNT);
    expect(sample(text, 'outbox_delivery_duration_seconds_count', { consumer: 'webhook-subscription' })).toBe(
      2 * TENANT_COUNT,
    );
    expect(sample(text, 'outbox_lease_recoveries_total', { consumer: 'webhook-subscription' })).toBe(
      TENANT_COUNT,
    );
    expect(
      sample(text, 'outbox_webhook_circuits', { consumer: 'webhook-subscription', state: 'closed' }),
    ).toBe(TENANT_COUNT);
    expect(text).not.toContain('tenant-0-hook');
    // docs/observability.md's worst case for the default settings, E + 20 C + 3 W + 39, with one event name, one
    // consumer label value and one webhook consumer label value however many tenants subscribe; all of it but
    // the outcomes not seen (failed, dead, deferred), the circuit states not seen (open, halfOpen) and the
    // fan-out reasons not seen (all but tenantConsumers)
    expect(seriesCount(text)).toBe(1 + 20 * 1 + 3 * 1 + 39 - 3 - 2 - 8);
    expect(sample(text, 'outbox_relay_fan_outs_total', { reason: 'tenantConsumers' })).toBeGreaterThan(0);
  });

  it('names at most maxSubscriptions subscriptions when the operator opts in, the rest by kind', async () => {
    const text = await scrapeAfterOneEventPerTenant({ subscriptionLabel: { maxSubscriptions: 5 } });
    const values = consumerValues(text);
    expect(values.size).toBe(5 + 1);
    expect(values).toContain('webhook-subscription');
    const named = [...values].filter((value) => value !== 'webhook-subscription');
    for (const value of named) expect(value).toMatch(/^subscription:tenant-\d+-hook$/);
    let delivered = 0;
    for (const consumer of values)
      delivered += sample(text, 'outbox_deliveries_total', { consumer, outcome: 'delivered' }) ?? 0;
    expect(delivered).toBe(TENANT_COUNT);
    for (const consumer of named)
      expect(sample(text, 'outbox_deliveries_total', { consumer, outcome: 'delivered' })).toBe(1);
  });

  it.each([{ maxSubscriptions: 0 }, { maxSubscriptions: 2.5 }, { top: 5 }, true])(
    'refuses subscriptionLabel %p at boot, naming the option',
    async (subscriptionLabel) => {
      const error = await buildApp({
        url: db.url,
        imports: [OutboxMetricsModule.forRoot({ subscriptionLabel: subscriptionLabel as never })],
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      expect((error as Error).message).toContain('subscriptionLabel');
    },
  );
});
