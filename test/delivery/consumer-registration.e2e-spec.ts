import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { buildApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, TENANT } from '../support/outbox-fixture';

/** Every event each consumer was called with, shared by the two versions of the app below. */
const received: { consumer: string; eventId: string }[] = [];
const receivedBy = (consumer: string) =>
  received.filter((call) => call.consumer === consumer).map((call) => call.eventId);

/** The app before the deploy: one consumer. */
@Injectable()
class Invoicing {
  @OnOutboxEvent('shop.order.placed.v1', { consumer: 'invoicing' })
  invoice(event: OutboxEvent): void {
    received.push({ consumer: 'invoicing', eventId: event.eventId });
  }
}

/** Added by the deploy: a consumer of the same events. */
@Injectable()
class Loyalty {
  @OnOutboxEvent('shop.order.placed.v1', { consumer: 'loyalty' })
  award(event: OutboxEvent): void {
    received.push({ consumer: 'loyalty', eventId: event.eventId });
  }
}

/** What docs/delivery.md ("When an event fans out") says of a consumer added later: what it gets, and that replay does not backfill it. */
describe('a consumer registered after events fanned out', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db?.drop());

  it('gets the events that fan out after it was registered, none fanned out before, and replay does not backfill it', async () => {
    const before = await buildApp({ url: db.url, providers: [Invoicing] });
    let fannedOut: string;
    let waiting: string;
    try {
      fannedOut = await enqueueIn(before, { eventName: 'shop.order.placed.v1' });
      await before.relay.drain();
      // enqueued before the deploy, but not yet claimed (so not yet fanned out) when the new consumer registers
      waiting = await enqueueIn(before, { eventName: 'shop.order.placed.v1' });
    } finally {
      await before.close();
    }

    const after = await buildApp({ url: db.url, providers: [Invoicing, Loyalty] });
    try {
      const later = await enqueueIn(after, { eventName: 'shop.order.placed.v1' });
      await after.relay.drain();
      expect(receivedBy('invoicing')).toEqual([fannedOut, waiting, later]);
      expect(receivedBy('loyalty')).toEqual([waiting, later]);

      const admin = after.app.get(OutboxAdminService);
      expect(await admin.replayEvent(TENANT, fannedOut, { consumer: 'loyalty' })).toBe(0);
      expect(await admin.replayFailed(TENANT, { consumer: 'loyalty' })).toBe(0);
      expect(await admin.replayFailed(TENANT, { eventName: 'shop.order.placed.v1' })).toBe(0);
      await after.relay.drain();
      expect(receivedBy('loyalty')).toEqual([waiting, later]);
      const rows = await db.sql<{ consumer_name: string }>(
        'select consumer_name from outbox_deliveries where event_id = $1',
        [fannedOut],
      );
      expect(rows.map((row) => row.consumer_name)).not.toContain('loyalty');
    } finally {
      await after.close();
    }
  });
});
