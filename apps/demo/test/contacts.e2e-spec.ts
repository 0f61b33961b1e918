import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { OutboxTestKit } from 'nestjs-pg-outbox/testing';
import { AppModule } from '../src/app.module';
import { DEMO_TENANT_ID } from '../src/demo.constants';
import { createEmptyDatabase, type TestDatabase } from '../../../test/support/test-database';

/**
 * The demo's own end-to-end test, written as an app's team would write theirs with the test kit: the HTTP API
 * creates a contact, the test asserts the committed event, drives the relay to each consumer, and reads the
 * consumers' effects back through the API. No sleeps: the kit runs the relay until the delivery is there.
 */
describe('demo CRM: creating a contact', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let baseUrl: string;
  let outbox: OutboxTestKit;

  beforeAll(async () => {
    db = await createEmptyDatabase();
    // the app runs its own migrations (the outbox's and the demo's); the relay is left to the test
    app = await NestFactory.create(AppModule.forRoot(db.url, { relay: false }), { logger: false });
    await app.listen(0, '127.0.0.1');
    baseUrl = await app.getUrl();
    outbox = OutboxTestKit.for(app);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  async function post(body: unknown): Promise<Response> {
    return fetch(`${baseUrl}/contacts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  it('commits crm.contact.created.v1 with the contact, and every consumer receives it once', async () => {
    const response = await post({ name: 'Ada Lovelace', email: 'ada@example.com' });
    expect(response.status).toBe(201);
    const contact = (await response.json()) as { id: string };

    const event = await outbox.expectEnqueued('crm.contact.created.v1', {
      contactId: contact.id,
      email: 'ada@example.com',
    });
    expect(event).toMatchObject({
      tenantId: DEMO_TENANT_ID,
      aggregateType: 'contact',
      aggregateId: contact.id,
    });

    await outbox.waitForDelivery(event.eventId, 'contact-timeline');
    await outbox.drain();
    const deliveries = await outbox.deliveries(event.eventId);
    expect(deliveries.map((d) => [d.consumer, d.status, d.attempts])).toEqual([
      ['contact-timeline', 'delivered', 1],
      ['crm-audit', 'delivered', 1],
      ['webhook:contacts-receiver', 'delivered', 1],
      ['welcome-email', 'delivered', 1],
    ]);

    const activities = (await (await fetch(`${baseUrl}/contacts/${contact.id}/activities`)).json()) as {
      eventId: string;
      summary: string;
    }[];
    expect(activities).toEqual([
      expect.objectContaining({ eventId: event.eventId, summary: 'Contact Ada Lovelace created' }),
    ]);
  });

  it('enqueues nothing for a request it refuses', async () => {
    const before = (await outbox.enqueued('crm.contact.created.v1')).length;
    const response = await post({ name: 'Grace Hopper', email: 'not an email' });
    expect(response.status).toBe(400);
    expect(await outbox.enqueued('crm.contact.created.v1')).toHaveLength(before);
  });

  it("bounds its own transactions on the server's side, as docs/operating.md advises", async () => {
    const [settings] = (await app.get(DataSource).query(
      `select current_setting('statement_timeout') as statement,
              current_setting('idle_in_transaction_session_timeout') as idle_in_transaction`,
    )) as Array<{ statement: string; idle_in_transaction: string }>;
    expect(settings).toEqual({ statement: '10s', idle_in_transaction: '30s' });
  });
});
