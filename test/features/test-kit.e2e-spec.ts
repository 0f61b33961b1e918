import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxTestKit, OutboxTestKitError } from 'nestjs-pg-outbox/testing';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

/** Fails its first two attempts; the module's backoff (a minute) would make a test wait for the retries. */
@Injectable()
class FlakyConsumer {
  readonly attempts: string[] = [];

  @OnOutboxEvent('test.kit.flaky.v1', { consumer: 'flaky' })
  handle(event: OutboxEvent, context: { attempt: number }): void {
    this.attempts.push(`${event.eventId}#${context.attempt}`);
    if (context.attempt < 3) throw new Error(`attempt ${context.attempt} fails`);
  }

  @OnOutboxEvent('test.kit.poison.v1', { consumer: 'poison', maxAttempts: 2 })
  poison(): void {
    throw new Error('never works');
  }
}

describe('the test kit (nestjs-pg-outbox/testing)', () => {
  let db: TestDatabase;
  let t: TestApp;
  let kit: OutboxTestKit;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db);
    t = await buildApp({
      url: db.url,
      outbox: { backoff: { baseMs: 60_000, capMs: 60_000, jitter: 0 } },
      providers: [FlakyConsumer],
    });
    kit = OutboxTestKit.for(t.app);
  });
  afterEach(() => t.close());

  function enqueue(eventName: string, payload: unknown, fail = false): Promise<string> {
    return t.dataSource.transaction(async (manager) => {
      const id = await t.outbox.enqueue(manager, { tenantId: TENANT, eventName, payload });
      if (fail) throw new Error('rolled back on purpose');
      return id;
    });
  }

  it('drains retries that backoff scheduled a minute later, without waiting for them', async () => {
    const eventId = await enqueue('test.kit.flaky.v1', {});
    const totals = await kit.drain();
    expect(totals).toMatchObject({ failed: 2, succeeded: 1, dead: 0 });
    expect(t.app.get(FlakyConsumer).attempts).toEqual([`${eventId}#1`, `${eventId}#2`, `${eventId}#3`]);
    expect(await kit.deliveries(eventId)).toEqual([
      expect.objectContaining({ consumer: 'flaky', status: 'delivered', attempts: 3 }),
    ]);
  });

  it('leaves retries scheduled when asked to (retries: false)', async () => {
    const eventId = await enqueue('test.kit.flaky.v1', {});
    await kit.drain({ retries: false });
    const [delivery] = await kit.deliveries(eventId);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1 });
    expect(delivery!.nextAttemptAt.getTime()).toBeGreaterThan(Date.now() + 30_000);
  });

  it('waits for a delivery to one consumer, driving the relay, and returns it', async () => {
    const eventId = await enqueue('test.kit.flaky.v1', {});
    await expect(kit.waitForDelivery(eventId, 'flaky', { timeoutMs: 20_000 })).resolves.toMatchObject({
      consumer: 'flaky',
      status: 'delivered',
      attempts: 3,
    });
  });

  it('fails the wait at once for a dead delivery, and at the deadline for one that never comes', async () => {
    const poison = await enqueue('test.kit.poison.v1', {});
    const dead = await kit.waitForDelivery(poison, 'poison').catch((e: unknown) => e);
    expect(dead).toBeInstanceOf(OutboxTestKitError);
    expect((dead as Error).message).toContain('dead-lettered for consumer "poison" after 2 attempts');
    const never = await kit
      .waitForDelivery(poison, 'no-such-consumer', { timeoutMs: 200 })
      .catch((e: unknown) => e);
    expect(never).toBeInstanceOf(OutboxTestKitError);
    expect((never as Error).message).toContain('no delivery row for that consumer');
  });

  it('leaves a delayed event to its time, and says so when a wait for it ends, rather than asking whether a consumer listens', async () => {
    const eventId = await t.dataSource.transaction((manager) =>
      t.outbox.enqueue(manager, {
        tenantId: TENANT,
        eventName: 'test.kit.flaky.v1',
        payload: {},
        delayMs: 3_600_000,
      }),
    );
    expect(await kit.drain()).toMatchObject({ eventsClaimed: 0 });
    expect(await kit.deliveries(eventId)).toEqual([]);
    const [{ deliver_at: due }] = await db.sql<{ deliver_at: Date }>(
      'select deliver_at from event_outbox where id = $1',
      [eventId],
    );
    const waited = await kit.waitForDelivery(eventId, 'flaky', { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(waited).toBeInstanceOf(OutboxTestKitError);
    expect((waited as Error).message).toContain(
      `the event is scheduled (a delayed event), due at ${due.toISOString()}`,
    );
    expect((waited as Error).message).not.toContain('does a consumer of that name listen');
  });

  it('finds an event of a name whose payload matches, committed; never one that rolled back', async () => {
    await enqueue('test.kit.order.v1', { orderId: 'o1', lines: [{ sku: 'a', qty: 1 }] });
    await enqueue('test.kit.order.v1', { orderId: 'o2', lines: [] }, true).catch(() => undefined);
    const event = await kit.expectEnqueued('test.kit.order.v1', { orderId: 'o1' });
    expect(event).toMatchObject({ eventName: 'test.kit.order.v1', tenantId: TENANT, status: 'pending' });
    await expect(
      kit.expectEnqueued('test.kit.order.v1', (p) => (p as { orderId: string }).orderId === 'o1'),
    ).resolves.toMatchObject({ eventId: event.eventId });
    const rolledBack = await kit
      .expectEnqueued('test.kit.order.v1', { orderId: 'o2' })
      .catch((e: unknown) => e);
    expect(rolledBack).toBeInstanceOf(OutboxTestKitError);
    expect((rolledBack as Error).message).toContain('1 committed of that name, 0 matching');
    const other = await kit.expectEnqueued('test.kit.refund.v1').catch((e: unknown) => e);
    expect((other as Error).message).toContain(
      'no committed event of that name (1 of other names: test.kit.order.v1)',
    );
  });

  it('does not see an event whose transaction is still open', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let enqueued!: () => void;
    const written = new Promise<void>((resolve) => (enqueued = resolve));
    const transaction = t.dataSource.transaction(async (manager) => {
      await t.outbox.enqueue(manager, { tenantId: TENANT, eventName: 'test.kit.order.v1', payload: {} });
      enqueued();
      await held;
    });
    await written;
    await expect(kit.expectEnqueued('test.kit.order.v1')).rejects.toThrow(OutboxTestKitError);
    release();
    await transaction;
    await expect(kit.expectEnqueued('test.kit.order.v1')).resolves.toMatchObject({
      eventName: 'test.kit.order.v1',
    });
  });

  it('reads one tenant only when made for one', async () => {
    await enqueue('test.kit.order.v1', { orderId: 'o1' });
    const otherTenant = OutboxTestKit.for(t.app, { tenantId: '00000000-0000-4000-8000-0000000000aa' });
    expect(await otherTenant.enqueued()).toEqual([]);
    expect(await OutboxTestKit.for(t.app, { tenantId: TENANT }).enqueued()).toHaveLength(1);
  });
});
