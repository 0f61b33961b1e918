import { randomBytes } from 'node:crypto';
import { OutboxValidationError } from 'nestjs-pg-outbox';
import {
  generateWebhookSecret,
  OutboxWebhookService,
  OutboxWebhookSubscriptions,
  verifyWebhook,
  type OutboxWebhookEnvelope,
} from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn } from '../support/outbox-fixture';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

const A = '8e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b';
const B = '9f4a5b6c-7d8e-4f9a-8b1c-2d3e4f5a6b7c';
const C = '0a5b6c7d-8e9f-4a0b-9c2d-3e4f5a6b7c8d';
/** The receiver listens on loopback, which tenant subscriptions may reach only when the operator allows it. */
const SUBSCRIPTIONS = {
  cacheTtlMs: 200,
  allowPrivateTargets: ['127.0.0.1/32'],
  secretKeys: [{ id: 'test', key: randomBytes(32).toString('base64') }],
};

/** Fake timers for `Date` alone, running on with real time: every other API jest can replace stays real. */
const FAKE_DATE_ONLY = {
  advanceTimers: true,
  doNotFake: [
    'hrtime',
    'nextTick',
    'performance',
    'queueMicrotask',
    'requestAnimationFrame',
    'cancelAnimationFrame',
    'requestIdleCallback',
    'cancelIdleCallback',
    'setImmediate',
    'clearImmediate',
    'setInterval',
    'clearInterval',
    'setTimeout',
    'clearTimeout',
  ],
} satisfies Parameters<typeof jest.useFakeTimers>[0];

describe('webhook subscriptions per tenant', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let t: TestApp;
  let subscriptions: OutboxWebhookSubscriptions;

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
    t = await buildApp({ url: db.url, webhooks: { subscriptions: SUBSCRIPTIONS } });
    subscriptions = t.app.get(OutboxWebhookSubscriptions);
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await db?.drop();
  });
  beforeEach(() => {
    receiver.requests.length = 0;
  });

  const enqueue = (
    app: TestApp,
    tenantId: string,
    eventName: string,
    payload: Record<string, unknown> = {},
  ) => enqueueIn(app, { tenantId, eventName, payload });
  const deliveryOf = async (eventId: string) =>
    (
      await db.sql<Record<string, unknown>>(
        'select consumer_name, status, attempt_count, error_code from outbox_deliveries where event_id = $1',
        [eventId],
      )
    )[0];
  const eventStatus = async (id: string) =>
    (await db.sql<{ status: string }>('select status from event_outbox where id = $1', [id]))[0]!.status;

  it('delivers a tenant’s events to the subscription it added at run time, and to nobody else’s', async () => {
    const before = await enqueue(t, A, 'crm.contact.created.v1');
    await t.relay.drain();
    expect(await eventStatus(before)).toBe('no_handlers');

    const secret = generateWebhookSecret();
    const added = await subscriptions.add(A, {
      name: 'crm',
      url: `${receiver.baseUrl}/a`,
      events: ['crm.contact.*'],
      secret,
      headers: { authorization: 'Bearer a' },
    });
    expect(added).toMatchObject({
      tenantId: A,
      name: 'crm',
      consumer: 'subscription:crm',
      status: 'active',
      hasSecret: true,
      headerNames: ['authorization'],
    });
    expect(added).not.toHaveProperty('secret');
    await subscriptions.add(B, {
      name: 'crm',
      url: `${receiver.baseUrl}/b`,
      events: ['crm.contact.created.v1'],
    });

    const aCreated = await enqueue(t, A, 'crm.contact.created.v1', { who: 'a' });
    const aUpdated = await enqueue(t, A, 'crm.contact.updated.v1', { who: 'a' });
    const aDeal = await enqueue(t, A, 'crm.deal.created.v1');
    const bCreated = await enqueue(t, B, 'crm.contact.created.v1', { who: 'b' });
    const bUpdated = await enqueue(t, B, 'crm.contact.updated.v1');
    expect((await t.relay.drain()).succeeded).toBe(3);

    const toA = receiver.to('/a');
    expect(toA.map((r) => r.id).sort()).toEqual([aCreated, aUpdated].sort());
    for (const request of toA) {
      const envelope = verifyWebhook<{ who: string }>({
        secret,
        headers: request.headers,
        body: request.body,
      }) as OutboxWebhookEnvelope<{ who: string }>;
      expect(envelope).toMatchObject({ tenantId: A, data: { who: 'a' } });
      expect(request.headers.authorization).toBe('Bearer a');
    }
    expect(receiver.to('/b').map((r) => [r.id, JSON.parse(r.body).tenantId])).toEqual([[bCreated, B]]);
    expect(receiver.to('/b')[0]!.headers['webhook-signature']).toBeUndefined();
    expect(await deliveryOf(aCreated)).toMatchObject({
      consumer_name: 'subscription:crm',
      status: 'delivered',
    });
    expect(await eventStatus(aDeal)).toBe('no_handlers');
    expect(await eventStatus(bUpdated)).toBe('no_handlers');
    expect(
      t.app
        .get(OutboxWebhookService)
        .circuitStates()
        .map((s) => [s.consumer, s.tenantId, s.state])
        .sort(),
    ).toEqual([
      ['subscription:crm', A, 'closed'],
      ['subscription:crm', B, 'closed'],
    ]);
  });

  it('refuses a name the tenant already uses and bad settings, naming the field', async () => {
    const duplicate = await subscriptions
      .add(A, { name: 'crm', url: `${receiver.baseUrl}/a2`, events: ['*'] })
      .catch((e: unknown) => e);
    expect(duplicate).toBeInstanceOf(OutboxValidationError);
    expect((duplicate as OutboxValidationError).field).toBe('name');
    const bad = await subscriptions
      .add(A, { name: 'other', url: 'not a url', events: ['*'] })
      .catch((e: unknown) => e);
    expect((bad as OutboxValidationError).field).toBe('url');
    const slow = await subscriptions
      .add(A, { name: 'other', url: `${receiver.baseUrl}/x`, events: ['*'], timeoutMs: 10 ** 9 })
      .catch((e: unknown) => e);
    expect((slow as OutboxValidationError).field).toBe('timeoutMs');
    for (const backoff of [{ capMs: 2 ** 31 }, { baseMs: 2 ** 31, capMs: 2 ** 31 }]) {
      const flood = await subscriptions
        .add(A, { name: 'other', url: `${receiver.baseUrl}/x`, events: ['*'], backoff })
        .catch((e: unknown) => e);
      expect(flood).toBeInstanceOf(OutboxValidationError);
      expect((flood as OutboxValidationError).field).toBe('backoff');
      expect((flood as OutboxValidationError).message).toContain(
        'backoff.capMs must be an integer number of ms',
      );
    }
    expect((await subscriptions.list(A)).map((s) => s.name)).toEqual(['crm']);
  });

  it('holds deliveries of a paused subscription without spending attempts, and sends them on resume', async () => {
    expect(await subscriptions.pause(A, 'crm')).toMatchObject({ status: 'paused' });
    const id = await enqueue(t, A, 'crm.contact.created.v1', { who: 'a' });
    await t.relay.drain();
    expect(receiver.requests).toHaveLength(0);
    expect(await deliveryOf(id)).toMatchObject({
      status: 'pending',
      attempt_count: 0,
      error_code: 'subscriptionPaused',
    });

    expect(await subscriptions.resume(A, 'crm')).toMatchObject({ status: 'active' });
    await t.relay.drain();
    expect(receiver.to('/a').map((r) => [r.id, r.attempt])).toEqual([[id, 1]]);
    expect(await deliveryOf(id)).toMatchObject({ status: 'delivered', attempt_count: 1 });
    expect(await subscriptions.pause(A, 'nobody')).toBeNull();
  });

  it('removes a subscription with what it is still owed, settling those events', async () => {
    await subscriptions.pause(A, 'crm');
    const id = await enqueue(t, A, 'crm.contact.created.v1');
    await t.relay.drain();
    expect(await eventStatus(id)).toBe('processing');
    expect(await subscriptions.remove(A, 'crm')).toEqual({ removed: true, deliveriesDropped: 1 });
    expect(await deliveryOf(id)).toBeUndefined();
    expect(await eventStatus(id)).toBe('published');
    expect(await subscriptions.remove(A, 'crm')).toEqual({ removed: false, deliveriesDropped: 0 });
    const after = await enqueue(t, A, 'crm.contact.created.v1');
    await t.relay.drain();
    expect(await eventStatus(after)).toBe('no_handlers');
    expect(receiver.requests).toHaveLength(0);
  });

  it('reaches another relay instance once its cacheTtlMs has passed, and not before', async () => {
    const ttlMs = 60_000;
    const other = await buildApp({
      url: db.url,
      webhooks: { subscriptions: { ...SUBSCRIPTIONS, cacheTtlMs: ttlMs } },
    });
    // The cache's clock is Date's: faked alone (timers stay real), it runs on and the test moves it past the TTL.
    jest.useFakeTimers(FAKE_DATE_ONLY);
    try {
      await enqueue(other, C, 'crm.contact.created.v1');
      await other.relay.drain(); // caches "no subscriptions" for tenant C
      await subscriptions.add(C, { name: 'late', url: `${receiver.baseUrl}/c`, events: ['*'] });
      const early = await enqueue(other, C, 'crm.contact.created.v1');
      await other.relay.drain();
      expect(await eventStatus(early)).toBe('no_handlers');
      jest.setSystemTime(Date.now() + ttlMs);
      const id = await enqueue(other, C, 'crm.contact.created.v1');
      await other.relay.drain();
      expect(receiver.to('/c').map((r) => r.id)).toEqual([id]);
    } finally {
      jest.useRealTimers();
      await other.close();
    }
  });

  it('keeps tenants apart under row-level security for the relay role', async () => {
    await subscriptions.add(B, { name: 'second', url: `${receiver.baseUrl}/b2`, events: ['*'] });
    await db.sql('begin');
    try {
      await db.sql('set local role outbox_relay');
      await db.sql(`select set_config('app.current_tenant_id', $1, true)`, [B]);
      const visible = await db.sql<{ tenant_id: string }>(
        'select distinct tenant_id from outbox_webhook_subscriptions',
      );
      expect(visible).toEqual([{ tenant_id: B }]);
      await expect(
        db.sql(
          `insert into outbox_webhook_subscriptions (id, tenant_id, name, url, events) values (gen_random_uuid(), $1, 'x', 'http://x', '{*}')`,
          [A],
        ),
      ).rejects.toThrow(/row-level security/);
    } finally {
      await db.sql('rollback');
    }
  });
});
