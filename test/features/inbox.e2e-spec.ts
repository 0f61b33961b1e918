import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { OutboxValidationError } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import {
  OutboxInbox,
  OutboxInboxModule,
  amqpInboxMessage,
  jetStreamInboxMessage,
  type OutboxInboxContext,
  type OutboxInboxMessage,
  type OutboxInboxOutcome,
} from 'nestjs-pg-outbox/inbox';
import { buildApp, type TestApp } from '../support/build-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { TestJetStream, TestRabbitQueue, type ForwardedMessage } from '../support/brokers';
import {
  INBOX_EFFECTS_GRANT,
  INBOX_EFFECTS_SQL,
  TENANT_A,
  TENANT_B,
  recordInboxEffect,
} from '../support/inbox-effects';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { waitFor } from '../support/wait-for';

const CONSUMER = 'crm-sync';
const MAX_DELIVERIES = 3;

/** A broker with one queue or stream of its own, consumed through `OutboxInbox.handle` as an app would. */
interface PlainConsumer {
  /** Publishes the message as a forwarder does. */
  publish(m: ForwardedMessage): Promise<void>;
  /**
   * Gets the message to the consumer twice: RabbitMQ, published twice (a forwarder's re-publish after a crash);
   * JetStream, whose duplicate window drops a re-publish, delivered again because the first ack was lost.
   */
  deliverTwice(m: ForwardedMessage): Promise<void>;
  /** Whether the broker holds the message as dead-lettered (dead-letter queue / terminated). */
  isDeadLettered(id: string): Promise<boolean>;
  /** Whether the broker has nothing left to deliver or settle. */
  isDrained(): Promise<boolean>;
  close(): Promise<void>;
}

type Handler = (payload: unknown, context: OutboxInboxContext) => Promise<void>;

async function rabbitConsumer(
  inbox: OutboxInbox,
  handler: Handler,
  outcomes: OutboxInboxOutcome[],
  { type = 'quorum' }: { type?: 'quorum' | 'classic' } = {},
): Promise<PlainConsumer> {
  const q = await TestRabbitQueue.create(type);
  const dead: string[] = [];
  await q.channel.prefetch(10);
  await q.channel.consume(q.queue, (msg) => {
    if (!msg) return;
    void inbox
      .handle(CONSUMER, amqpInboxMessage(q.channel, msg), handler, { maxDeliveries: MAX_DELIVERIES })
      .then((outcome) => outcomes.push(outcome));
  });
  return {
    publish: async (m) => q.publish(m),
    deliverTwice: async (m) => {
      q.publish(m);
      q.publish(m);
    },
    isDeadLettered: async (id) => (dead.push(...(await q.deadLettered())), dead.includes(id)),
    isDrained: async () => (await q.ready()) === 0,
    close: () => q.close(),
  };
}

async function jetStreamConsumer(
  inbox: OutboxInbox,
  handler: Handler,
  outcomes: OutboxInboxOutcome[],
): Promise<PlainConsumer> {
  const s = await TestJetStream.create({ ackWaitMs: 1000 });
  const seqs = new Map<string, number>();
  const loseAck = new Set<string>();
  const consumer = await jetstream(s.nc).consumers.get(s.stream, s.durable);
  const messages = await consumer.consume({ max_messages: 10 });
  const loop = (async () => {
    for await (const msg of messages) {
      const message: OutboxInboxMessage = jetStreamInboxMessage(msg);
      const id = message.id ?? '';
      const settled = loseAck.delete(id) ? { ...message, ack: () => undefined } : message;
      outcomes.push(await inbox.handle(CONSUMER, settled, handler, { maxDeliveries: MAX_DELIVERIES }));
    }
  })();
  return {
    publish: async (m) => void seqs.set(m.id, await s.publish(m)),
    deliverTwice: async (m) => {
      loseAck.add(m.id);
      seqs.set(m.id, await s.publish(m));
    },
    isDeadLettered: async (id) => s.terminated.includes(seqs.get(id) ?? -1),
    isDrained: async () => (await s.unsettled()) === 0,
    close: async () => {
      messages.stop();
      await loop;
      await s.close();
    },
  };
}

describe.each([
  ['RabbitMQ (quorum queue)', 'rabbitmq'],
  ['JetStream', 'jetstream'],
] as const)('the inbox, plain client form, on %s', (_label, broker) => {
  let db: TestDatabase;
  let appRole: TestRole;
  let relayRole: TestRole;
  /** The receiving app, on a role of outbox_app (neither owner nor superuser: row-level security applies). */
  let app: TestApp;
  /** An operator's app for the stats, on a role of outbox_relay. */
  let ops: TestApp;
  let inbox: OutboxInbox;
  let consumer: PlainConsumer | undefined;
  let outcomes: OutboxInboxOutcome[];
  let runs: { id: string; attempt: number }[];

  beforeAll(async () => {
    db = await createTestDatabase(INBOX_EFFECTS_SQL);
    appRole = await createLoginRole(db, 'outbox_app', [INBOX_EFFECTS_GRANT]);
    relayRole = await createLoginRole(db, 'outbox_relay');
    app = await buildApp({
      url: appRole.url,
      imports: [
        OutboxInboxModule.forRoot({ maxDeliveries: 5, redelivery: { baseMs: 10, capMs: 40, jitter: 0 } }),
      ],
    });
    ops = await buildApp({ url: relayRole.url });
    inbox = app.app.get(OutboxInbox);
  });
  afterAll(async () => {
    await app?.close();
    await ops?.close();
    await db?.drop();
    await appRole?.drop();
    await relayRole?.drop();
  });
  beforeEach(() => {
    outcomes = [];
    runs = [];
  });
  afterEach(async () => {
    await consumer?.close();
    consumer = undefined;
  });

  /** Starts consuming; the handler records its effect, then throws while `fails(attempt)` says so. */
  const start = async (fails: (attempt: number) => boolean = () => false): Promise<PlainConsumer> => {
    const handler: Handler = async (_payload, context) => {
      runs.push({ id: context.messageId, attempt: context.attempt });
      await recordInboxEffect(context);
      if (fails(context.attempt)) throw new Error(`planned failure on delivery ${context.attempt}`);
    };
    consumer =
      broker === 'rabbitmq'
        ? await rabbitConsumer(inbox, handler, outcomes)
        : await jetStreamConsumer(inbox, handler, outcomes);
    return consumer;
  };
  const effects = (id: string) =>
    db.sql<{ attempt: number; tenant_id: string; visible_tenants: string[] }>(
      'select attempt, tenant_id, visible_tenants from inbox_effects where message_id = $1 order by id',
      [id],
    );
  const inboxRows = (id: string) =>
    db.sql<{ status: string; attempts: number; tenant_id: string; last_error: string | null }>(
      'select status, attempts, tenant_id, last_error from consumer_inbox where event_id = $1',
      [id],
    );

  it('runs the handler once for a message delivered twice, and records it once', async () => {
    const c = await start();
    const id = randomUUID();
    await c.deliverTwice({ id, tenantId: TENANT_A, eventName: 'crm.contact.created.v1' });
    await waitFor(() => outcomes.length === 2, { message: 'two deliveries', timeoutMs: 15_000 });
    expect(outcomes.sort()).toEqual(['duplicate', 'processed']);
    expect(runs).toEqual([{ id, attempt: 1 }]);
    expect(await effects(id)).toHaveLength(1);
    expect(await inboxRows(id)).toEqual([
      { status: 'processed', attempts: 1, tenant_id: TENANT_A, last_error: null },
    ]);
    await waitFor(() => c.isDrained(), { message: 'the broker to have nothing left' });
  });

  it("rolls a failed handler's writes back with its record, redelivers, and processes the message next time", async () => {
    const c = await start((attempt) => attempt === 1);
    const id = randomUUID();
    await c.publish({ id, tenantId: TENANT_A });
    await waitFor(() => outcomes.includes('processed'), { message: 'the second delivery' });
    expect(outcomes).toEqual(['retry', 'processed']);
    expect(runs.map((r) => r.attempt)).toEqual([1, 2]);
    // the first run's insert rolled back with the inbox record; the second committed
    expect((await effects(id)).map((e) => e.attempt)).toEqual([2]);
    expect(await inboxRows(id)).toEqual([
      {
        status: 'processed',
        attempts: 2,
        tenant_id: TENANT_A,
        last_error: 'Error: planned failure on delivery 1',
      },
    ]);
    await waitFor(() => c.isDrained(), { message: 'the broker to have nothing left' });
  });

  it('dead-letters a message whose handler always fails after maxDeliveries, marks it dead, and counts it in the stats', async () => {
    const c = await start(() => true);
    const id = randomUUID();
    await c.publish({ id, tenantId: TENANT_B });
    await waitFor(() => outcomes.includes('dead'), { message: 'the dead letter' });
    expect(outcomes).toEqual(['retry', 'retry', 'dead']);
    expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(await effects(id)).toEqual([]);
    expect(await inboxRows(id)).toEqual([
      {
        status: 'dead',
        attempts: MAX_DELIVERIES,
        tenant_id: TENANT_B,
        last_error: 'Error: planned failure on delivery 3',
      },
    ]);
    await waitFor(() => c.isDeadLettered(id), { message: 'the broker to hold the message as dead' });
    const stats = await ops.app.get(OutboxAdminService).stats(TENANT_B);
    expect(stats.inbox[CONSUMER]).toEqual({ retrying: 0, dead: 1 });
    expect((await ops.app.get(OutboxAdminService).stats(TENANT_A)).inbox[CONSUMER]?.dead ?? 0).toBe(0);
  });

  it('counts no delivery whose record the database refused: after the outage the handler runs once, on run 1', async () => {
    await db.sql('revoke insert, update on consumer_inbox from outbox_app');
    const deliveries: (number | null)[] = [];
    const handler: Handler = async (_payload, context) => {
      deliveries.push(context.deliveryCount);
      runs.push({ id: context.messageId, attempt: context.attempt });
    };
    consumer =
      broker === 'rabbitmq'
        ? await rabbitConsumer(inbox, handler, outcomes)
        : await jetStreamConsumer(inbox, handler, outcomes);
    const id = randomUUID();
    try {
      await consumer.publish({ id, tenantId: TENANT_A });
      // more refused deliveries than maxDeliveries allows failed runs
      await waitFor(() => outcomes.length > MAX_DELIVERIES, { message: 'deliveries the database refused' });
    } finally {
      await db.sql('grant insert, update on consumer_inbox to outbox_app');
    }
    await waitFor(() => outcomes.includes('processed'), { message: 'the delivery after the outage' });
    expect(new Set(outcomes.slice(0, -1))).toEqual(new Set(['retry']));
    expect(runs).toEqual([{ id, attempt: 1 }]);
    // the broker counted every delivery
    expect(deliveries[0]).toBeGreaterThan(MAX_DELIVERIES);
    expect(await inboxRows(id)).toEqual([
      { status: 'processed', attempts: 1, tenant_id: TENANT_A, last_error: null },
    ]);
  });

  it("sets the message's tenant for row-level security: a handler of tenant A sees none of B's rows", async () => {
    await db.sql(
      `insert into inbox_effects (tenant_id, consumer, message_id, attempt, visible_tenants)
       values ($1, 'seed', 'seed-a', 1, '{}'), ($2, 'seed', 'seed-b', 1, '{}')`,
      [TENANT_A, TENANT_B],
    );
    const c = await start();
    const forA = randomUUID();
    const forB = randomUUID();
    await c.publish({ id: forA, tenantId: TENANT_A });
    await c.publish({ id: forB, tenantId: TENANT_B });
    await waitFor(() => outcomes.length === 2, { message: 'both messages' });
    expect(await effects(forA)).toEqual([{ attempt: 1, tenant_id: TENANT_A, visible_tenants: [TENANT_A] }]);
    expect(await effects(forB)).toEqual([{ attempt: 1, tenant_id: TENANT_B, visible_tenants: [TENANT_B] }]);
  });

  it('dead-letters at once, without calling the handler, a message that names no tenant or has a malformed body', async () => {
    const c = await start();
    const noTenant = randomUUID();
    const badBody = randomUUID();
    await c.publish({ id: noTenant });
    await c.publish({ id: badBody, tenantId: TENANT_A, body: '{"not json' });
    await waitFor(() => outcomes.length === 2, { message: 'both messages' });
    expect(outcomes).toEqual(['dead', 'dead']);
    expect(runs).toEqual([]);
    await waitFor(async () => (await c.isDeadLettered(noTenant)) && (await c.isDeadLettered(badBody)), {
      message: 'both dead-lettered',
    });
    // the one with a tenant is recorded dead (with why); the other cannot be recorded under any tenant
    expect(await inboxRows(noTenant)).toEqual([]);
    expect(await inboxRows(badBody)).toEqual([
      expect.objectContaining({ status: 'dead', attempts: 1, tenant_id: TENANT_A }),
    ]);
    expect((await inboxRows(badBody))[0]!.last_error).toMatch(/^its payload cannot be read: SyntaxError/);
  });

  if (broker === 'rabbitmq') {
    it('dead-letters after maxDeliveries on a classic queue too, which only flags a redelivery', async () => {
      const handler: Handler = async (_payload, context) => {
        runs.push({ id: context.messageId, attempt: context.attempt });
        throw new Error('always');
      };
      consumer = await rabbitConsumer(inbox, handler, outcomes, { type: 'classic' });
      const id = randomUUID();
      await consumer.publish({ id, tenantId: TENANT_A });
      await waitFor(() => outcomes.includes('dead'), { message: 'the dead letter' });
      expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
      await waitFor(() => consumer!.isDeadLettered(id), { message: 'the dead-letter queue to hold it' });
    });

    it('records a message whose id is not a UUID under a UUID derived from it, keeping the id as sent', async () => {
      const c = await start();
      await c.deliverTwice({ id: 'order-42', tenantId: TENANT_A });
      await waitFor(() => outcomes.length === 2, { message: 'two deliveries' });
      expect(outcomes.sort()).toEqual(['duplicate', 'processed']);
      expect(
        await db.sql("select message_id, status from consumer_inbox where message_id = 'order-42'"),
      ).toEqual([{ message_id: 'order-42', status: 'processed' }]);
    });
  }

  it('refuses a consumer name or maxDeliveries that is not valid, naming it', async () => {
    const message = { id: 'x' } as OutboxInboxMessage;
    await expect(inbox.handle('', message, async () => undefined)).rejects.toThrow(OutboxValidationError);
    await expect(
      inbox.handle(CONSUMER, message, async () => undefined, { maxDeliveries: 0 }),
    ).rejects.toMatchObject({ field: 'maxDeliveries' });
  });
});

describe('an app with the inbox', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('loads no broker client nor @nestjs/microservices (the adapters only type what they use)', () => {
    const child = (inbox: boolean) => {
      const result = spawnSync(
        process.execPath,
        [...TYPESCRIPT_NODE_ARGS, join(__dirname, '..', 'support', 'inbox-peers-child.ts')],
        {
          cwd: join(__dirname, '..', '..'),
          env: { ...process.env, DATABASE_URL: db.url, INBOX: inbox ? '1' : '0' },
          encoding: 'utf8',
          timeout: 60_000,
        },
      );
      if (result.status !== 0) throw new Error(`the child app failed:\n${result.stdout}\n${result.stderr}`);
      return result.stdout;
    };
    expect(child(false)).toContain('INBOX false\nLOADED []');
    expect(child(true)).toContain('INBOX true\nLOADED []');
  }, 120_000);
});
