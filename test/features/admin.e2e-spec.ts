import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxConsumerRegistry,
  OutboxValidationError,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminModule, OutboxAdminService, OutboxHealthIndicator } from 'nestjs-pg-outbox/admin';
import { OutboxWebhookService } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  deliveryOf,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueIn,
  eventOf,
  makeRetriesDue,
  recordEffect,
  TENANT,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';

const OTHER = TENANTS[1];
const fast = { maxAttempts: 2, backoff: { baseMs: 1, capMs: 1, jitter: 0 } };

/** `billing` takes every order event, `shipping` only placed ones; each fails while broken or when the payload says so. */
@Injectable()
class OrderConsumers {
  readonly calls: { consumer: string; eventId: string }[] = [];
  readonly broken = new Set<string>();

  private async run(consumer: string, event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.calls.push({ consumer, eventId: event.eventId });
    await recordEffect(event, context);
    if (this.broken.has(consumer) || (event.data as Record<string, unknown>)[`fail_${consumer}`])
      throw new Error(`planned failure of ${consumer}`);
  }

  @OnOutboxEvent('test.order.*', { consumer: 'billing', ...fast })
  billing(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.run('billing', event, context);
  }

  @OnOutboxEvent('test.order.placed.v1', { consumer: 'shipping', ...fast })
  shipping(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return this.run('shipping', event, context);
  }
}

/** Lets a request through when it carries `x-admin: yes`. */
@Injectable()
class HeaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return (
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-admin'] === 'yes'
    );
  }
}

/** A guard whose constructor takes one injected argument, as a session guard's does. */
@Injectable()
class SessionGuard implements CanActivate {
  constructor(private readonly admin: OutboxAdminService) {}

  canActivate(): boolean {
    return this.admin !== undefined;
  }
}

let db: TestDatabase;
let t: TestApp;
let consumers: OrderConsumers;
let admin: OutboxAdminService;

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
  t = await buildApp({ url: db.url, providers: [OrderConsumers], imports: [TerminusModule.forRoot()] });
  consumers = t.app.get(OrderConsumers);
  admin = t.app.get(OutboxAdminService);
});
afterAll(async () => {
  await t?.close();
  await db?.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, EFFECTS_TABLE, 'outbox_consumers', 'outbox_consumer_instances');
  await t.relay.heartbeat();
  consumers.calls.length = 0;
  consumers.broken.clear();
});

const enqueue = (eventName: string, payload: Record<string, unknown> = {}, tenantId = TENANT) =>
  enqueueIn(t, { tenantId, eventName, payload });
/** Drains, making retries due at once, until no delivery is waiting. */
const settle = async (): Promise<void> => {
  for (let round = 0; round < 10; round++) {
    await makeRetriesDue(db);
    await t.relay.drain();
    const [{ n }] = await db.sql<{ n: number }>(
      `select count(*)::int as n from outbox_deliveries where status in ('pending', 'failed', 'processing')`,
    );
    if (n === 0) return;
  }
  throw new Error('deliveries did not settle');
};

describe('OutboxAdminService', () => {
  it('counts events per status and deliveries per consumer, the oldest pending age, and orphaned consumers', async () => {
    t.app.get(OutboxConsumerRegistry).addTenantSource({
      consumersForTenant: async (tenantId) =>
        tenantId === TENANT
          ? [
              {
                name: 'hook:42',
                kind: 'webhook',
                eventName: 'test.never.v1',
                eventNames: ['test.never.v1'],
                hostClass: HeaderGuard,
                methodName: 'deliver',
                maxAttempts: 1,
                timeoutMs: 1000,
                backoff: { baseMs: 1, capMs: 1, jitter: 0 },
                deliver: async () => ({ status: 'delivered' }),
              },
            ]
          : [],
    });
    const ok = await enqueue('test.order.placed.v1');
    await enqueue('test.order.placed.v1', { fail_billing: true });
    await enqueue('test.order.placed.v1', {}, OTHER);
    await settle();
    const waiting = await enqueue('test.order.placed.v1');
    await db.sql(`update event_outbox set created_at = now() - interval '1 hour' where id = $1`, [waiting]);
    // Rows a renamed handler left behind, rows of a consumer no instance reported for two hours, and rows of a
    // tenant-scoped consumer (not in the shared registry, but live for this tenant).
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('retired', '{*}', now() - interval '2 hours')`,
    );
    for (const [consumer, status] of [
      ['OldName.billing', 'pending'],
      ['retired', 'delivered'],
      ['hook:42', 'delivered'],
    ]) {
      await db.sql(
        `insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status)
         select id, seq, tenant_id, $2, $3 from event_outbox where id = $1`,
        [ok, consumer, status],
      );
    }

    const stats = await admin.stats(TENANT);
    expect(stats.events).toEqual({
      pending: 1,
      processing: 0,
      published: 1,
      failed: 1,
      no_handlers: 0,
      scheduled: 0,
    });
    const none = { pending: 0, processing: 0, delivered: 0, failed: 0, dead: 0 };
    expect(stats.consumers).toEqual({
      billing: { ...none, delivered: 1, dead: 1 },
      shipping: { ...none, delivered: 2 },
      'OldName.billing': { ...none, pending: 1 },
      retired: { ...none, delivered: 1 },
      'hook:42': { ...none, delivered: 1 },
    });
    expect(stats.orphanedConsumers).toEqual(['OldName.billing', 'retired']);
    expect(stats.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(3599);
    expect(stats.oldestPendingAgeSeconds).toBeLessThan(3700);
    expect((await admin.stats(OTHER)).events.published).toBe(1);
  });

  it('lists failed events newest first, page by page, filtered by consumer or event name, with each consumer’s last error', async () => {
    const ids: string[] = [];
    const plan: [string, Record<string, unknown>][] = [
      ...Array.from({ length: 5 }, (): [string, Record<string, unknown>] => [
        'test.order.placed.v1',
        { fail_billing: true },
      ]),
      ['test.order.cancelled.v1', { fail_billing: true }],
      ['test.order.cancelled.v1', { fail_billing: true }],
      ['test.order.placed.v1', { fail_shipping: true }],
    ];
    for (const [name, payload] of plan) {
      ids.push(await enqueue(name, payload));
      await settle(); // one by one: each fails at its own time
    }
    await enqueue('test.order.placed.v1');
    await settle();
    const newestFirst = [...ids].reverse();

    const pages = [
      await admin.failedEvents(TENANT, { limit: 3 }),
      await admin.failedEvents(TENANT, { limit: 3, offset: 3 }),
      await admin.failedEvents(TENANT, { limit: 3, offset: 6 }),
    ];
    expect(pages.map((p) => p.total)).toEqual([8, 8, 8]);
    expect(pages.flatMap((p) => p.items.map((e) => e.eventId))).toEqual(newestFirst);
    expect(await admin.failedEvents(TENANT, { limit: 3, offset: 9 })).toEqual({
      total: 8,
      limit: 3,
      offset: 9,
      items: [],
    });

    expect((await admin.failedEvents(TENANT, { consumer: 'shipping' })).items.map((e) => e.eventId)).toEqual([
      ids[7],
    ]);
    expect((await admin.failedEvents(TENANT, { consumer: 'billing' })).total).toBe(7);
    expect(
      (await admin.failedEvents(TENANT, { eventName: 'test.order.cancelled.v1' })).items.map(
        (e) => e.eventId,
      ),
    ).toEqual([ids[6], ids[5]]);
    expect(await admin.failedEvents(TENANT, { consumer: 'nobody' })).toMatchObject({ total: 0, items: [] });

    const [first] = (await admin.failedEvents(TENANT, { limit: 1, offset: 3 })).items;
    expect(first).toMatchObject({
      eventId: ids[4],
      eventName: 'test.order.placed.v1',
      error: expect.stringContaining('billing'),
    });
    expect(first.failedAt).toBeInstanceOf(Date);
    expect(first.deliveries).toEqual([
      expect.objectContaining({
        consumer: 'billing',
        status: 'dead',
        attempts: 2,
        errorCode: expect.any(String),
        lastError: expect.stringContaining('planned failure of billing'),
      }),
      expect.objectContaining({ consumer: 'shipping', status: 'delivered', attempts: 1 }),
    ]);
  });

  it('refuses bad input with an OutboxValidationError naming the field', async () => {
    const cases: [() => Promise<unknown>, string][] = [
      [() => admin.stats('tenant-1'), 'tenantId'],
      [() => admin.failedEvents(TENANT, { limit: 0 }), 'limit'],
      [() => admin.failedEvents(TENANT, { limit: 501 }), 'limit'],
      [() => admin.failedEvents(TENANT, { limit: 1.5 }), 'limit'],
      [() => admin.failedEvents(TENANT, { offset: -1 }), 'offset'],
      [() => admin.failedEvents(TENANT, { eventName: 'Order Placed' }), 'eventName'],
      [() => admin.failedEvents(TENANT, { consumer: '' }), 'consumer'],
      [() => admin.deliveries(TENANT, '42'), 'eventId'],
      [() => admin.replayEvent(TENANT, 'x'), 'eventId'],
      [() => admin.replayFailed('', {}), 'tenantId'],
      [() => admin.purgeEvent(TENANT, 'x'), 'eventId'],
    ];
    for (const [call, field] of cases) {
      const error = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OutboxValidationError);
      expect((error as OutboxValidationError).field).toBe(field);
    }
  });

  it("shows one event's delivery to each consumer, with the inbox row of the delivered one", async () => {
    const id = await enqueue('test.order.placed.v1', { fail_billing: true, n: 7 });
    await settle();
    const found = await admin.deliveries(TENANT, id);
    expect(found).toMatchObject({
      eventId: id,
      status: 'failed',
      payload: { fail_billing: true, n: 7 },
      deliveriesOpen: 0,
      deliveriesDead: 1,
    });
    expect(found!.deliveries).toEqual([
      expect.objectContaining({
        consumer: 'billing',
        status: 'dead',
        attempts: 2,
        inboxAt: null,
        processedAt: null,
      }),
      expect.objectContaining({
        consumer: 'shipping',
        status: 'delivered',
        attempts: 1,
        inboxAt: expect.any(Date),
      }),
    ]);
    expect(await admin.deliveries(TENANT, 'f0000000-0000-4000-8000-000000000000')).toBeNull();
  });

  it("replays one consumer only: the other consumer's delivered row is untouched and its handler does not run again", async () => {
    consumers.broken.add('billing');
    const id = await enqueue('test.order.placed.v1');
    await settle();
    const shippingBefore = await deliveryOf(db, id, 'shipping');
    expect(await eventOf(db, id)).toMatchObject({ status: 'failed', deliveries_open: 0, deliveries_dead: 1 });

    consumers.broken.clear();
    consumers.calls.length = 0;
    expect(await admin.replayEvent(TENANT, id, { consumer: 'billing' })).toBe(1);
    expect(await eventOf(db, id)).toMatchObject({
      status: 'processing',
      deliveries_open: 1,
      deliveries_dead: 0,
      failed_at: null,
    });
    expect(await deliveryOf(db, id, 'billing')).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(await deliveryOf(db, id, 'shipping')).toEqual(shippingBefore);

    await t.relay.drain();
    expect(consumers.calls).toEqual([{ consumer: 'billing', eventId: id }]);
    expect(await eventOf(db, id)).toMatchObject({
      status: 'published',
      deliveries_open: 0,
      deliveries_dead: 0,
    });
    expect(
      await db.sql(
        'select consumer, count(*)::int as n from test_effects group by consumer order by consumer',
      ),
    ).toEqual([
      { consumer: 'billing', n: 1 },
      { consumer: 'shipping', n: 1 },
    ]);
    expect(await admin.replayEvent(TENANT, id)).toBe(0);
  });

  it('replays every dead consumer of an event, and keeps the event failed while a dead one remains', async () => {
    consumers.broken.add('billing');
    consumers.broken.add('shipping');
    const id = await enqueue('test.order.placed.v1');
    await settle();
    expect(await eventOf(db, id)).toMatchObject({ status: 'failed', deliveries_dead: 2 });

    expect(await admin.replayEvent(TENANT, id, { consumer: 'shipping' })).toBe(1);
    expect(await eventOf(db, id)).toMatchObject({ status: 'failed', deliveries_open: 1, deliveries_dead: 1 });
    consumers.broken.clear();
    expect(await admin.replayEvent(TENANT, id)).toBe(1);
    expect(await eventOf(db, id)).toMatchObject({
      status: 'processing',
      deliveries_open: 2,
      deliveries_dead: 0,
    });
    await t.relay.drain();
    expect(await eventOf(db, id)).toMatchObject({ status: 'published', deliveries_open: 0 });
  });

  it('replays the dead and failed deliveries matching a filter, with attempts reset and due now', async () => {
    consumers.broken.add('billing');
    const placed = await enqueue('test.order.placed.v1');
    const cancelled = await enqueue('test.order.cancelled.v1');
    await settle();
    const retrying = await enqueue('test.order.placed.v1');
    await t.relay.runOnce(); // billing's first attempt fails: retry scheduled, not dead
    await db.sql(
      `update outbox_deliveries set next_attempt_at = now() + interval '1 hour' where event_id = $1 and status = 'failed'`,
      [retrying],
    );
    expect(await deliveryOf(db, retrying, 'billing')).toMatchObject({ status: 'failed', attempt_count: 1 });

    expect(await admin.replayFailed(TENANT, { eventName: 'test.order.cancelled.v1' })).toBe(1);
    expect(await deliveryOf(db, cancelled, 'billing')).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(await admin.replayFailed(TENANT, { consumer: 'shipping' })).toBe(0);
    expect(await admin.replayFailed(TENANT, { consumer: 'billing' })).toBe(2);
    expect(await deliveryOf(db, placed, 'billing')).toMatchObject({ status: 'pending', attempt_count: 0 });
    const replayedRetry = (
      await db.sql<{ attempt_count: number; due: boolean }>(
        `select attempt_count, next_attempt_at <= now() as due from outbox_deliveries where event_id = $1 and consumer_name = 'billing'`,
        [retrying],
      )
    )[0];
    expect(replayedRetry).toEqual({ attempt_count: 0, due: true });
    expect(await eventOf(db, retrying)).toMatchObject({
      status: 'processing',
      deliveries_open: 1,
      deliveries_dead: 0,
    });

    consumers.broken.clear();
    await t.relay.drain();
    expect(await db.sql(`select status, count(*)::int as n from event_outbox group by status`)).toEqual([
      { status: 'published', n: 3 },
    ]);
  });

  it('leaves pending and in-flight deliveries alone, and deletes nothing', async () => {
    consumers.broken.add('billing');
    const dead = await enqueue('test.order.cancelled.v1');
    await settle();
    // An event in flight: billing leased by some relay, shipping waiting for its host; and an event not fanned out yet.
    const inFlight = await enqueue('test.order.placed.v1');
    const notFannedOut = await enqueue('test.order.placed.v1');
    await db.sql(`update event_outbox set status = 'processing', deliveries_open = 2 where id = $1`, [
      inFlight,
    ]);
    await db.sql(
      `insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, attempt_count, lease_token, lease_expires_at, next_attempt_at)
       select e.id, e.seq, e.tenant_id, d.consumer, d.status, d.attempts, d.token, d.lease, d.due
         from event_outbox e,
              (values ('billing', 'processing', 1, gen_random_uuid(), now() + interval '1 minute', now()),
                      ('shipping', 'pending', 0, null, null, now() + interval '1 hour')) as d(consumer, status, attempts, token, lease, due)
        where e.id = $1`,
      [inFlight],
    );
    const snapshot = () =>
      Promise.all([
        db.sql('select * from event_outbox where id <> $1 order by id', [dead]),
        db.sql('select * from outbox_deliveries where event_id <> $1 order by id', [dead]),
      ]);
    const before = await snapshot();

    expect(await admin.replayFailed(TENANT)).toBe(1);
    expect(await admin.replayEvent(TENANT, inFlight)).toBe(0);
    expect(await admin.replayEvent(TENANT, notFannedOut)).toBe(0);
    expect(await snapshot()).toEqual(before);
  });

  it('purges failed events with their delivery and inbox rows, but not events still in progress', async () => {
    consumers.broken.add('billing');
    const deadLetter = await enqueue('test.order.placed.v1');
    await settle();
    const stillRetrying = await enqueue('test.order.placed.v1');
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, 'test.order.placed.v1', '{}')`,
      [OTHER],
    );
    await settle();
    // shipping of `stillRetrying` is back to retrying: the event stays failed with an open delivery
    await db.sql(
      `update outbox_deliveries set status = 'failed', next_attempt_at = now() + interval '1 hour' where event_id = $1 and consumer_name = 'shipping'`,
      [stillRetrying],
    );
    await db.sql(`update event_outbox set deliveries_open = 1 where id = $1`, [stillRetrying]);
    expect(
      await db.sql('select count(*)::int as n from consumer_inbox where event_id = $1', [deadLetter]),
    ).toEqual([{ n: 1 }]);

    expect(await admin.purgeFailed(TENANT, { consumer: 'shipping' })).toBe(0);
    expect(await admin.purgeFailed(TENANT)).toBe(1);
    for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox']) {
      const column = table === 'event_outbox' ? 'id' : 'event_id';
      expect(
        await db.sql(`select count(*)::int as n from ${table} where ${column} = $1`, [deadLetter]),
      ).toEqual([{ n: 0 }]);
    }
    expect(await eventOf(db, stillRetrying)).toMatchObject({ status: 'failed' });

    const pending = await enqueue('test.order.placed.v1');
    expect(await admin.purgeEvent(TENANT, pending)).toBe(false);
    consumers.broken.clear();
    const published = await enqueue('test.order.placed.v1');
    await t.relay.drain();
    expect(await admin.purgeEvent(TENANT, published)).toBe(true);
    expect(await eventOf(db, published)).toBeUndefined();
  });

  it("purges the relay's inbox rows of a failed event, not the inbox's record of a received message with its id", async () => {
    consumers.broken.add('billing');
    const deadLetter = await enqueue('test.order.placed.v1');
    await settle();
    // the event sent through a broker and received back by an inbox consumer of this database, as the inbox records it
    await db.sql(
      `insert into consumer_inbox (event_id, consumer_name, tenant_id, status, attempts, first_seen_at, last_seen_at, processed_at)
       values ($1, 'rmq:order-sync', $2, 'processed', 1, now(), now(), now())`,
      [deadLetter, TENANT],
    );
    const inboxRows = () =>
      db.sql<{ consumer_name: string }>(
        `select consumer_name from consumer_inbox where event_id = $1 order by consumer_name collate "C"`,
        [deadLetter],
      );
    expect(await inboxRows()).toEqual([{ consumer_name: 'rmq:order-sync' }, { consumer_name: 'shipping' }]);

    expect(await admin.purgeEvent(TENANT, deadLetter)).toBe(true);
    expect(await inboxRows()).toEqual([{ consumer_name: 'rmq:order-sync' }]);
  });

  it('forgets a consumer no instance hosts any more, and refuses to forget a live one', async () => {
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('retired', '{*}', now() - interval '2 hours')`,
    );
    await db.sql(
      `insert into outbox_consumer_instances (consumer_name, instance_id, last_seen_at) values ('retired', 'old-host', now() - interval '2 hours')`,
    );
    const live = await admin.forgetConsumer('billing').then(
      () => null,
      (e: unknown) => e,
    );
    expect(live).toBeInstanceOf(OutboxValidationError);
    expect((live as OutboxValidationError).message).toContain('"billing"');
    expect(await admin.forgetConsumer('never-heard-of')).toBe(false);
    expect(await admin.forgetConsumer('retired')).toBe(true);
    expect(
      await db.sql(
        `select count(*)::int as n from outbox_consumer_instances where consumer_name = 'retired'`,
      ),
    ).toEqual([{ n: 0 }]);

    // Fan-out no longer creates rows for it.
    const id = await enqueue('test.order.placed.v1');
    await t.relay.drain();
    expect(
      (
        await db.sql<{ consumer_name: string }>(
          'select consumer_name from outbox_deliveries where event_id = $1 order by 1',
          [id],
        )
      ).map((r) => r.consumer_name),
    ).toEqual(['billing', 'shipping']);
  });

  it('works in an app without OutboxWebhooksModule: no webhook circuits, and no subscription to pause', async () => {
    expect(() => t.app.get(OutboxWebhookService, { strict: false })).toThrow();
    await enqueue('test.order.placed.v1');
    await t.relay.drain();
    const stats = await admin.stats(TENANT);
    expect(stats.webhookCircuits).toEqual([]);
    expect(stats.consumers).toHaveProperty('billing');
    await expect(admin.setSubscriptionPaused(TENANT, 'erp', true)).rejects.toThrow(
      'OutboxWebhooksModule is not imported',
    );
  });
});

describe('OutboxAdminModule (REST)', () => {
  let http: HttpTestApp;

  beforeAll(async () => {
    http = await buildHttpApp({
      url: db.url,
      imports: [OutboxAdminModule.forRoot({ guards: [HeaderGuard] })],
    });
  });
  afterAll(async () => {
    await http?.close();
  });

  const call = async (
    method: 'GET' | 'POST',
    path: string,
    options: { body?: unknown; admin?: boolean } = {},
  ) => {
    const response = await fetch(`${http.baseUrl}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(options.admin === false ? {} : { 'x-admin': 'yes' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('serves stats, failed events, deliveries and replay behind the guard', async () => {
    consumers.broken.add('billing');
    const id = await enqueue('test.order.placed.v1');
    await settle();
    consumers.broken.clear();

    expect((await call('GET', `/outbox/tenants/${TENANT}/stats`, { admin: false })).status).toBe(403);
    const stats = await call('GET', `/outbox/tenants/${TENANT}/stats`);
    expect(stats).toMatchObject({
      status: 200,
      body: { tenantId: TENANT, events: { failed: 1 }, consumers: { billing: { dead: 1 } } },
    });

    const failed = await call('GET', `/outbox/tenants/${TENANT}/failed?limit=1&consumer=billing`);
    expect(failed).toMatchObject({
      status: 200,
      body: { total: 1, limit: 1, offset: 0, items: [{ eventId: id }] },
    });
    const history = await call('GET', `/outbox/tenants/${TENANT}/events/${id}/deliveries`);
    expect(
      (history.body.deliveries as { consumer: string; status: string }[]).map(
        (d) => `${d.consumer}:${d.status}`,
      ),
    ).toEqual(['billing:dead', 'shipping:delivered']);

    expect(
      await call('POST', `/outbox/tenants/${TENANT}/events/${id}/replay`, { body: { consumer: 'shipping' } }),
    ).toEqual({ status: 200, body: { reset: 0 } });
    expect(await call('POST', `/outbox/tenants/${TENANT}/replay`, { body: {} })).toEqual({
      status: 200,
      body: { reset: 1 },
    });
    await t.relay.drain();
    expect(await eventOf(db, id)).toMatchObject({ status: 'published' });
  });

  it('answers 400 naming the field for bad input, and 404 for an unknown event', async () => {
    expect(await call('GET', '/outbox/tenants/not-a-uuid/stats')).toMatchObject({
      status: 400,
      body: { field: 'tenantId' },
    });
    expect(await call('GET', `/outbox/tenants/${TENANT}/failed?limit=abc`)).toMatchObject({
      status: 400,
      body: { field: 'limit' },
    });
    expect(
      await call('POST', `/outbox/tenants/${TENANT}/replay`, { body: { eventName: 'Nope' } }),
    ).toMatchObject({ status: 400, body: { field: 'eventName' } });
    expect(
      (await call('GET', `/outbox/tenants/${TENANT}/events/f0000000-0000-4000-8000-000000000000/deliveries`))
        .status,
    ).toBe(404);
    expect((await call('POST', `/outbox/tenants/${TENANT}/replay`, { admin: false })).status).toBe(403);
  });

  it('refuses to boot when guards is not a non-empty array of guards, allowUnguarded or not', async () => {
    const malformed: [guards: unknown, given: RegExp][] = [
      [HeaderGuard, /the class HeaderGuard on its own/],
      // a lone class whose constructor takes an injected argument (its length is 1, not 0)
      [SessionGuard, /the class SessionGuard on its own/],
      [null, /got null/],
      ['HeaderGuard', /got "HeaderGuard"/],
      [{ name: 'admin' }, /without canActivate/],
      [[], /no guard/],
      [[undefined], /element 0 is undefined/],
      [[HeaderGuard, {}], /element 1 is an object/],
      [[42], /element 0 is 42/],
      [[class NotAGuard {}], /element 0 is the class NotAGuard/],
    ];
    for (const [guards, given] of malformed) {
      for (const allowUnguarded of [undefined, true]) {
        const failure = buildHttpApp({
          url: db.url,
          imports: [OutboxAdminModule.forRoot({ guards: guards as never, allowUnguarded })],
        });
        if (Array.isArray(guards) && guards.length === 0 && allowUnguarded) {
          await (await failure).close();
          continue;
        }
        await expect(failure).rejects.toBeInstanceOf(OutboxConfigurationError);
        await expect(failure).rejects.toThrow(/OutboxAdminModule\.forRoot\(\)/);
        await expect(failure).rejects.toThrow(/guards/);
        await expect(failure).rejects.toThrow(given);
      }
    }
  });

  it('refuses to boot without a guard unless allowUnguarded is set, and honours a custom path', async () => {
    const failure = buildHttpApp({ url: db.url, imports: [OutboxAdminModule.forRoot({})] });
    await expect(failure).rejects.toBeInstanceOf(OutboxConfigurationError);
    await expect(failure).rejects.toThrow(/no guard/);

    const open = await buildHttpApp({
      url: db.url,
      imports: [OutboxAdminModule.forRoot({ allowUnguarded: true, path: 'ops/outbox' })],
    });
    try {
      const response = await fetch(`${open.baseUrl}/ops/outbox/tenants/${TENANT}/stats`);
      expect(response.status).toBe(200);
      expect((await fetch(`${open.baseUrl}/outbox/tenants/${TENANT}/stats`)).status).toBe(404);
    } finally {
      await open.close();
    }
  });
});

describe('OutboxHealthIndicator', () => {
  it('is up with no backlog, and down once the oldest pending work is older than the threshold', async () => {
    const health = t.app.get(OutboxHealthIndicator);
    expect(await health.isHealthy('outbox')).toEqual({
      outbox: {
        status: 'up',
        relay: 'disabled',
        lastRoundAt: expect.any(String),
        oldestPendingAgeSeconds: 0,
        maxPendingAgeSeconds: 300,
      },
    });
    const id = await enqueue('test.order.placed.v1');
    await db.sql(`update event_outbox set created_at = now() - interval '10 minutes' where id = $1`, [id]);
    const down = await health.isHealthy('outbox', { maxPendingAgeSeconds: 120 });
    expect(down.outbox).toMatchObject({
      status: 'down',
      message: expect.stringContaining('oldest pending work'),
    });
    expect(down.outbox.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(600);
    expect((await health.isHealthy('outbox', { maxPendingAgeSeconds: 3600 })).outbox.status).toBe('up');
  });

  it('does not count the pending rows of a consumer no instance hosts any more', async () => {
    const health = t.app.get(OutboxHealthIndicator);
    const id = await enqueue('test.order.placed.v1');
    await t.relay.drain();
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('retired', '{*}', now() - interval '2 hours')`,
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, created_at)
       select id, seq, tenant_id, 'retired', 'pending', now() - interval '2 hours' from event_outbox where id = $1`,
      [id],
    );
    expect((await health.isHealthy('outbox', { maxPendingAgeSeconds: 60 })).outbox).toMatchObject({
      status: 'up',
      oldestPendingAgeSeconds: 0,
    });
    await db.sql(`update outbox_consumers set last_seen_at = now() where name = 'retired'`);
    expect((await health.isHealthy('outbox', { maxPendingAgeSeconds: 60 })).outbox.status).toBe('down');
  });

  it('reports the relay running, and down once it stopped', async () => {
    const running = await buildApp({
      url: db.url,
      providers: [OrderConsumers],
      outbox: { relay: { enabled: true, pollIntervalMs: 50 } },
    });
    try {
      const health = running.app.get(OutboxHealthIndicator);
      expect((await health.isHealthy('outbox')).outbox).toMatchObject({ status: 'up', relay: 'running' });
      // A relay that reports its last round (read defensively) is down once that round is too old.
      Object.defineProperty(running.relay, 'lastRoundAt', {
        configurable: true,
        get: () => new Date(Date.now() - 120_000),
      });
      expect((await health.isHealthy('outbox', { maxRoundAgeSeconds: 60 })).outbox).toMatchObject({
        status: 'down',
        message: expect.stringContaining('last round'),
      });
      Object.defineProperty(running.relay, 'lastRoundAt', { configurable: true, get: () => new Date() });
      expect((await health.isHealthy('outbox', { maxRoundAgeSeconds: 60 })).outbox).toMatchObject({
        status: 'up',
        lastRoundAt: expect.any(String),
      });
      await running.relay.stop();
      expect((await health.isHealthy('outbox')).outbox).toMatchObject({
        status: 'down',
        relay: 'stopped',
        message: expect.stringContaining('relay'),
      });
    } finally {
      await running.close();
    }
  });

  it('plugs into @nestjs/terminus: ok when healthy, a 503 error naming the outbox when not', async () => {
    const terminus = t.app.get(HealthCheckService);
    const health = t.app.get(OutboxHealthIndicator);
    const check = () => terminus.check([() => health.isHealthy('outbox', { maxPendingAgeSeconds: 60 })]);
    expect(await check()).toMatchObject({ status: 'ok', info: { outbox: { status: 'up' } } });

    const id = await enqueue('test.order.placed.v1');
    await db.sql(`update event_outbox set created_at = now() - interval '5 minutes' where id = $1`, [id]);
    const failure = await check().then(
      () => null,
      (e: { getStatus(): number; getResponse(): unknown }) => e,
    );
    expect(failure?.getStatus()).toBe(503);
    expect(failure?.getResponse()).toMatchObject({ status: 'error', error: { outbox: { status: 'down' } } });
    await waitFor(
      async () =>
        (await t.relay.drain()) &&
        (await health.isHealthy('outbox', { maxPendingAgeSeconds: 60 })).outbox.status === 'up',
      {
        message: 'health back up after the backlog drained',
      },
    );
  });
});
