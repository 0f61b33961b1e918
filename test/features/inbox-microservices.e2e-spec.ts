import { randomUUID } from 'node:crypto';
import { Controller, Injectable, type LoggerService, type Type } from '@nestjs/common';
import { EventPattern, Payload, Transport, type MicroserviceOptions } from '@nestjs/microservices';
import type { INestMicroservice } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { connect as natsConnect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { OutboxConfigurationError, OutboxModule } from 'nestjs-pg-outbox';
import {
  InboxContext,
  InboxHandler,
  OUTBOX_MESSAGE_HEADERS,
  OutboxInboxModule,
  OutboxNatsDeserializer,
  OutboxRmqDeserializer,
  type OutboxInboxContext,
} from 'nestjs-pg-outbox/inbox';
import { type OutboxWebhookEnvelope } from 'nestjs-pg-outbox/webhooks';
import {
  NATS_SERVERS,
  RABBITMQ_URL,
  TestJetStream,
  TestRabbitQueue,
  uniqueName,
  type ForwardedMessage,
} from '../support/brokers';
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

const EVENT = 'crm.contact.created.v1';
/** Subjects of this run: Nest's NATS transport subscribes to the `@EventPattern` subject itself. */
const CORE_SUBJECT = `${uniqueName('inbox_core')}.${EVENT}`;
const PUSH_SUBJECT = uniqueName('inbox_push');
const MAX_DELIVERIES = 3;

/** What the handlers did, and which deliveries they fail (by message id). */
@Injectable()
class InboxProbe {
  readonly runs: { id: string; attempt: number; eventId: string }[] = [];
  readonly failing = new Map<string, (attempt: number) => boolean>();

  async handle(envelope: OutboxWebhookEnvelope, inbox: OutboxInboxContext): Promise<void> {
    this.runs.push({ id: inbox.messageId, attempt: inbox.attempt, eventId: envelope.eventId });
    await recordInboxEffect(inbox);
    if (this.failing.get(inbox.messageId)?.(inbox.attempt))
      throw new Error(`planned failure on delivery ${inbox.attempt}`);
  }
}

@Controller()
class RmqCrmController {
  constructor(private readonly probe: InboxProbe) {}

  @EventPattern<string>(EVENT)
  @InboxHandler('crm-sync', { maxDeliveries: MAX_DELIVERIES })
  onContactCreated(
    @Payload() envelope: OutboxWebhookEnvelope,
    @InboxContext() inbox: OutboxInboxContext,
  ): Promise<void> {
    return this.probe.handle(envelope, inbox);
  }
}

@Controller()
class NatsCrmController {
  constructor(private readonly probe: InboxProbe) {}

  @EventPattern<string>(CORE_SUBJECT)
  @InboxHandler('crm-sync-core', { maxDeliveries: MAX_DELIVERIES })
  onCore(
    @Payload() envelope: OutboxWebhookEnvelope,
    @InboxContext() inbox: OutboxInboxContext,
  ): Promise<void> {
    return this.probe.handle(envelope, inbox);
  }

  @EventPattern<string>(PUSH_SUBJECT)
  @InboxHandler('crm-sync-jetstream', { maxDeliveries: MAX_DELIVERIES })
  onJetStream(
    @Payload() envelope: OutboxWebhookEnvelope,
    @InboxContext() inbox: OutboxInboxContext,
  ): Promise<void> {
    return this.probe.handle(envelope, inbox);
  }
}

/** Keeps the lines the inbox logs, to wait for one (a duplicate on core NATS leaves no other trace). */
class CapturingLogger implements LoggerService {
  readonly lines: string[] = [];
  log = (m: unknown): void => void this.lines.push(String(m));
  warn = (m: unknown): void => void this.lines.push(String(m));
  error = (m: unknown): void => void this.lines.push(String(m));
  debug = (m: unknown): void => void this.lines.push(String(m));
  verbose = (): void => undefined;
}

/** A Nest microservice as an app would start it, with the outbox and the inbox, on `url`. */
async function startMicroservice(
  url: string,
  controller: Type,
  transport: MicroserviceOptions,
  logger: LoggerService,
): Promise<{ micro: INestMicroservice; probe: InboxProbe }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      ScheduleModule.forRoot(),
      TypeOrmModule.forRoot({ type: 'postgres', url }),
      OutboxModule.forRoot({ relay: { enabled: false } }),
      OutboxInboxModule.forRoot({ redelivery: { baseMs: 10, capMs: 40, jitter: 0 } }),
    ],
    controllers: [controller],
    providers: [InboxProbe],
  })
    .setLogger(logger)
    .compile();
  const micro = moduleRef.createNestMicroservice<MicroserviceOptions>(transport);
  await micro.listen();
  return { micro, probe: micro.get(InboxProbe) };
}

describe('the inbox on @nestjs/microservices handlers (@InboxHandler, @InboxContext)', () => {
  let db: TestDatabase;
  let appRole: TestRole;
  beforeAll(async () => {
    db = await createTestDatabase(INBOX_EFFECTS_SQL);
    appRole = await createLoginRole(db, 'outbox_app', [INBOX_EFFECTS_GRANT]);
  });
  afterAll(async () => {
    await db?.drop();
    await appRole?.drop();
  });

  const effects = (id: string) =>
    db.sql<{ attempt: number; tenant_id: string; visible_tenants: string[] }>(
      'select attempt, tenant_id, visible_tenants from inbox_effects where message_id = $1 order by id',
      [id],
    );
  const inboxRow = async (id: string) =>
    (
      await db.sql<{ status: string; attempts: number; consumer_name: string }>(
        'select status, attempts, consumer_name from consumer_inbox where event_id = $1',
        [id],
      )
    )[0];

  describe('on the RMQ transport (noAck: false)', () => {
    let queue: TestRabbitQueue;
    let micro: INestMicroservice;
    let probe: InboxProbe;
    beforeEach(async () => {
      queue = await TestRabbitQueue.create('quorum');
      ({ micro, probe } = await startMicroservice(
        appRole.url,
        RmqCrmController,
        {
          transport: Transport.RMQ,
          options: {
            urls: [RABBITMQ_URL],
            queue: queue.queue,
            queueOptions: queue.queueOptions('quorum'),
            noAck: false,
            // one message at a time: a message published after others is handled after they were settled
            prefetchCount: 1,
            deserializer: new OutboxRmqDeserializer(),
          },
        },
        new CapturingLogger(),
      ));
    });
    afterEach(async () => {
      await micro?.close();
      await queue?.close();
    });
    const forwarded = (m: Omit<ForwardedMessage, 'eventName'>): ForwardedMessage => ({
      ...m,
      eventName: EVENT,
    });

    it('routes by the x-outbox-event header, hands the whole envelope to @Payload(), and runs a duplicate once', async () => {
      const id = randomUUID();
      const after = randomUUID();
      queue.publish(forwarded({ id, tenantId: TENANT_A }));
      queue.publish(forwarded({ id, tenantId: TENANT_A }));
      queue.publish(forwarded({ id: after, tenantId: TENANT_A }));
      await waitFor(async () => (await effects(after)).length === 1, {
        message: 'the message after the duplicate',
      });
      expect(probe.runs.filter((r) => r.id === id)).toEqual([{ id, attempt: 1, eventId: id }]);
      expect(await effects(id)).toHaveLength(1);
      expect(await inboxRow(id)).toEqual({ status: 'processed', attempts: 1, consumer_name: 'crm-sync' });
      await waitFor(async () => (await queue.ready()) === 0, { message: 'an empty queue' });
    });

    it('rolls back a failed run, redelivers with nack and requeue, and commits the next run once', async () => {
      const id = randomUUID();
      probe.failing.set(id, (attempt) => attempt === 1);
      queue.publish(forwarded({ id, tenantId: TENANT_B }));
      await waitFor(async () => (await inboxRow(id))?.status === 'processed', {
        message: 'the second delivery',
      });
      expect(probe.runs.filter((r) => r.id === id).map((r) => r.attempt)).toEqual([1, 2]);
      expect((await effects(id)).map((e) => e.attempt)).toEqual([2]);
    });

    it("dead-letters after maxDeliveries to the queue's dead-letter exchange, with the inbox row dead", async () => {
      const id = randomUUID();
      probe.failing.set(id, () => true);
      queue.publish(forwarded({ id, tenantId: TENANT_A }));
      const dead: string[] = [];
      await waitFor(async () => (dead.push(...(await queue.deadLettered())), dead.includes(id)), {
        message: 'the dead-letter queue to hold the message',
      });
      expect(probe.runs.filter((r) => r.id === id).map((r) => r.attempt)).toEqual([1, 2, 3]);
      expect(await inboxRow(id)).toEqual({ status: 'dead', attempts: 3, consumer_name: 'crm-sync' });
      expect(await effects(id)).toEqual([]);
    });

    it("runs the handler under the message's tenant for row-level security", async () => {
      await db.sql(
        `insert into inbox_effects (tenant_id, consumer, message_id, attempt, visible_tenants)
         values ($1, 'seed', $3, 1, '{}'), ($2, 'seed', $4, 1, '{}')`,
        [TENANT_A, TENANT_B, randomUUID(), randomUUID()],
      );
      const forB = randomUUID();
      queue.publish(forwarded({ id: forB, tenantId: TENANT_B }));
      await waitFor(async () => (await effects(forB)).length === 1, { message: 'the message of tenant B' });
      expect(await effects(forB)).toEqual([{ attempt: 1, tenant_id: TENANT_B, visible_tenants: [TENANT_B] }]);
    });
  });

  describe('on the NATS transport', () => {
    let stream: TestJetStream;
    let nc: NatsConnection;
    let micro: INestMicroservice;
    let probe: InboxProbe;
    let logger: CapturingLogger;
    beforeEach(async () => {
      stream = await TestJetStream.create({ deliverSubject: PUSH_SUBJECT });
      nc = await natsConnect({ servers: NATS_SERVERS });
      logger = new CapturingLogger();
      ({ micro, probe } = await startMicroservice(
        appRole.url,
        NatsCrmController,
        {
          transport: Transport.NATS,
          options: { servers: [NATS_SERVERS], deserializer: new OutboxNatsDeserializer() },
        },
        logger,
      ));
      // core NATS drops what no subscription takes: wait until the server has the microservice's subscriptions
      await (micro as unknown as { unwrap<T>(): T }).unwrap<NatsConnection>().flush();
    });
    afterEach(async () => {
      await micro?.close();
      await nc?.close();
      await stream?.close();
    });
    /** Publishes on core NATS with the headers a forwarder sets (a JetStream publish reaches core subscribers so). */
    const publishCore = (m: ForwardedMessage): void => {
      const h = natsHeaders();
      h.set(OUTBOX_MESSAGE_HEADERS.natsMessageId, m.id);
      h.set(OUTBOX_MESSAGE_HEADERS.event, EVENT);
      if (m.tenantId) h.set(OUTBOX_MESSAGE_HEADERS.tenant, m.tenantId);
      nc.publish(CORE_SUBJECT, JSON.stringify({ eventId: m.id, eventName: EVENT, data: {} }), { headers: h });
    };

    it('runs a duplicate core NATS message once, under its tenant', async () => {
      const id = randomUUID();
      publishCore({ id, tenantId: TENANT_A });
      publishCore({ id, tenantId: TENANT_A });
      await waitFor(() => logger.lines.some((l) => l.includes(`message ${id} is a duplicate`)), {
        message: 'the duplicate to be skipped',
      });
      expect(probe.runs.filter((r) => r.id === id)).toEqual([{ id, attempt: 1, eventId: id }]);
      expect(await effects(id)).toEqual([{ attempt: 1, tenant_id: TENANT_A, visible_tenants: [TENANT_A] }]);
      expect(await inboxRow(id)).toEqual({
        status: 'processed',
        attempts: 1,
        consumer_name: 'crm-sync-core',
      });
    });

    it('rolls back a failed core NATS message and records the failure, which core NATS cannot redeliver', async () => {
      const id = randomUUID();
      probe.failing.set(id, () => true);
      publishCore({ id, tenantId: TENANT_B });
      await waitFor(async () => (await inboxRow(id))?.status === 'retrying', {
        message: 'the failure record',
      });
      expect(await effects(id)).toEqual([]);
      expect(logger.lines.some((l) => l.includes(id) && l.includes('cannot redeliver'))).toBe(true);
      // the publisher sending it again is a new delivery, counted by the inbox
      probe.failing.delete(id);
      publishCore({ id, tenantId: TENANT_B });
      await waitFor(async () => (await inboxRow(id))?.status === 'processed', {
        message: 'the second delivery',
      });
      expect((await effects(id)).map((e) => e.attempt)).toEqual([2]);
    });

    it('naks a JetStream message a push consumer delivered, with a delay, and processes it on redelivery', async () => {
      const id = randomUUID();
      probe.failing.set(id, (attempt) => attempt === 1);
      await stream.publish({ id, tenantId: TENANT_A, eventName: EVENT });
      await waitFor(async () => (await inboxRow(id))?.status === 'processed', { message: 'the redelivery' });
      expect(probe.runs.filter((r) => r.id === id).map((r) => r.attempt)).toEqual([1, 2]);
      expect((await effects(id)).map((e) => e.attempt)).toEqual([2]);
      await waitFor(async () => (await stream.unsettled()) === 0, {
        message: 'the consumer to have acked it',
      });
    });

    it('terms a JetStream message after maxDeliveries, with the inbox row dead', async () => {
      const id = randomUUID();
      probe.failing.set(id, () => true);
      const seq = await stream.publish({ id, tenantId: TENANT_B, eventName: EVENT });
      await waitFor(() => stream.terminated.includes(seq), { message: 'the server to report it terminated' });
      expect(probe.runs.filter((r) => r.id === id).map((r) => r.attempt)).toEqual([1, 2, 3]);
      expect(await inboxRow(id)).toEqual({
        status: 'dead',
        attempts: 3,
        consumer_name: 'crm-sync-jetstream',
      });
    });
  });

  describe('wiring', () => {
    @Controller()
    class Misnamed {
      @EventPattern('a.b.v1')
      @InboxHandler('same')
      first(_data: unknown): void {}

      @EventPattern('a.c.v1')
      @InboxHandler('same')
      second(_data: unknown): void {}

      @EventPattern('a.d.v1')
      @InboxHandler('bad-max', { maxDeliveries: 0 })
      third(_data: unknown): void {}
    }

    const boot = async (imports: unknown[]) => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          ScheduleModule.forRoot(),
          TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
          OutboxModule.forRoot({ relay: { enabled: false } }),
          ...(imports as []),
        ],
        controllers: [Misnamed],
      })
        .setLogger(new CapturingLogger())
        .compile();
      try {
        await moduleRef.init();
      } finally {
        await moduleRef.close().catch(() => undefined);
      }
    };

    it('makes init() reject with every @InboxHandler problem listed', async () => {
      const error = await boot([OutboxInboxModule.forRoot()]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      const problems = (error as OutboxConfigurationError).problems;
      expect(problems).toHaveLength(2);
      expect(problems[0]).toContain('Misnamed#third');
      expect(problems[1]).toContain('Misnamed#first, Misnamed#second');
    });

    it('makes init() reject, naming the import, when OutboxInboxModule is missing', async () => {
      const error = await boot([]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      expect((error as Error).message).toContain('OutboxInboxModule.forRoot()');
    });
  });
});
