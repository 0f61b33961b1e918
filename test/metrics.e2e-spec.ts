import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { OnOutboxEvent, OutboxMetricsModule, type OutboxEvent } from 'nestjs-pg-outbox';
import { AppModule } from '../apps/demo/src/app.module';
import { buildApp } from './support/build-app';
import { TYPESCRIPT_NODE_ARGS } from './support/child-relay';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from './support/test-database';
import { waitFor } from './support/wait-for';
import { enqueueIn, makeRetriesDue, TENANTS } from './support/outbox-fixture';

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
        [...TYPESCRIPT_NODE_ARGS, join(__dirname, 'support', 'observability-peers-child.ts')],
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
