import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import type { OutboxWebhookOptions } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait-for';
import { deliveryOf, enqueueIn, TENANT, TENANTS, truncateOutbox } from '../support/outbox-fixture';

describe('a webhook answered 429 or 503 with Retry-After', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let t: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, 'outbox_consumer_pauses');
    receiver.requests.length = 0;
    receiver.reply = () => ({});
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const start = async (webhook: Partial<OutboxWebhookOptions> = {}): Promise<TestApp> => {
    t = await buildApp({
      url: db.url,
      webhooks: {
        webhooks: [
          {
            name: 'hook',
            url: `${receiver.baseUrl}/hook`,
            events: ['test.hook.*'],
            timeoutMs: 2000,
            backoff: { baseMs: 1, capMs: 60_000, jitter: 0 },
            ...webhook,
          } as OutboxWebhookOptions,
        ],
      },
    });
    return t;
  };
  const row = async (eventId: string) => (await deliveryOf(db, eventId, 'webhook:hook'))!;
  const hold = async () =>
    (
      await db.sql<{
        tenant_id: string;
        paused_at: Date;
        resumes_at: Date;
        paused_by: string;
        reason: string;
      }>(
        `select tenant_id, paused_at, resumes_at, paused_by, reason from outbox_consumer_pauses
          where consumer_name = 'webhook:hook'`,
      )
    )[0];

  it.each([
    ['429 with Retry-After in seconds', 429, () => '2'],
    ['503 with Retry-After as an HTTP date', 503, () => new Date(Date.now() + 3000).toUTCString()],
  ])(
    '(%s) waits uncharged, holds the webhook for that tenant until then, then delivers every held event',
    async (_, status, retryAfter) => {
      const app = await start();
      receiver.reply = (_request, index) =>
        index === 0 ? { status, headers: { 'retry-after': retryAfter() }, body: 'slow down' } : {};
      const first = await enqueueIn(app, { eventName: 'test.hook.created.v1', payload: { n: 1 } });
      await app.relay.drain();

      expect(receiver.requests).toHaveLength(1);
      expect(await row(first)).toMatchObject({
        status: 'pending',
        attempt_count: 0,
        snoozes: 1,
        error_code: 'retryAfter',
      });
      const held = (await hold())!;
      expect(held).toMatchObject({ tenant_id: TENANT, paused_by: 'relay' });
      expect(held.reason).toMatch(new RegExp(`HTTP ${status}`));
      expect(held.resumes_at.getTime() - held.paused_at.getTime()).toBeGreaterThanOrEqual(1000);
      expect((await app.app.get(OutboxAdminService).stats(TENANT)).pausedConsumers).toEqual([
        expect.objectContaining({ consumer: 'webhook:hook', tenantId: TENANT, resumesAt: held.resumes_at }),
      ]);

      // while held: the tenant's next event waits unsent; another tenant's goes at once
      const second = await enqueueIn(app, { eventName: 'test.hook.created.v1', payload: { n: 2 } });
      const other = await enqueueIn(app, {
        eventName: 'test.hook.created.v1',
        payload: { n: 3 },
        tenantId: TENANTS[1],
      });
      await app.relay.drain();
      expect(receiver.requests.map((r) => r.id)).toEqual([first, other]);
      expect(await row(second)).toMatchObject({ status: 'pending', attempt_count: 0 });

      await waitFor(
        async () => {
          await app.relay.drain();
          return (await row(first)).status === 'delivered' && (await row(second)).status === 'delivered';
        },
        { timeoutMs: 15_000, message: 'the held events delivered' },
      );
      // by the database clock, not before the hold ended; the first event on its first attempt
      for (const id of [first, second])
        expect(((await row(id)).processed_at as Date).getTime()).toBeGreaterThanOrEqual(
          held.resumes_at.getTime(),
        );
      expect(receiver.requests.filter((r) => r.id === first).map((r) => r.attempt)).toEqual([1, 1]);
      expect(await row(first)).toMatchObject({ attempt_count: 1, snoozes: 1 });
    },
  );

  it('holds the pair for every relay: another instance does not send the tenant its next event either', async () => {
    const first = await start();
    const other = await buildApp({
      url: db.url,
      webhooks: {
        webhooks: [
          {
            name: 'hook',
            url: `${receiver.baseUrl}/hook`,
            events: ['test.hook.*'],
            timeoutMs: 2000,
          } as OutboxWebhookOptions,
        ],
      },
    });
    try {
      receiver.reply = (_request, index) =>
        index === 0 ? { status: 429, headers: { 'retry-after': '30' } } : {};
      await enqueueIn(first, { eventName: 'test.hook.created.v1', payload: { n: 1 } });
      await first.relay.drain();
      expect(await hold()).toBeDefined();

      const next = await enqueueIn(other, { eventName: 'test.hook.created.v1', payload: { n: 2 } });
      await other.relay.drain();
      await first.relay.drain();
      expect(receiver.requests).toHaveLength(1);
      expect(await row(next)).toMatchObject({ status: 'pending', attempt_count: 0 });
    } finally {
      await other.close();
    }
  });

  it('becomes a pause until resumed when an operator pauses the held pair, and resuming lifts it', async () => {
    const app = await start();
    receiver.reply = (_request, index) =>
      index === 0 ? { status: 429, headers: { 'retry-after': '1' } } : {};
    const id = await enqueueIn(app, { eventName: 'test.hook.created.v1' });
    await app.relay.drain();
    expect((await hold())!.resumes_at).toBeInstanceOf(Date);

    const admin = app.app.get(OutboxAdminService);
    expect(await admin.pauseConsumer('webhook:hook', { tenantId: TENANT, reason: 'partner asked' })).toBe(
      true,
    );
    expect(await hold()).toMatchObject({ resumes_at: null, reason: 'partner asked' });
    // the hold's second is long gone: still paused
    await db.sql(
      `update outbox_deliveries set next_attempt_at = now() - interval '1 hour' where event_id = $1`,
      [id],
    );
    await app.relay.drain();
    expect(receiver.requests).toHaveLength(1);

    expect(await admin.resumeConsumer('webhook:hook', { tenantId: TENANT })).toBe(true);
    await app.relay.drain();
    expect(await row(id)).toMatchObject({ status: 'delivered', attempt_count: 1 });
  });

  it('caps the wait at the backoff cap, and charges a plain 429 (no Retry-After) as an attempt', async () => {
    const app = await start({ backoff: { baseMs: 1, capMs: 1500, jitter: 0 }, maxAttempts: 1 });
    receiver.reply = (_request, index) =>
      index === 0 ? { status: 429, headers: { 'retry-after': '3600' } } : { status: 429 };
    const id = await enqueueIn(app, { eventName: 'test.hook.created.v1' });
    await app.relay.drain();
    const held = (await hold())!;
    const waitMs = held.resumes_at.getTime() - held.paused_at.getTime();
    expect(waitMs).toBeGreaterThanOrEqual(1500);
    expect(waitMs).toBeLessThan(60_000);

    await waitFor(
      async () => {
        await app.relay.drain();
        return (await row(id)).status === 'dead';
      },
      { timeoutMs: 15_000, message: 'the plain 429 charged' },
    );
    // its one attempt spent by the plain 429: the snooze before it was not charged
    expect(receiver.requests.map((r) => r.attempt)).toEqual([1, 1]);
    expect(await row(id)).toMatchObject({ attempt_count: 1, snoozes: 1, error_code: 'httpStatus' });
  });
});
