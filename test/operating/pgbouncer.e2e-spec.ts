import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { EFFECTS_TABLE_SQL, enqueueIn, enqueueManyIn, recordEffect } from '../support/outbox-fixture';
import { startPgBouncer, type PgBouncer } from '../support/pgbouncer';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

const EVENT = 'test.bouncer.created.v1';

/** Two in-process consumers: one writes through the batch transaction, one queries twice (a later query). */
@Injectable()
class BouncedConsumers {
  @OnOutboxEvent(EVENT, { consumer: 'writer' })
  write(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'reader' })
  async read(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select $1::uuid as id', [event.eventId]);
    await recordEffect(event, context);
  }
}

/**
 * The relay, its in-process handlers and a webhook through PgBouncer (Debian's package, 1.18): in session mode
 * with named statements (the default), and in transaction mode with `preparedStatements: false` — 1.18
 * cannot carry protocol-level prepared statements in transaction mode (1.21 and later can, with
 * `max_prepared_statements`). Transaction mode keeps no session for LISTEN: the relay is driven by hand.
 */
describe.each([
  { mode: 'session' as const, preparedStatements: true },
  { mode: 'transaction' as const, preparedStatements: false },
])('the relay behind PgBouncer in $mode mode', ({ mode, preparedStatements }) => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  let receiver: WebhookReceiver;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    bouncer = await startPgBouncer(mode, db.url);
    receiver = await startWebhookReceiver();
    t = await buildApp({
      url: bouncer.through(db.url),
      providers: [BouncedConsumers],
      outbox: { preparedStatements, relay: { wakeUps: 'off' } },
      webhooks: {
        webhooks: [
          {
            name: 'bounced-hook',
            url: `${receiver.baseUrl}/hook`,
            events: [EVENT],
            timeoutMs: 2000,
            backoff: { baseMs: 1, capMs: 1000, jitter: 0 },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await bouncer?.stop();
    await db?.drop();
  });

  it('delivers every event to its handlers and its webhook once, over several batches', async () => {
    const ids = await enqueueManyIn(
      t,
      Array.from({ length: 12 }, (_, i) => ({ eventName: EVENT, payload: { i } })),
    );
    // a second round of claims on connections that already ran one (named statements reused)
    const first = await t.relay.drain();
    const more = await enqueueIn(t, { eventName: EVENT, payload: { i: 12 } });
    const second = await t.relay.drain();
    expect(first.succeeded + second.succeeded).toBe(3 * 13);
    expect(first.failed + second.failed + first.dead + second.dead).toBe(0);
    const all = [...ids, more].sort();
    const effects = await db.sql<{ event_id: string; consumer: string; n: number }>(
      'select event_id, consumer, count(*)::int as n from test_effects group by 1, 2 order by 2, 1',
    );
    expect(effects).toEqual([
      ...all.map((event_id) => ({ event_id, consumer: 'reader', n: 1 })),
      ...all.map((event_id) => ({ event_id, consumer: 'writer', n: 1 })),
    ]);
    const hooked = receiver.requests.map((r) => r.id).sort();
    expect(hooked).toEqual(all);
    expect(await db.sql(`select status, count(*)::int as n from event_outbox group by status`)).toEqual([
      { status: 'published', n: 13 },
    ]);
  });
});
