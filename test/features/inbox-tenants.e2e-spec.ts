import { randomUUID } from 'node:crypto';
import { Injectable, type Provider } from '@nestjs/common';
import { OnOutboxEvent, OutboxRetention } from 'nestjs-pg-outbox';
import {
  OUTBOX_MESSAGE_HEADERS,
  OutboxInbox,
  OutboxInboxModule,
  type OutboxInboxContext,
  type OutboxInboxMessage,
} from 'nestjs-pg-outbox/inbox';
import { buildApp, type TestApp } from '../support/build-app';
import {
  INBOX_EFFECTS_GRANT,
  INBOX_EFFECTS_SQL,
  TENANT_A,
  TENANT_B,
  recordInboxEffect,
} from '../support/inbox-effects';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';

const CONSUMER = 'invoice-sync';

/**
 * A message as a broker hands it to `OutboxInbox.handle` (the interface an app implements for another broker):
 * each call of `deliver` is one delivery of the same message, and `settled` says how each one was settled.
 */
function brokerMessage(id: string, tenantId: string) {
  const settled: string[] = [];
  let deliveries = 0;
  const deliver = (): OutboxInboxMessage => {
    deliveries++;
    return {
      id,
      header: (name) => (name === OUTBOX_MESSAGE_HEADERS.tenant ? tenantId : undefined),
      deliveryCount: deliveries,
      payload: () => ({ invoice: id }),
      ack: () => void settled.push('ack'),
      retry: () => void settled.push('retry'),
      deadLetter: () => void settled.push('dead'),
    };
  };
  return { deliver, settled };
}

/** A database of its own with the effects table, and an app with the inbox (and `providers`) on it. */
interface InboxSetup {
  db: TestDatabase;
  app: TestApp;
  inbox: OutboxInbox;
  close(): Promise<void>;
}

/**
 * Sets up an {@link InboxSetup} whose app connects as `as`: the owner of the tables, or a login role of
 * `outbox_app` or `outbox_relay`, under row-level security.
 */
async function inboxSetup(
  as: 'owner' | 'outbox_app' | 'outbox_relay',
  providers: Provider[] = [],
): Promise<InboxSetup> {
  const db = await createTestDatabase(INBOX_EFFECTS_SQL);
  let role: TestRole | undefined;
  const drop = async (): Promise<void> => {
    await db.drop();
    await role?.drop();
  };
  try {
    if (as !== 'owner') role = await createLoginRole(db, as, [INBOX_EFFECTS_GRANT]);
    const app = await buildApp({
      url: role?.url ?? db.url,
      providers,
      imports: [OutboxInboxModule.forRoot({ maxDeliveries: 3 })],
    });
    const close = async (): Promise<void> => {
      await app.close();
      await drop();
    };
    return { db, app, inbox: app.app.get(OutboxInbox), close };
  } catch (error) {
    await drop();
    throw error;
  }
}

/**
 * The inbox keys what each consumer processed by tenant as well as by message id: two tenants may send the same
 * id (`invoice-1001`, or an outbox event id), and neither takes the other's message for a duplicate — on the
 * table owner, and on a role under row-level security, where the other tenant's row is invisible.
 */
describe.each([
  ['the owner of the tables', 'owner'],
  ['a role of outbox_app, under row-level security', 'rls'],
] as const)('the inbox, two tenants with the same message id, connected as %s', (_label, as) => {
  let setup: InboxSetup | undefined;
  let db: TestDatabase;
  let inbox: OutboxInbox;
  let runs: { tenant: string; id: string; attempt: number }[];

  beforeAll(async () => {
    setup = await inboxSetup(as === 'rls' ? 'outbox_app' : 'owner');
    ({ db, inbox } = setup);
  });
  afterAll(() => setup?.close());
  beforeEach(() => {
    runs = [];
  });

  const handler = async (_payload: unknown, context: OutboxInboxContext): Promise<void> => {
    runs.push({ tenant: context.tenantId, id: context.messageId, attempt: context.attempt });
    await recordInboxEffect(context);
  };
  const effects = (id: string) =>
    db.sql<{ tenant_id: string; n: number }>(
      `select tenant_id, count(*)::int as n from inbox_effects where message_id = $1 group by 1 order by 1`,
      [id],
    );
  const inboxRows = (eventId: string | null, messageId: string) =>
    db.sql<{ tenant_id: string; status: string; attempts: number }>(
      `select tenant_id, status, attempts from consumer_inbox
        where consumer_name = $1 and (message_id = $2 or event_id = $3::uuid) order by tenant_id`,
      [CONSUMER, messageId, eventId],
    );

  it.each([
    ['an id of its own', 'invoice-1001'],
    ["an outbox event's id", randomUUID()],
  ])(
    "runs tenant B's handler once for %s that tenant A's message had, and takes each tenant's redelivery for a duplicate",
    async (_kind, id) => {
      const a = brokerMessage(id, TENANT_A);
      const b = brokerMessage(id, TENANT_B);
      expect(await inbox.handle(CONSUMER, a.deliver(), handler)).toBe('processed');
      expect(await inbox.handle(CONSUMER, b.deliver(), handler)).toBe('processed');
      expect(await inbox.handle(CONSUMER, b.deliver(), handler)).toBe('duplicate');
      expect(await inbox.handle(CONSUMER, a.deliver(), handler)).toBe('duplicate');

      expect(runs).toEqual([
        { tenant: TENANT_A, id, attempt: 1 },
        { tenant: TENANT_B, id, attempt: 1 },
      ]);
      expect([a.settled, b.settled]).toEqual([
        ['ack', 'ack'],
        ['ack', 'ack'],
      ]);
      expect(await effects(id)).toEqual([
        { tenant_id: TENANT_A, n: 1 },
        { tenant_id: TENANT_B, n: 1 },
      ]);
      const eventId = id.startsWith('invoice') ? null : id;
      expect(await inboxRows(eventId, id)).toEqual([
        { tenant_id: TENANT_A, status: 'processed', attempts: 1 },
        { tenant_id: TENANT_B, status: 'processed', attempts: 1 },
      ]);
    },
  );

  it("records a failure of tenant B's message on B's row, leaving A's processed row as it was", async () => {
    const id = `invoice-${randomUUID()}`;
    const a = brokerMessage(id, TENANT_A);
    const b = brokerMessage(id, TENANT_B);
    expect(await inbox.handle(CONSUMER, a.deliver(), handler)).toBe('processed');
    const failing = async (_payload: unknown, context: OutboxInboxContext): Promise<void> => {
      runs.push({ tenant: context.tenantId, id: context.messageId, attempt: context.attempt });
      if (context.attempt === 1) throw new Error('planned failure');
      await recordInboxEffect(context);
    };
    expect(await inbox.handle(CONSUMER, b.deliver(), failing)).toBe('retry');
    expect(await inboxRows(null, id)).toEqual([
      { tenant_id: TENANT_A, status: 'processed', attempts: 1 },
      { tenant_id: TENANT_B, status: 'retrying', attempts: 1 },
    ]);
    expect(await inbox.handle(CONSUMER, b.deliver(), failing)).toBe('processed');
    expect(runs.map((r) => [r.tenant, r.attempt])).toEqual([
      [TENANT_A, 1],
      [TENANT_B, 1],
      [TENANT_B, 2],
    ]);
    expect(await inboxRows(null, id)).toEqual([
      { tenant_id: TENANT_A, status: 'processed', attempts: 1 },
      { tenant_id: TENANT_B, status: 'processed', attempts: 2 },
    ]);
  });
});

/** An in-process consumer of tenant A's outbox event: the relay records its delivery in `consumer_inbox` too. */
@Injectable()
class InvoiceLedger {
  @OnOutboxEvent('test.invoice.issued.v1')
  record(): void {}
}

/**
 * Retention deletes, with a purged outbox event, the records the relay wrote of its delivery, and nothing else:
 * not another tenant's inbox record of a message with the same id (a producer may pick any id, an outbox event's
 * too), nor the inbox's own record of a broker message that carries the event's id in its own tenant (the event
 * sent through a broker and received back). Either, deleted, would let the message's next redelivery run its
 * handler again. Connected as a role of outbox_relay, the role retention runs as.
 */
describe('retention of an outbox event, and inbox messages with its id', () => {
  let setup: InboxSetup | undefined;
  let db: TestDatabase;
  let app: TestApp;
  let inbox: OutboxInbox;

  beforeAll(async () => {
    setup = await inboxSetup('outbox_relay', [InvoiceLedger]);
    ({ db, app, inbox } = setup);
  });
  afterAll(() => setup?.close());

  const enqueueForTenantA = (): Promise<string> =>
    app.dataSource.transaction(async (manager) => {
      await manager.query(`select set_config('app.current_tenant_id', $1, true)`, [TENANT_A]);
      return app.outbox.enqueue(manager, {
        tenantId: TENANT_A,
        eventName: 'test.invoice.issued.v1',
        payload: { invoice: 'invoice-1001' },
      });
    });
  const inboxRowsOf = (eventId: string) =>
    db.sql<{ tenant_id: string; consumer_name: string }>(
      `select tenant_id, consumer_name from consumer_inbox where event_id = $1 order by consumer_name collate "C", tenant_id`,
      [eventId],
    );

  it.each([
    ['another tenant', TENANT_B],
    ["the event's own tenant", TENANT_A],
  ])(
    "keeps %s's record of a message with the id of tenant A's purged event: its redelivery is still a duplicate",
    async (_whose, tenantId) => {
      const eventId = await enqueueForTenantA();
      await app.relay.drain();
      const runs: string[] = [];
      const message = brokerMessage(eventId, tenantId);
      const handler = async (_payload: unknown, context: OutboxInboxContext): Promise<void> => {
        runs.push(context.tenantId);
        await recordInboxEffect(context);
      };
      expect(await inbox.handle(CONSUMER, message.deliver(), handler)).toBe('processed');
      expect(await inboxRowsOf(eventId)).toEqual([
        { tenant_id: TENANT_A, consumer_name: 'InvoiceLedger.record' },
        { tenant_id: tenantId, consumer_name: CONSUMER },
      ]);

      await db.sql(`update event_outbox set published_at = now() - interval '30 days' where id = $1`, [
        eventId,
      ]);
      expect(await app.app.get(OutboxRetention).purgeNow()).toEqual({
        deletedEvents: 1,
        deletedKeys: 0,
        batches: 2,
      });

      expect(await inboxRowsOf(eventId)).toEqual([{ tenant_id: tenantId, consumer_name: CONSUMER }]);
      expect(await inbox.handle(CONSUMER, message.deliver(), handler)).toBe('duplicate');
      expect(runs).toEqual([tenantId]);
      expect(message.settled).toEqual(['ack', 'ack']);
    },
  );
});
